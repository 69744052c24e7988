"""intfa on torch tensors: quantize, attention_int8 and attention as torch.library custom ops.

Each public function checks its arguments first (types, dtypes, shapes, devices: an
InvalidArgument naming the argument, before anything is launched), then calls a custom op, so a
``torch.compile``d graph keeps intfa's kernels as single nodes (the fake implementations give
the output shapes without running anything). Plain eager calls run the op's implementation
directly, without the dispatcher's per-call cost (_ops.CustomOp). The ops run on the tensors'
device and its current torch stream; the C++ runtime checks strides and alignment again before
every launch.

Layouts: "HND" tensors are [batch, heads, seq, head_dim] (SDPA's), "NHD" ones
[batch, seq, heads, head_dim] (FlashAttention's). Only the head dim must have stride 1.

This module holds the public entry points, their documentation and their way to the fallback;
the rest of the torch layer is split by job: _attention_checks (the argument checks), _op_args
(the checked arguments, named), _plans (what is kept per signature: checked calls, C++ plans),
_ops (the custom ops, their fake implementations and launches), _tensors (layouts, streams,
outputs), _fallback (the fallback policy, no torch).
"""
from typing import NamedTuple, Optional

import torch

from intfa import (_accuracy_guard, _attention_checks, _checks, _fallback, _ops, _plans, _sdpa,
                   _tensors)
from intfa._errors import Error, Unsupported, invalid_argument

# The options (variant, smooth_k, rotate and the numerics options of the C++ list) are checked and
# defaulted by intfa._checks.option, the library's one table's names. An entry point takes a
# numerics option by its keyword and the `numerics` dict of its first statement (by name: dynamo
# cannot trace locals(), so torch.compile'd callers need it spelled), and nothing below names one.

# A fallback inside a torch.compile'd graph warns without breaking the graph: dynamo runs the
# warning after the graph (a function of constants returning None may be reordered so).
_reorderable = getattr(getattr(torch._dynamo, "config", None), "reorderable_logging_functions",
                       None)
if isinstance(_reorderable, set):
    _reorderable.add(_fallback.warn)


class Quantized(NamedTuple):
    """What ``quantize`` returns. The first six fields are ``attention_int8``'s first six
    arguments: ``intfa.attention_int8(*quantized[:6], layout=quantized.layout)``."""

    q: torch.Tensor  # int8, q's shape and layout
    k: torch.Tensor  # int8, k's shape and layout
    v: Optional[torch.Tensor]  # int8 [B, H_kv, D, v_padded_seq(N_kv)] (the INT8 V layout); or None
    q_scale: torch.Tensor  # float32 [B, H_q, N_q]: q ~ q8 * q_scale per token
    k_scale: torch.Tensor  # float32 [B, H_kv, N_kv]
    # float32: [B, H_kv] per tensor, [B, H_kv, D] per channel, [B, H_kv, N_pad / 64, D] per block
    v_scale: Optional[torch.Tensor]
    # float32 mean of K over (a sample of) the sequence ([B, H_kv, 1, D] for HND, [B, 1, H_kv, D]
    # for NHD) that was subtracted before quantizing, when smooth_k; else None.
    k_mean: Optional[torch.Tensor]
    layout: str
    # float32 [B, H_q, N_q], q . k_mean per query row when smooth_k (else None): pass it to
    # ``attention_int8(..., q_dot_k_mean=...)`` and its LSE is that of the original scores.
    q_dot_k_mean: Optional[torch.Tensor] = None


# --- the public functions -------------------------------------------------------------------

def quantize(q, k, v=None, *, layout="HND", v_granularity=None, smooth_k=None, rotate=None):
    """FP16/BF16 Q, K (and V) -> INT8 tensors and FP32 scales for ``attention_int8``, on the
    tensors' device and current stream. Q and K get one scale per token (scale = max|row| / 127);
    V, when given, is written in the kernel's INT8 V layout with scales per ``v_granularity``
    ("tensor", "channel" or "block"; default as in the C++ API). ``smooth_k`` (on by default, as
    in ``attention``) subtracts K's mean over a sample of its keys first, in the quantize kernel
    (exact for attention: softmax ignores it; narrower INT8 range when K has channel offsets), and
    gives ``q_dot_k_mean`` for ``attention_int8``'s LSE. ``rotate`` (off by default) rotates Q and
    K by one orthogonal (signed Walsh-Hadamard) matrix before quantizing: the same attention, with
    outlier channels spread over the row. Returns ``Quantized``."""
    v_granularity, smooth_k, rotate = _attention_checks.check_quantize(
        q, k, v, layout, v_granularity, smooth_k, rotate)
    # K first: with smoothing, Q's kernel reads K's means for the LSE term.
    rotate = rotate == "on"
    k8, k_scale, k_mean = _ops.quantize_qk_op(k, layout, smooth_k, rotate)
    q8, q_scale, q_dot_k_mean = _ops.quantize_qk_op(q, layout, False, rotate,
                                                    k_mean if smooth_k else None)
    if smooth_k:  # [B, H, D] -> broadcastable against K in its layout
        k_mean = k_mean.unsqueeze(2 if layout == "HND" else 1)
    else:
        k_mean = q_dot_k_mean = None
    v8 = v_scale = None
    if v is not None:
        v8, v_scale = _ops.quantize_v_op(v, layout, v_granularity)
    return Quantized(q8, k8, v8, q_scale, k_scale, v_scale, k_mean, layout, q_dot_k_mean)


def attention_int8(q, k, v, q_scale, k_scale, v_scale=None, *, is_causal=False, sm_scale=None,
                   layout="HND", out_dtype=None, return_lse=False, p_encoding=None, p_scale=None,
                   config=None, q_dot_k_mean=None):
    """Attention over quantized inputs (see ``quantize``): full INT8 when ``v`` is INT8 in the V
    layout (``v_scale`` then required; its shape gives the granularity), half INT8 when ``v`` is
    FP16/BF16 [B, H, N, D] in ``layout`` (``v_scale`` None). Output in ``layout`` with q's shape,
    ``out_dtype`` torch.float16 or torch.bfloat16 (default: v's 16-bit dtype, else float16).
    With ``return_lse`` also the natural-log log-sum-exp, float32 [B, H_q, N_q]: of the original
    scores when ``q_dot_k_mean`` is ``quantize``'s (K smoothed, the default), else of the scores
    of the given q and k (the smoothed ones, lower by sm_scale * q . k_mean).
    ``p_encoding`` "u8"/"s8" and ``p_scale`` "running"/"tile" select the full-INT8 P numerics.
    ``k_scale`` is per token, as ``quantize`` writes it (``attention``'s ``k_granularity``
    "block" is not taken here). ``config`` (block_m, block_n, warps, stages) overrides the tile
    config the tuning database or the heuristic would pick (benchmarks, tuning); the C++ runtime
    checks it before compiling."""
    numerics = dict(p_encoding=p_encoding, p_scale=p_scale)
    call = None
    signature = None
    tensors = (q, k, v, q_scale, k_scale, v_scale, q_dot_k_mean)
    if not torch.compiler.is_compiling():
        try:
            # As in `attention`: a call with the signature of one that passed the checks passes
            # them too (they read shapes, strides, dtypes, devices and the options only).
            signature = tuple(map(_plans.tensor_signature, tensors)) + (
                is_causal, type(is_causal), sm_scale, type(sm_scale), layout, out_dtype,
                return_lse, tuple(numerics.values()), type(config),
                None if config is None else tuple(config),
                None if config is None else tuple(map(type, config)))
            call = _plans.CHECKED_INT8_CALLS.get(signature)
        except (AttributeError, TypeError):  # not tensors, or an unhashable option: checked below
            signature = None
    if call is None:
        call = _plans.CheckedCall(_attention_checks.check_attention_int8(
            q, k, v, q_scale, k_scale, v_scale, is_causal, sm_scale, layout, out_dtype, numerics,
            config, q_dot_k_mean))
        if signature is not None:
            _plans.remember(_plans.CHECKED_INT8_CALLS, signature, call)
    return_lse = bool(return_lse)
    if signature is not None and _ops.plain_eager(tensors):
        # The op's implementation with the plan of this signature at hand (the output is q's
        # shape in out_dtype, both in the signature).
        out, lse = _ops.run_attention_int8(q, k, v, q_scale, k_scale, v_scale, q_dot_k_mean,
                                           call.args, return_lse, call)
    else:
        out, lse = _ops.call_attention_int8(q, k, v, q_scale, k_scale, v_scale, q_dot_k_mean,
                                            call.args, return_lse)
    return (out, lse) if return_lse else out


def attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
              enable_gqa=False, *, sm_scale=None, layout="HND", variant="auto",
              v_granularity=None, smooth_k=None, p_encoding=None, p_scale=None,
              rotate=None, return_lse=False, out=None, fallback=None, k_granularity=None,
              check=None):
    """Quantizes and attends in one call, shaped like
    ``torch.nn.functional.scaled_dot_product_attention`` (same positional arguments) so that it
    can be swapped in: q [B, H_q, N_q, D], k and v [B, H_kv, N_kv, D] (layout "HND"; "NHD" takes
    [B, N, H, D]), FP16 or BF16, one dtype; returns q's shape and dtype. GQA/MQA (H_q a multiple
    of H_kv) always works, whatever ``enable_gqa`` says. ``sm_scale`` (or SDPA's ``scale``)
    defaults to 1/sqrt(D). Causal masking with N_q != N_kv is bottom-right aligned
    (FlashAttention >= 2.1; SDPA aligns top-left); a query that sees no key outputs zeros.
    ``variant`` "full_int8" quantizes V too, "half_int8" keeps V in 16 bits (more accurate, and
    faster at some shapes); "auto" (the default) takes the one intfa's table gives for this head
    dim, length and causal flag on this GPU (``intfa.auto_variant``; sm_90a: half INT8 at
    d = 64 and d = 256 and at d = 128 up to 2k tokens, 8k causal; full INT8 elsewhere; rows
    ``intfa tune --variant-table`` measured on this GPU first). ``smooth_k``
    (default on) quantizes K less its channel means (over a sample of keys), ``rotate`` rotates Q
    and K by one orthogonal matrix first, which spreads outlier channels: True (every head),
    False, or "auto" (the default: the KV heads whose sampled keys have a few channels much
    larger than the rest, and their query heads, decided on the GPU in K smoothing's pass, at no
    cost where no head needs it); neither changes the attention in exact arithmetic. Forward
    only.

    ``k_granularity`` (None: the C++ default, "token") sets K's quantization scales: "token" one
    per key; "block" one per 64 consecutive keys of a (batch, head), set by the block's largest
    key. With "block" the kernel folds each block's scale into the softmax's exponent multiplier
    instead of multiplying every score by its key's scale, so it issues fewer instructions per
    score (a faster kernel), while a block's smaller keys are quantized with a coarser step (a
    little less accurate). ``attention_varlen`` and ``attention_int8`` keep K per token.

    Head dims 64, 128 and 256 run their own kernels; any other multiple of 8 up to 256 runs the
    next of them, which reads the missing channels as zeros (exact: intfa/_padding.py) and writes
    only the caller's, with no copies and the default scale still 1/sqrt(D).

    ``return_lse``: also returns the natural-log log-sum-exp of each query's scaled scores,
    float32 [B, H_q, N_q] whatever the layout (FlashAttention's softmax_lse; -inf for a query that
    sees no key): ``(out, lse)``, of the original scores whatever ``smooth_k`` and ``rotate``.
    ``out``: a tensor of q's shape, dtype and device that receives the output (written in place
    and returned); stride 1 on the head dim, 4-byte steps elsewhere, no overlap with k or v.

    What intfa cannot serve (an ``attn_mask``, ``dropout_p`` > 0, FP32 inputs, head dims other
    than the above, sizes its kernels do not take, inputs that need gradients, non-CUDA tensors,
    a GPU below compute capability 8.0, an error from the runtime at launch) follows
    ``fallback``: "sdpa" computes the same attention (this function's causal alignment, GQA,
    layout, ``return_lse`` and ``out``) with torch's SDPA, with one FallbackWarning per reason and
    process and a count in ``intfa.fallback_stats()``; "error" raises (InvalidArgument naming the
    argument, or Unsupported). None: the process-wide policy (``intfa.set_fallback``, else
    INTFA_FALLBACK, else "sdpa").

    ``check``: True compares the query rows of two random heads of intfa's output with a
    float32 attention of the same inputs and warns (``intfa.AccuracyWarning``, once per numerics
    and process) when their error is far above what these numerics give on N(0,1) inputs: inputs
    that quantize badly, such as a few large channels in Q or K. It syncs with the host, so it is
    off by default; None: INTFA_CHECK=1 turns it on. Skipped inside torch.compile and CUDA graph
    capture. ``intfa.accuracy_check_stats()`` counts the checks."""
    numerics = dict(p_encoding=p_encoding, p_scale=p_scale, v_granularity=v_granularity,
                    k_granularity=k_granularity)
    _accuracy_guard.check_argument(check)
    result = _attend(q, k, v, attn_mask, dropout_p, is_causal, scale, sm_scale=sm_scale,
                     layout=layout, variant=variant, smooth_k=smooth_k, rotate=rotate,
                     return_lse=return_lse, out=out, fallback=fallback, check=check,
                     **numerics)
    if type(result) is not Unserved:
        return result
    _attention_checks.check_layout(layout)  # (a call with a mask skipped the checks)
    if out is not None and isinstance(q, torch.Tensor):
        _attention_checks.check_out(out, q)
    return _sdpa.attention(q, k, v, attn_mask, dropout_p, is_causal,
                           sm_scale if sm_scale is not None else scale, layout, return_lse, out)


class Unserved(NamedTuple):
    """What `_attend` returns for a call intfa did not serve (counted and warned already): the
    caller runs its SDPA call. `reason` is a key of intfa._fallback.REASONS."""

    reason: str


def _attend(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, *,
            sm_scale=None, layout="HND", variant="auto", smooth_k=None, rotate=None,
            return_lse=False, out=None, fallback=None, check=None, **numerics):
    """`attention` up to its fallback: intfa's result, or Unserved when intfa does not serve the
    call and the policy is "sdpa" ("error" raises). `numerics`: the numerics options by name (a
    name none is: TypeError). `check`: the accuracy check (`attention`'s docstring; None:
    INTFA_CHECK). The integrations call this, then their client's own SDPA call with the
    client's arguments."""
    if attn_mask is not None:
        return _unserved("attn_mask", fallback, _attention_mask_error)
    if dropout_p != 0.0:
        return _unserved("dropout", fallback, lambda: _dropout_error(dropout_p))
    signature = None
    call = None
    if not torch.compiler.is_compiling():
        try:
            # The checks read only these: a call with the signature of one that passed them passes
            # them too. The types keep True from standing for 1 (a bool scale is refused).
            signature = (q.shape, k.shape, v.shape, q.stride(), k.stride(), v.stride(), q.dtype,
                         k.dtype, v.dtype, q.device, k.device, v.device, is_causal, scale,
                         type(scale), sm_scale, type(sm_scale), layout, variant, smooth_k,
                         type(smooth_k), rotate, type(rotate), tuple(numerics.items()),
                         return_lse, fallback,
                         None if out is None else (out.shape, out.stride(), out.dtype,
                                                   out.device))
            call = _plans.CHECKED_ATTENTION_CALLS.get(signature)
        except (AttributeError, TypeError):  # not tensors, or an unhashable option: checked below
            signature = None
    checks = (q, k, v, is_causal, scale, sm_scale, layout, variant, smooth_k, out, fallback,
              rotate, numerics)
    if call is None:
        call = _checked_call(*checks)
        if signature is not None:
            _plans.remember(_plans.CHECKED_ATTENTION_CALLS, signature, call)
    if call.unserved is not None:
        # Policy "error" runs the checks again: they raise the typed error afresh.
        return _unserved(call.unserved, fallback,
                         lambda: _attention_checks.check_attention(*checks), call.detail)
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad):
        return _unserved("autograd", fallback, lambda: _fallback.unsupported("autograd"))
    fast = signature is not None and _ops.plain_eager((q, k, v) if out is None
                                                      else (q, k, v, out))
    if fast and out is not None and out.data_ptr() % 4:
        raise invalid_argument("out.data_ptr", out.data_ptr(), "expected 4-byte alignment")
    try:
        if fast:
            # The op's implementation with the plan of this signature at hand (the output's
            # strides are q's shape's, or out's: in the signature either way).
            result, lse = _ops.run_attention(q, k, v, out, call.args, return_lse, call)
        else:
            result, lse = _ops.call_attention(q, k, v, call.args, bool(return_lse))
            if out is not None:
                result = out.copy_(result)
    except Error as error:
        # The runtime refused the call at launch (before launching anything) or could not
        # compile its kernel: a global SDPA patch must not break the model for that.
        if torch.compiler.is_compiling() or _fallback.resolve(fallback) == "error":
            raise
        _fallback.record("intfa_error", f"{type(error).__name__}: {error}")
        return Unserved("intfa_error")
    if (check is not False and not torch.compiler.is_compiling()
            and _accuracy_guard.requested(check) and _accuracy_guard.possible()):
        args = call.args  # checked and defaulted
        # The variant the plan ran ("auto" resolved as it resolved it: its bound is that one's).
        _, _, seq_q, head_dim = _tensors.bhnd(q, args.layout)
        variant = _checks.resolve_variant(args.variant, q.device, head_dim, seq_q,
                                          _tensors.bhnd(k, args.layout)[2], args.is_causal)
        _accuracy_guard.check(q, k, v, result, is_causal=args.is_causal,
                              sm_scale=args.sm_scale or None, layout=args.layout,
                              variant=variant,
                              k_granularity=dict(args.numerics).get("k_granularity"),
                              rotate=args.rotate, stacklevel=3)
    return (result, lse) if return_lse else result


def _checked_call(*checks):
    try:
        return _plans.CheckedCall(_attention_checks.check_attention(*checks))
    except Error as error:
        reason = getattr(error, "fallback_reason", None)
        if reason is None:  # the caller's mistake: SDPA would refuse it too
            raise
        return _plans.CheckedCall(unserved=reason, detail=str(error))


def _unserved(reason, fallback, error, detail=""):
    """Unserved(reason) under policy "sdpa" (counted and warned), else raises `error()`."""
    if _fallback.resolve(fallback) == "error":
        raise error()
    _fallback.record(reason, detail)
    return Unserved(reason)


def _attention_mask_error():
    return Unsupported("intfa.attention: attn_mask is not supported (only is_causal masking)",
                       field="attn_mask")


def _dropout_error(dropout_p):
    return Unsupported(f"intfa.attention: dropout_p = {dropout_p} is not supported (only 0)",
                       field="dropout_p")


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, *,
                     is_causal=False, sm_scale=None, variant="auto", v_granularity=None,
                     smooth_k=None, p_encoding=None, p_scale=None, return_lse=False,
                     rotate=None):
    """Quantizes and attends a varlen (packed) batch in one call, with FlashAttention's
    ``flash_attn_varlen_func`` arguments: q [total_q, H_q, D], k and v [total_k, H_kv, D], FP16 or
    BF16, one dtype; sequence b is rows ``cu_seqlens_q[b]:cu_seqlens_q[b + 1]`` of q (and of the
    output) and rows ``cu_seqlens_k[b]:cu_seqlens_k[b + 1]`` of k and v. The offsets are int32
    CUDA tensors [batch + 1]; ``max_seqlen_q`` / ``max_seqlen_k`` are the longest sequences (they
    size the grid and V's padding). The offsets are not read on the host (no synchronisation):
    they must start at 0, never decrease, end at total_q / total_k and step by at most the max
    lengths. A sequence may be empty (q, k and v each need one row in all); a query that sees no
    key outputs zeros (LSE -inf). Causal masking is per sequence, bottom-right aligned. Every
    sequence is quantized as ``intfa.attention`` quantizes it alone (per-token Q and K; V's scales
    per sequence), except that ``smooth_k`` (on by default) subtracts the mean over (a sample of)
    all packed keys (still exact for attention, and the LSE stays that of the original scores);
    ``rotate`` as in ``attention``; ``variant`` too, except that "auto" is full INT8 here (the
    variant table was measured on dense batches). K's scales are per token (``attention``'s
    ``k_granularity`` "block" takes dense batches only). Returns the output [total_q, H_q, D] in
    q's dtype, and with ``return_lse`` also the natural-log log-sum-exp, float32 [H_q, total_q].
    Runs the Hopper kernel on sm_90a (Q quantized in the kernel), the portable one elsewhere.
    Forward only: no autograd."""
    numerics = dict(p_encoding=p_encoding, p_scale=p_scale, v_granularity=v_granularity)
    call = None
    signature = None
    tensors = (q, k, v, cu_seqlens_q, cu_seqlens_k)
    if not torch.compiler.is_compiling():
        try:
            # As in `attention`: a call with the signature of one that passed the checks passes
            # them too (they read shapes, strides, dtypes, devices, the lengths and the options;
            # never the offsets' values).
            signature = tuple(map(_plans.tensor_signature, tensors)) + (
                max_seqlen_q, type(max_seqlen_q), max_seqlen_k, type(max_seqlen_k), is_causal,
                sm_scale, type(sm_scale), variant, smooth_k, type(smooth_k),
                tuple(numerics.values()), return_lse, rotate, type(rotate))
            call = _plans.CHECKED_VARLEN_CALLS.get(signature)
        except (AttributeError, TypeError):  # not tensors, or an unhashable option: checked below
            signature = None
    if call is None:
        call = _plans.CheckedCall(_attention_checks.check_attention_varlen(
            q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, is_causal, sm_scale,
            variant, smooth_k, rotate, numerics))
        if signature is not None:
            _plans.remember(_plans.CHECKED_VARLEN_CALLS, signature, call)
    return_lse = bool(return_lse)
    if signature is not None and _ops.plain_eager(tensors):
        out, lse = _ops.run_attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                             max_seqlen_k, call.args, return_lse, call)
    else:
        out, lse = _ops.call_attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                              max_seqlen_k, call.args, return_lse)
    return (out, lse) if return_lse else out
