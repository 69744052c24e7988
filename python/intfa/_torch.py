"""intfa on torch tensors: quantize, attention_int8 and attention as torch.library custom ops.

Each public function checks its arguments first (types, dtypes, shapes, devices: an
InvalidArgument naming the argument, before anything is launched), then calls a custom op, so a
``torch.compile``d graph keeps intfa's kernels as single nodes (the fake implementations give
the output shapes without running anything). Plain eager calls run the op's implementation
directly, without the dispatcher's per-call cost (_CustomOp). The ops run on the tensors' device
and its current torch stream; the C++ runtime checks strides and alignment again before every
launch.

Layouts: "HND" tensors are [batch, heads, seq, head_dim] (SDPA's), "NHD" ones
[batch, seq, heads, head_dim] (FlashAttention's). Only the head dim must have stride 1.
"""
import contextlib
from typing import List, NamedTuple, Optional, Tuple

import torch

from intfa import _checks, _fallback, _intfa, _padding, _sdpa
from intfa._checks import DEFAULTS, option
from intfa._errors import Error, InvalidArgument, Unsupported, invalid_argument

LAYOUTS = ("HND", "NHD")
# The numerics options (variant, v_granularity, p_encoding, p_scale, k_granularity, smooth_k,
# rotate) are checked and defaulted by _checks.option, the library's one table's names.

# A fallback inside a torch.compile'd graph warns without breaking the graph: dynamo runs the
# warning after the graph (a function of constants returning None may be reordered so).
_reorderable = getattr(getattr(torch._dynamo, "config", None), "reorderable_logging_functions",
                       None)
if isinstance(_reorderable, set):
    _reorderable.add(_fallback.warn)

_FLOAT_NAMES = {torch.float16: "f16", torch.bfloat16: "bf16"}
_FLOAT_DTYPES = tuple(_FLOAT_NAMES)
# The INT8 V layout pads the sequence to this many tokens (v_padded_seq(1) is one block); the
# fake implementations need it as arithmetic that symbolic shapes go through.
_V_TOKEN_BLOCK = _intfa.v_padded_seq(1)


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


# --- shapes and views -----------------------------------------------------------------------

def _bhnd(tensor, layout):
    """(batch, heads, seq, head_dim) of a tensor in `layout`."""
    b, x, y, d = tensor.shape
    return (b, x, y, d) if layout == "HND" else (b, y, x, d)


def _bhnd_strides(tensor, layout):
    s = tensor.stride()
    return (s[0], s[1], s[2], s[3]) if layout == "HND" else (s[0], s[2], s[1], s[3])


def _v_int8_strides(v8):
    # [B, H, D, N_pad] in memory; the C++ view orders strides (batch, heads, seq, head_dim).
    s = v8.stride()
    return (s[0], s[1], s[3], s[2])


def _padded_seq(seq_kv):
    return (seq_kv + _V_TOKEN_BLOCK - 1) // _V_TOKEN_BLOCK * _V_TOKEN_BLOCK


def _v_scale_shape(granularity, batch, heads_kv, seq_kv, head_dim):
    if granularity == "tensor":
        return (batch, heads_kv)
    if granularity == "channel":
        return (batch, heads_kv, head_dim)
    return (batch, heads_kv, _padded_seq(seq_kv) // _V_TOKEN_BLOCK, head_dim)


def _granularity_of(v_scale):
    return {2: "tensor", 3: "channel", 4: "block"}[v_scale.dim()]


# The current stream's handle in one C call where torch has it (a private function, but the one
# torch.compile's own generated code and Triton call for this): torch.cuda.current_stream() costs
# about 2 us more per call.
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def _stream(device):
    if _raw_stream is not None:
        return _raw_stream(device.index)
    return torch.cuda.current_stream(device).cuda_stream


def _on(device):
    """The CUDA device context for launches on `device`: nothing to switch (and no cost) when it
    is already the current device."""
    if torch.cuda.current_device() == device.index:
        return contextlib.nullcontext()
    return torch.cuda.device(device)


# --- outputs, shared by the real and the fake implementations -------------------------------

def _empty_qk(x, layout, smooth_k, k_mean=None):
    # The third output: K smoothing's channel means [B, H, D], or for Q of a smoothed K (k_mean
    # given) q . k_mean per row [B, H, N]; empty otherwise (an op cannot return None in a tuple).
    b, h, n, d = _bhnd(x, layout)
    extra = (b, h, d) if smooth_k else (b, h, n) if k_mean is not None else (0,)
    return (torch.empty(x.shape, dtype=torch.int8, device=x.device),
            torch.empty((b, h, n), dtype=torch.float32, device=x.device),
            torch.empty(extra, dtype=torch.float32, device=x.device))


def _empty_v(shape, granularity, device):
    """The INT8 V layout and V's scales for V of (batch, heads, seq, head_dim) `shape`."""
    b, h, n, d = shape
    return (torch.empty((b, h, d, _padded_seq(n)), dtype=torch.int8, device=device),
            torch.empty(_v_scale_shape(granularity, b, h, n, d), dtype=torch.float32,
                        device=device))


# Named tensors (a prototype) are gone from recent torch releases, Tensor.has_names with them.
_NAMED_TENSORS = hasattr(torch.Tensor, "has_names")


def _empty_output(q, dtype):
    """A dense tensor of q's shape in `dtype` on q's device: what torch.empty(q.shape, ...)
    makes, with a third of its argument parsing (about 2 us less per call on the CPU). Named
    tensors keep the old way: empty_like would copy q's names onto the output."""
    if _NAMED_TENSORS and q.has_names():
        return torch.empty(q.shape, dtype=dtype, device=q.device)
    return torch.empty_like(q, dtype=dtype, memory_format=torch.contiguous_format)


def _empty_lse(q, layout):
    """The natural-log LSE of each query, float32 [B, H_q, N_q], on q's device."""
    b, heads_q, seq_q, _ = _bhnd(q, layout)
    return torch.empty((b, heads_q, seq_q), dtype=torch.float32, device=q.device)


def _plan_of(call, make):
    """The plan that `call` (a checked signature's) keeps, made by `make()` at its first use;
    without a call, a plan from `make()` (the plan caches by signature themselves)."""
    if call is None:
        return make()
    if call.plan is None:
        call.plan = make()
    return call.plan


def _empty_attention(q, layout, out_dtype, return_lse):
    b, h, n, _ = _bhnd(q, layout)
    out = torch.empty(q.shape, dtype=out_dtype, device=q.device)
    lse_shape = (b, h, n) if return_lse else (0,)
    return out, torch.empty(lse_shape, dtype=torch.float32, device=q.device)


# --- launches (inside the ops; arguments already checked) -----------------------------------

def _launch_quantize_qk(x, layout, smooth_k, stream, rotate=False, k_mean=None):
    x8, scale, mean = _empty_qk(x, layout, smooth_k, k_mean)
    term = {}
    if k_mean is not None:  # Q of a smoothed K: q . k_mean per row, the LSE term
        term = dict(k_channel_mean=k_mean.data_ptr(), k_channel_mean_heads=k_mean.shape[1],
                    q_dot_k_mean=mean.data_ptr())
    _intfa.quantize_qk(shape=_bhnd(x, layout), input=x.data_ptr(),
                       input_dtype=_FLOAT_NAMES[x.dtype], input_strides=_bhnd_strides(x, layout),
                       output=x8.data_ptr(), output_strides=_bhnd_strides(x8, layout),
                       scales=scale.data_ptr(),
                       smooth_k_channel_mean=mean.data_ptr() if smooth_k else 0, stream=stream,
                       rotate=rotate, **term)
    return x8, scale, mean


def _launch_quantize_v(v, layout, granularity, stream):
    shape = _bhnd(v, layout)
    v8, scale = _empty_v(shape, granularity, v.device)
    _intfa.quantize_v(shape=shape, input=v.data_ptr(),
                      input_dtype=_FLOAT_NAMES[v.dtype], input_strides=_bhnd_strides(v, layout),
                      output=v8.data_ptr(), scales=scale.data_ptr(), v_granularity=granularity,
                      stream=stream)
    return v8, scale


# --- the custom ops -------------------------------------------------------------------------
# Their arguments are the public functions' after checking and defaulting: strings for the
# enumerations, sm_scale 0.0 for 1/sqrt(head_dim) (as in the C API), an empty LSE when none is
# asked for (an op cannot return None in a tuple).

def _plain_eager(arguments):
    """Whether a call may skip the custom op and run its implementation directly: nothing is
    tracing or intercepting it (torch.compile, export, dispatch or function modes), no argument
    is a tensor subclass (fake tensors, say), and autograd has nothing to record. The op's
    dispatch costs about 27 us per call on the H100 machine (bench/python_overhead.py), more
    than SDPA's whole call; the kernels and their results are the same either way."""
    if torch.compiler.is_compiling():
        return False
    dispatch_modes = getattr(torch._C, "_len_torch_dispatch_stack", None)
    function_modes = getattr(torch._C, "_is_torch_function_mode_enabled", None)
    if dispatch_modes is None or function_modes is None or dispatch_modes() or function_modes():
        return False
    grad = torch.is_grad_enabled()
    for argument in arguments:
        if isinstance(argument, torch.Tensor) and (
                type(argument) is not torch.Tensor or (grad and argument.requires_grad)):
            return False
    return True


class _CustomOp:
    """A torch.library custom op and the function it runs. Called, it runs the function directly
    in plain eager mode (_plain_eager) and goes through the op otherwise."""

    def __init__(self, name, implementation, mutates_args=()):
        self.implementation = implementation
        self.op = torch.library.custom_op(name, mutates_args=mutates_args,
                                          device_types="cuda")(implementation)

    def register_fake(self, fake):
        return self.op.register_fake(fake)

    def __call__(self, *arguments):
        if _plain_eager(arguments):
            return self.implementation(*arguments)
        return self.op(*arguments)


def _custom_op(name, mutates_args=()):
    return lambda implementation: _CustomOp(name, implementation, mutates_args)


@_custom_op("intfa::quantize_qk")
def _quantize_qk_op(x: torch.Tensor, layout: str, smooth_k: bool, rotate: bool = False,
                    k_mean: Optional[torch.Tensor] = None
                    ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    with _on(x.device):
        return _launch_quantize_qk(x, layout, smooth_k, _stream(x.device), rotate, k_mean)


@_quantize_qk_op.register_fake
def _(x, layout, smooth_k, rotate=False, k_mean=None):
    return _empty_qk(x, layout, smooth_k, k_mean)


@_custom_op("intfa::quantize_v")
def _quantize_v_op(v: torch.Tensor, layout: str,
                   v_granularity: str) -> Tuple[torch.Tensor, torch.Tensor]:
    with _on(v.device):
        return _launch_quantize_v(v, layout, v_granularity, _stream(v.device))


@_quantize_v_op.register_fake
def _(v, layout, v_granularity):
    return _empty_v(_bhnd(v, layout), v_granularity, v.device)


@_custom_op("intfa::attention_int8")
def _attention_int8_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                       q_scale: torch.Tensor, k_scale: torch.Tensor,
                       v_scale: Optional[torch.Tensor], is_causal: bool, sm_scale: float,
                       layout: str, out_dtype: torch.dtype, p_encoding: str, p_scale: str,
                       return_lse: bool, config: Optional[List[int]],
                       q_dot_k_mean: Optional[torch.Tensor] = None
                       ) -> Tuple[torch.Tensor, torch.Tensor]:
    out, lse = _run_attention_int8(q, k, v, q_scale, k_scale, v_scale, q_dot_k_mean,
                                   (is_causal, sm_scale, layout, out_dtype, p_encoding, p_scale,
                                    return_lse, config))
    return out, (lse if lse is not None else _no_lse(q))


def _run_attention_int8(q, k, v, q_scale, k_scale, v_scale, q_dot_k_mean, arguments, call=None):
    """intfa::attention_forward on checked quantized tensors (`arguments`: what
    _check_attention_int8 returns): the output, and the LSE when asked for (else None, and no
    tensor is allocated for it). `call`, when given, keeps the plan of its signature."""
    is_causal, sm_scale, layout, out_dtype, p_encoding, p_scale, return_lse, config = arguments
    out = _empty_output(q, out_dtype)
    lse = _empty_lse(q, layout) if return_lse else None
    plan = _plan_of(call, lambda: _int8_attention_plan(q, k, v, v_scale, out, is_causal, sm_scale,
                                                       layout, p_encoding, p_scale, config))
    with _on(q.device):
        plan.run(q.data_ptr(), k.data_ptr(), v.data_ptr(), q_scale.data_ptr(), k_scale.data_ptr(),
                 v_scale.data_ptr() if v_scale is not None else 0, out.data_ptr(),
                 lse.data_ptr() if lse is not None else 0, _stream(q.device),
                 q_dot_k_mean.data_ptr() if q_dot_k_mean is not None else 0)
    return out, lse


@_attention_int8_op.register_fake
def _(q, k, v, q_scale, k_scale, v_scale, is_causal, sm_scale, layout, out_dtype, p_encoding,
      p_scale, return_lse, config, q_dot_k_mean=None):
    return _empty_attention(q, layout, out_dtype, return_lse)


# intfa::attention_forward_16bit plans, one per signature (shapes, strides, dtype, options): a
# call of a known signature is one pybind11 call with seven addresses. Bounded: a process that
# sees more signatures than this starts over.
_ATTENTION_PLANS = {}
_MAX_ATTENTION_PLANS = 512


def _remember(plans, key, plan):
    if len(plans) >= _MAX_ATTENTION_PLANS:
        plans.clear()
    plans[key] = plan
    return plan


def _attention_plan(q, k, v, out, is_causal, sm_scale, layout, variant, v_granularity, smooth_k,
                    p_encoding, p_scale, rotate=False, k_granularity=DEFAULTS["k_granularity"],
                    packing=None):
    """The plan of one signature; `packing` (sequences, max_seqlen_q, max_seqlen_k) for packed
    sequences, whose tensors are then [1, total, H, D] views in layout NHD (K per token)."""
    key = (q.shape, k.shape, v.shape, q.stride(), k.stride(), v.stride(), out.stride(), q.dtype,
           layout, is_causal, sm_scale, variant, v_granularity, smooth_k, p_encoding, p_scale,
           rotate, k_granularity, packing)
    plan = _ATTENTION_PLANS.get(key)
    if plan is not None:
        return plan
    # The C++ views carry strides, not extents: V is read with K's (the public functions check
    # this too; the op may be called directly).
    _check_same("v", v, k.shape, "the shape of k")
    b, heads_q, seq_q, head_dim = _bhnd(q, layout)
    _, heads_kv, seq_kv, _ = _bhnd(k, layout)
    totals = {}
    if packing is not None:
        totals = dict(total_q=seq_q, total_kv=seq_kv)
        b, seq_q, seq_kv = packing
    return _remember(_ATTENTION_PLANS, key, _intfa.AttentionPlan(
        batch=b, heads_q=heads_q, heads_kv=heads_kv, seq_q=seq_q, seq_kv=seq_kv,
        head_dim=head_dim, causal=is_causal, variant=variant, dtype=_FLOAT_NAMES[q.dtype],
        q_strides=_bhnd_strides(q, layout), k_strides=_bhnd_strides(k, layout),
        v_strides=_bhnd_strides(v, layout), out_strides=_bhnd_strides(out, layout),
        softmax_scale=sm_scale, p_encoding=p_encoding, p_scale=p_scale,
        v_granularity=v_granularity, smooth_k=smooth_k, rotate=rotate,
        k_granularity=k_granularity, **totals))


def _int8_attention_plan(q, k, v, v_scale, out, is_causal, sm_scale, layout, p_encoding, p_scale,
                         config):
    """intfa::attention_forward over quantized tensors, one plan per signature."""
    full = v.dtype == torch.int8
    key = (q.shape, k.shape, v.shape, q.stride(), k.stride(), v.stride(), out.stride(), v.dtype,
           out.dtype, None if v_scale is None else v_scale.dim(), layout, is_causal, sm_scale,
           p_encoding, p_scale, None if config is None else tuple(config))
    plan = _INT8_ATTENTION_PLANS.get(key)
    if plan is not None:
        return plan
    b, heads_q, seq_q, head_dim = _bhnd(q, layout)
    _, heads_kv, seq_kv, _ = _bhnd(k, layout)
    return _remember(_INT8_ATTENTION_PLANS, key, _intfa.Int8AttentionPlan(
        batch=b, heads_q=heads_q, heads_kv=heads_kv, seq_q=seq_q, seq_kv=seq_kv,
        head_dim=head_dim, causal=is_causal, variant="full_int8" if full else "half_int8",
        v_dtype="i8" if full else _FLOAT_NAMES[v.dtype], out_dtype=_FLOAT_NAMES[out.dtype],
        q_strides=_bhnd_strides(q, layout), k_strides=_bhnd_strides(k, layout),
        v_strides=_v_int8_strides(v) if full else _bhnd_strides(v, layout),
        out_strides=_bhnd_strides(out, layout), softmax_scale=sm_scale, p_encoding=p_encoding,
        p_scale=p_scale,
        v_granularity=_granularity_of(v_scale) if full else DEFAULTS["v_granularity"],
        config=config))


_INT8_ATTENTION_PLANS = {}


@_custom_op("intfa::attention")
def _attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool,
                  sm_scale: float, layout: str, variant: str, v_granularity: str, smooth_k: bool,
                  p_encoding: str, p_scale: str, rotate: bool, return_lse: bool,
                  k_granularity: str = DEFAULTS["k_granularity"]
                  ) -> Tuple[torch.Tensor, torch.Tensor]:
    out, lse = _run_attention(q, k, v, None, (is_causal, sm_scale, layout, variant,
                                              v_granularity, smooth_k, p_encoding, p_scale,
                                              rotate, k_granularity),
                              return_lse)
    return out, (lse if lse is not None else _no_lse(q))


def _no_lse(q):
    return torch.empty((0,), dtype=torch.float32, device=q.device)


@_attention_op.register_fake
def _(q, k, v, is_causal, sm_scale, layout, variant, v_granularity, smooth_k, p_encoding,
      p_scale, rotate, return_lse, k_granularity=DEFAULTS["k_granularity"]):
    return _empty_attention(q, layout, q.dtype, return_lse)


def _run_attention(q, k, v, out, op_arguments, return_lse, call=None):
    """intfa::attention_forward_16bit on checked q, k, v: into `out` (allocated when None), with
    the natural-log LSE [B, H_q, N_q] when `return_lse` (else None). A head dim between the
    kernels' own (a multiple of 8) runs the next kernel, which reads the missing channels as
    zeros and leaves them out of `out` (intfa/_padding.py says why zero channels are exact).
    `call`, when given, keeps the plan of its signature (a plain eager call's fast path).

    One C++ call quantizes Q, K (and V) into a workspace from torch's caching allocator and
    attends; the workspace goes back to the allocator at once, stream-ordered, as any temporary
    of an eager op does."""
    (is_causal, sm_scale, layout, variant, v_granularity, smooth_k, p_encoding, p_scale,
     rotate, k_granularity) = op_arguments
    if out is None:
        out = _empty_output(q, q.dtype)
    lse = _empty_lse(q, layout) if return_lse else None
    plan = _plan_of(call, lambda: _attention_plan(q, k, v, out, is_causal, sm_scale, layout,
                                                  variant, v_granularity, smooth_k, p_encoding,
                                                  p_scale, rotate, k_granularity))
    workspace = torch.empty(plan.workspace_bytes, dtype=torch.uint8, device=q.device)
    with _on(q.device):
        plan.run(q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(),
                 lse.data_ptr() if lse is not None else 0, workspace.data_ptr(),
                 _stream(q.device))
    # (With K smoothing the LSE is already that of the original scores: the kernel adds
    # sm_scale * q . k_mean back, intfa::AttentionInputs::lse.)
    return out, lse


def _empty_varlen_attention(q, return_lse):
    # out [total_q, H_q, D]; the LSE [H_q, total_q], as FlashAttention's varlen functions.
    total, heads, _ = q.shape
    lse_shape = (heads, total) if return_lse else (0,)
    return (torch.empty(q.shape, dtype=q.dtype, device=q.device),
            torch.empty(lse_shape, dtype=torch.float32, device=q.device))


@_custom_op("intfa::attention_varlen")
def _attention_varlen_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                         cu_seqlens_q: torch.Tensor, cu_seqlens_k: torch.Tensor,
                         max_seqlen_q: int, max_seqlen_k: int, is_causal: bool, sm_scale: float,
                         variant: str, v_granularity: str, smooth_k: bool, p_encoding: str,
                         p_scale: str, return_lse: bool,
                         rotate: bool = False) -> Tuple[torch.Tensor, torch.Tensor]:
    out, lse = _run_attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                     max_seqlen_k, (is_causal, sm_scale, variant, v_granularity,
                                                    smooth_k, p_encoding, p_scale, return_lse,
                                                    rotate))
    return out, (lse if lse is not None else _no_lse(q))


def _run_attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                          arguments, call=None):
    """intfa::attention_forward_16bit on checked packed sequences (`arguments`: what
    _check_attention_varlen returns): the output [total_q, H_q, D], and the LSE [H_q, total_q]
    when asked for (else None, and none is allocated). `call`, when given, keeps the plan of its
    signature."""
    (is_causal, sm_scale, variant, v_granularity, smooth_k, p_encoding, p_scale, return_lse,
     rotate) = arguments
    out = _empty_output(q, q.dtype)
    lse = (torch.empty((q.shape[1], q.shape[0]), dtype=torch.float32, device=q.device)
           if return_lse else None)
    # The kernels see packed tensors as one batch of NHD rows: [1, total, H, D]; the plan has the
    # sequences' count and longest lengths, the offsets come with the call.
    plan = _plan_of(call, lambda: _attention_plan(
        *(x.unsqueeze(0) for x in (q, k, v, out)), is_causal, sm_scale, "NHD", variant,
        v_granularity, smooth_k, p_encoding, p_scale, rotate,
        packing=(cu_seqlens_q.numel() - 1, max_seqlen_q, max_seqlen_k)))
    workspace = torch.empty(plan.workspace_bytes, dtype=torch.uint8, device=q.device)
    with _on(q.device):
        plan.run(q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(),
                 lse.data_ptr() if lse is not None else 0, workspace.data_ptr(),
                 _stream(q.device), cu_seqlens_q.data_ptr(), cu_seqlens_k.data_ptr())
    return out, lse


@_attention_varlen_op.register_fake
def _(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, is_causal, sm_scale,
      variant, v_granularity, smooth_k, p_encoding, p_scale, return_lse, rotate=False):
    return _empty_varlen_attention(q, return_lse)


# --- argument checks (before any op runs) ---------------------------------------------------

def _check_choice(name, value, choices):
    if value not in choices:
        raise invalid_argument(name, repr(value), "expected " + " or ".join(map(repr, choices)))
    return value


def _check_tensor(name, tensor, dtypes, dims=4, what="[B, H, N, D] or [B, N, H, D]"):
    """Type, dtype, then the number of dimensions (unchecked when `dims` is None)."""
    if not isinstance(tensor, torch.Tensor):
        raise invalid_argument(name, type(tensor).__name__, "expected a torch.Tensor")
    if tensor.dtype not in dtypes:
        raise invalid_argument(f"{name}.dtype", tensor.dtype,
                               "expected " + " or ".join(map(str, dtypes)))
    if dims is not None and tensor.dim() != dims:
        raise invalid_argument(f"{name}.shape", tuple(tensor.shape),
                               f"expected {dims} dimensions {what}")


def _check_head_dim_stride(name, tensor):
    if tensor.stride(-1) != 1:
        raise invalid_argument(f"{name}.stride", tensor.stride(),
                               "expected stride 1 on the head dim (the last dimension)")


def _check_same(name, tensor, expected, what):
    if tuple(tensor.shape) != tuple(expected):
        raise invalid_argument(f"{name}.shape", tuple(tensor.shape),
                               f"expected {tuple(expected)} ({what})")


def _check_qk(q, k, layout, q_name="q", k_name="k"):
    b, _, _, d = _bhnd(q, layout)
    kb, _, _, kd = _bhnd(k, layout)
    if kb != b or kd != d:
        raise invalid_argument(f"{k_name}.shape", tuple(k.shape),
                               f"expected batch {b} and head dim {d} as {q_name} {tuple(q.shape)} "
                               f"(layout {layout})")


def _validate_problem(names, **problem):
    # The C++ rules (head dims 64/128/256, heads_q a multiple of heads_kv, sizes >= 1), with the
    # C++ reason, naming the Python argument (`names`: _checks.TENSOR_PROBLEM, VARLEN_PROBLEM).
    # Under torch.compile the shapes may be symbolic and an opaque call would break the graph:
    # the op checks them again, still before its launch.
    if not torch.compiler.is_compiling():
        _checks.validate_problem(names, **problem)


def _check_problem(q, k, layout, is_causal, variant):
    b, heads_q, seq_q, head_dim = _bhnd(q, layout)
    _, heads_kv, seq_kv, _ = _bhnd(k, layout)
    _validate_problem(_checks.TENSOR_PROBLEM, batch=b, heads_q=heads_q, heads_kv=heads_kv,
                      seq_q=seq_q, seq_kv=seq_kv, head_dim=head_dim, causal=is_causal,
                      variant=variant)


def _check_device(named_tensors):
    first_name, first = named_tensors[0]
    if not first.is_cuda:
        raise invalid_argument(f"{first_name}.device", first.device, "expected a CUDA tensor")
    for name, tensor in named_tensors[1:]:
        if tensor is not None and tensor.device != first.device:
            raise invalid_argument(f"{name}.device", tensor.device,
                                   f"expected {first.device}, the device of {first_name}")


def _check_scale(name, scale, expected_shape):
    _check_tensor(name, scale, (torch.float32,), dims=len(expected_shape),
                  what=f"like {tuple(expected_shape)}")
    _check_same(name, scale, expected_shape, "the scales of the quantized tensor")
    if not scale.is_contiguous():
        raise invalid_argument(f"{name}.stride", scale.stride(), "expected a contiguous tensor")


def _resolve_sm_scale(sm_scale, name="sm_scale"):
    # The C API reads 0 as "1/sqrt(head_dim)"; here None says that and 0 is refused (as are
    # bools, and what float32 cannot hold: _checks.resolve_sm_scale).
    return _checks.resolve_sm_scale(sm_scale, name)


class _Numerics(NamedTuple):
    variant: str
    v_granularity: str
    p_encoding: str
    p_scale: str
    k_granularity: str


def _check_numerics(variant, v_granularity, p_encoding, p_scale, k_granularity=None):
    """The quantization options of ``attention`` and ``attention_varlen``, checked and defaulted
    (None, and only None, is the default: _checks.option); ``attention_varlen`` gives no
    k_granularity: its K stays per token."""
    return _Numerics(option("variant", variant), option("v_granularity", v_granularity),
                     option("p_encoding", p_encoding), option("p_scale", p_scale),
                     option("k_granularity", k_granularity))


def _qk_transforms(smooth_k, rotate):
    """K smoothing and the rotation of Q and K: True or False, None meaning the C++ default
    (intfa::AttentionOptions: smoothing on, rotation off); anything else is refused."""
    return option("smooth_k", smooth_k), option("rotate", rotate)


def _check_inputs(q, k, v, dims=4, what="[B, H, N, D] or [B, N, H, D]"):
    """FP16/BF16 q, k and v of one dtype and `dims` dimensions, each with stride 1 on the head
    dim."""
    _check_tensor("q", q, _FLOAT_DTYPES, dims, what)
    for name, tensor in (("k", k), ("v", v)):
        _check_tensor(name, tensor, _FLOAT_DTYPES, dims, what)
        if tensor.dtype != q.dtype:
            raise invalid_argument(f"{name}.dtype", tensor.dtype, f"expected {q.dtype} as q")
    for name, tensor in (("q", q), ("k", k), ("v", v)):
        _check_head_dim_stride(name, tensor)


def _check_offsets(cu_seqlens_q, cu_seqlens_k):
    """int32 [batch + 1] contiguous offsets, as many for q as for k; returns batch."""
    for name, offsets in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
        _check_tensor(name, offsets, (torch.int32,), dims=1, what="[batch + 1]")
        if offsets.numel() < 2:
            raise invalid_argument(f"{name}.shape", tuple(offsets.shape),
                                   "expected [batch + 1] with batch >= 1")
        if not offsets.is_contiguous():
            raise invalid_argument(f"{name}.stride", offsets.stride(),
                                   "expected a contiguous tensor")
    if cu_seqlens_k.numel() != cu_seqlens_q.numel():
        raise invalid_argument("cu_seqlens_k.shape", tuple(cu_seqlens_k.shape),
                               f"expected {tuple(cu_seqlens_q.shape)} as cu_seqlens_q (one "
                               "offset per sequence, plus one)")
    return cu_seqlens_q.numel() - 1


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
    smooth_k, rotate = _qk_transforms(smooth_k, rotate)
    _check_choice("layout", layout, LAYOUTS)
    v_granularity = option("v_granularity", v_granularity)
    _check_tensor("q", q, _FLOAT_DTYPES)
    _check_tensor("k", k, _FLOAT_DTYPES)
    _check_head_dim_stride("q", q)
    _check_head_dim_stride("k", k)
    _check_qk(q, k, layout)
    if v is not None:
        _check_tensor("v", v, _FLOAT_DTYPES)
        _check_head_dim_stride("v", v)
        _check_same("v", v, k.shape, "the shape of k")
    _check_problem(q, k, layout, False, "full_int8" if v is not None else "half_int8")
    _check_device([("q", q), ("k", k), ("v", v)])

    # K first: with smoothing, Q's kernel reads K's means for the LSE term.
    k8, k_scale, k_mean = _quantize_qk_op(k, layout, smooth_k, rotate)
    q8, q_scale, q_dot_k_mean = _quantize_qk_op(q, layout, False, rotate,
                                                k_mean if smooth_k else None)
    if smooth_k:  # [B, H, D] -> broadcastable against K in its layout
        k_mean = k_mean.unsqueeze(2 if layout == "HND" else 1)
    else:
        k_mean = q_dot_k_mean = None
    v8 = v_scale = None
    if v is not None:
        v8, v_scale = _quantize_v_op(v, layout, v_granularity)
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
    call = None
    signature = None
    tensors = (q, k, v, q_scale, k_scale, v_scale, q_dot_k_mean)
    if not torch.compiler.is_compiling():
        try:
            # As in `attention`: a call with the signature of one that passed the checks passes
            # them too (they read shapes, strides, dtypes, devices and the options only).
            signature = tuple(map(_tensor_signature, tensors)) + (
                is_causal, type(is_causal), sm_scale, type(sm_scale), layout, out_dtype,
                return_lse, p_encoding, p_scale, type(config),
                None if config is None else tuple(config),
                None if config is None else tuple(map(type, config)))
            call = _CHECKED_INT8_CALLS.get(signature)
        except (AttributeError, TypeError):  # not tensors, or an unhashable option: checked below
            signature = None
    if call is None:
        call = _CheckedArguments(_check_attention_int8(
            q, k, v, q_scale, k_scale, v_scale, is_causal, sm_scale, layout, out_dtype,
            return_lse, p_encoding, p_scale, config, q_dot_k_mean))
        if signature is not None:
            _remember(_CHECKED_INT8_CALLS, signature, call)
    if signature is not None and _plain_eager(tensors):
        # The op's implementation with the plan of this signature at hand (the output is q's
        # shape in out_dtype, both in the signature).
        out, lse = _run_attention_int8(q, k, v, q_scale, k_scale, v_scale, q_dot_k_mean,
                                       call.arguments, call)
    else:
        out, lse = _attention_int8_op(q, k, v, q_scale, k_scale, v_scale, *call.arguments,
                                      q_dot_k_mean)
    return (out, lse) if return_lse else out


class _CheckedArguments:
    """What the checks of one `attention_int8` or `attention_varlen` signature returned (the
    op's arguments after the tensors) and its plan, made at its first plain eager call."""

    __slots__ = ("arguments", "plan")

    def __init__(self, arguments):
        self.arguments = arguments
        self.plan = None


# `attention_int8`'s checked calls by call signature: _CheckedArguments values.
_CHECKED_INT8_CALLS = {}


def _tensor_signature(tensor):
    """What the checks read of a tensor argument (None stays None); contiguity is a function of
    the shape and strides."""
    if tensor is None:
        return None
    return (tensor.shape, tensor.stride(), tensor.dtype, tensor.device, type(tensor))


def _check_attention_int8(q, k, v, q_scale, k_scale, v_scale, is_causal, sm_scale, layout,
                          out_dtype, return_lse, p_encoding, p_scale, config, q_dot_k_mean=None):
    """Every check of `attention_int8`; returns the op's arguments after the six tensors."""
    _check_choice("layout", layout, LAYOUTS)
    p_encoding = option("p_encoding", p_encoding)
    p_scale = option("p_scale", p_scale)
    softmax_scale = _resolve_sm_scale(sm_scale)
    _check_tensor("q", q, (torch.int8,))
    _check_tensor("k", k, (torch.int8,))
    _check_head_dim_stride("q", q)
    _check_head_dim_stride("k", k)
    _check_qk(q, k, layout)
    b, heads_q, seq_q, head_dim = _bhnd(q, layout)
    _, heads_kv, seq_kv, _ = _bhnd(k, layout)
    _check_tensor("v", v, (torch.int8,) + _FLOAT_DTYPES)
    full = v.dtype == torch.int8
    if full:
        _check_same("v", v, (b, heads_kv, head_dim, _padded_seq(seq_kv)),
                    "the INT8 V layout [B, H_kv, D, v_padded_seq(N_kv)] that quantize writes")
        if v_scale is None:
            raise invalid_argument("v_scale", None, "expected V's scales for INT8 V")
        _check_tensor("v_scale", v_scale, (torch.float32,), dims=None)
        if v_scale.dim() not in (2, 3, 4):
            raise invalid_argument("v_scale.shape", tuple(v_scale.shape),
                                   "expected [B, H_kv], [B, H_kv, D] or [B, H_kv, N_pad/64, D]")
        granularity = _granularity_of(v_scale)
        _check_scale("v_scale", v_scale,
                     _v_scale_shape(granularity, b, heads_kv, seq_kv, head_dim))
    else:
        _check_head_dim_stride("v", v)
        _check_same("v", v, k.shape, "the shape of k")
        if v_scale is not None:
            raise invalid_argument("v_scale", "a tensor", "expected None for FP16/BF16 V")
    _check_scale("q_scale", q_scale, (b, heads_q, seq_q))
    _check_scale("k_scale", k_scale, (b, heads_kv, seq_kv))
    if out_dtype is None:
        out_dtype = torch.float16 if full else v.dtype
    if out_dtype not in _FLOAT_DTYPES:
        raise invalid_argument("out_dtype", out_dtype, "expected torch.float16 or torch.bfloat16")
    if config is not None:
        if (not isinstance(config, (tuple, list)) or len(config) != 4
                or not all(isinstance(value, int) for value in config)):
            raise invalid_argument("config", repr(config),
                                   "expected (block_m, block_n, warps, stages), four ints")
        config = [int(value) for value in config]
    _check_problem(q, k, layout, is_causal, "full_int8" if full else "half_int8")
    _check_device([("q", q), ("k", k), ("v", v), ("q_scale", q_scale), ("k_scale", k_scale),
                   ("v_scale", v_scale)])
    if q_dot_k_mean is not None:
        _check_scale("q_dot_k_mean", q_dot_k_mean, tuple(q_scale.shape))
        _check_device([("q", q), ("q_dot_k_mean", q_dot_k_mean)])

    return (bool(is_causal), softmax_scale, layout, out_dtype, p_encoding, p_scale,
            bool(return_lse), config)


def attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
              enable_gqa=False, *, sm_scale=None, layout="HND", variant="full_int8",
              v_granularity=None, smooth_k=None, p_encoding=None, p_scale=None,
              rotate=None, return_lse=False, out=None, fallback=None, k_granularity=None):
    """Quantizes and attends in one call, shaped like
    ``torch.nn.functional.scaled_dot_product_attention`` (same positional arguments) so that it
    can be swapped in: q [B, H_q, N_q, D], k and v [B, H_kv, N_kv, D] (layout "HND"; "NHD" takes
    [B, N, H, D]), FP16 or BF16, one dtype; returns q's shape and dtype. GQA/MQA (H_q a multiple
    of H_kv) always works, whatever ``enable_gqa`` says. ``sm_scale`` (or SDPA's ``scale``)
    defaults to 1/sqrt(D). Causal masking with N_q != N_kv is bottom-right aligned
    (FlashAttention >= 2.1; SDPA aligns top-left); a query that sees no key outputs zeros.
    ``variant`` "full_int8" quantizes V too, "half_int8" keeps V in 16 bits. ``smooth_k``
    (default on) quantizes K less its channel means (over a sample of keys), ``rotate`` (default
    off) rotates Q and K by one orthogonal matrix first, which spreads outlier channels; neither
    changes the attention in exact arithmetic. Forward only.

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
    INTFA_FALLBACK, else "sdpa")."""
    result = _attend(q, k, v, attn_mask, dropout_p, is_causal, scale, sm_scale, layout, variant,
                     v_granularity, smooth_k, p_encoding, p_scale, return_lse, out, fallback,
                     rotate, k_granularity)
    if type(result) is not Unserved:
        return result
    _check_choice("layout", layout, LAYOUTS)  # (a call with a mask skipped the checks)
    if out is not None and isinstance(q, torch.Tensor):
        _check_out(out, q)
    return _sdpa.attention(q, k, v, attn_mask, dropout_p, is_causal,
                           sm_scale if sm_scale is not None else scale, layout, return_lse, out)


class Unserved(NamedTuple):
    """What `_attend` returns for a call intfa did not serve (counted and warned already): the
    caller runs its SDPA call. `reason` is a key of intfa._fallback.REASONS."""

    reason: str


def _attend(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, sm_scale=None,
            layout="HND", variant="full_int8", v_granularity=None, smooth_k=None,
            p_encoding=None, p_scale=None, return_lse=False, out=None, fallback=None,
            rotate=None, k_granularity=None):
    """`attention` up to its fallback: intfa's result, or Unserved when intfa does not serve the
    call and the policy is "sdpa" ("error" raises). The integrations call this, then their
    client's own SDPA call with the client's arguments."""
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
                         type(scale), sm_scale, type(sm_scale), layout, variant, v_granularity,
                         smooth_k, type(smooth_k), p_encoding, p_scale, rotate, type(rotate),
                         k_granularity, return_lse, fallback,
                         None if out is None else (out.shape, out.stride(), out.dtype,
                                                   out.device))
            call = _CHECKED_ATTENTION_CALLS.get(signature)
        except (AttributeError, TypeError):  # not tensors, or an unhashable option: checked below
            signature = None
    checks = (q, k, v, is_causal, scale, sm_scale, layout, variant, v_granularity, smooth_k,
              p_encoding, p_scale, return_lse, out, fallback, rotate, k_granularity)
    if call is None:
        call = _checked_call(*checks)
        if signature is not None:
            _remember(_CHECKED_ATTENTION_CALLS, signature, call)
    if call.unserved is not None:
        # Policy "error" runs the checks again: they raise the typed error afresh.
        return _unserved(call.unserved, fallback, lambda: _check_attention(*checks), call.detail)
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad):
        return _unserved("autograd", fallback, lambda: _fallback.unsupported("autograd"))
    fast = signature is not None and _plain_eager((q, k, v) if out is None else (q, k, v, out))
    if fast and out is not None and out.data_ptr() % 4:
        raise invalid_argument("out.data_ptr", out.data_ptr(), "expected 4-byte alignment")
    try:
        if fast:
            # The op's implementation with the plan of this signature at hand (the output's
            # strides are q's shape's, or out's: in the signature either way).
            result, lse = _run_attention(q, k, v, out, call.op_arguments, return_lse, call)
        else:
            # The op's schema has return_lse before k_granularity (added last, with a default).
            *arguments, k_granularity = call.op_arguments
            result, lse = _attention_op(q, k, v, *arguments, bool(return_lse), k_granularity)
            if out is not None:
                result = out.copy_(result)
    except Error as error:
        # The runtime refused the call at launch (before launching anything) or could not
        # compile its kernel: a global SDPA patch must not break the model for that.
        if torch.compiler.is_compiling() or _fallback.resolve(fallback) == "error":
            raise
        _fallback.record("intfa_error", f"{type(error).__name__}: {error}")
        return Unserved("intfa_error")
    return (result, lse) if return_lse else result


# `attention`'s checks by call signature (see `_attend`): _CheckedCall values.
_CHECKED_ATTENTION_CALLS = {}


class _CheckedCall:
    """What the checks of one `attention` signature decided: the op's arguments after q, k and v
    (and the plan, made at its first plain eager call), or why intfa cannot serve such calls
    (`unserved`, a key of intfa._fallback.REASONS, with the check's message as `detail`)."""

    __slots__ = ("op_arguments", "plan", "unserved", "detail")

    def __init__(self, op_arguments=None, unserved=None, detail=""):
        self.op_arguments = op_arguments
        self.plan = None
        self.unserved = unserved
        self.detail = detail


def _checked_call(*checks):
    try:
        return _CheckedCall(_check_attention(*checks))
    except Error as error:
        reason = getattr(error, "fallback_reason", None)
        if reason is None:  # the caller's mistake: SDPA would refuse it too
            raise
        return _CheckedCall(unserved=reason, detail=str(error))


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


def _unservable(reason, error):
    """`error`, marked as what policy "sdpa" answers by running SDPA (`reason`: a key of
    intfa._fallback.REASONS) rather than raising."""
    error.fallback_reason = reason
    return error


def _check_attention(q, k, v, is_causal, scale, sm_scale, layout, variant, v_granularity,
                     smooth_k, p_encoding, p_scale, return_lse, out, fallback, rotate=None,
                     k_granularity=None):
    """Every check of `attention`; returns the op's arguments after q, k and v (without
    return_lse). What SDPA could serve instead raises an error marked by _unservable."""
    _fallback.check_argument(fallback)
    smooth_k, rotate = _qk_transforms(smooth_k, rotate)
    if scale is not None and sm_scale is not None and scale != sm_scale:
        raise invalid_argument("scale", scale, f"expected the same as sm_scale = {sm_scale} "
                               "(they are one argument under two names)")
    softmax_scale = (_resolve_sm_scale(sm_scale) if sm_scale is not None
                     else _resolve_sm_scale(scale, "scale"))
    _check_choice("layout", layout, LAYOUTS)
    numerics = _check_numerics(variant, v_granularity, p_encoding, p_scale, k_granularity)
    for name, tensor in (("q", q), ("k", k), ("v", v)):
        if not isinstance(tensor, torch.Tensor):
            raise invalid_argument(name, type(tensor).__name__, "expected a torch.Tensor")
    if (q.dtype == k.dtype == v.dtype and q.dtype.is_floating_point
            and q.dtype not in _FLOAT_DTYPES):
        raise _unservable("dtype", invalid_argument(
            "q.dtype", q.dtype, "expected " + " or ".join(map(str, _FLOAT_DTYPES))))
    _check_tensor("q", q, _FLOAT_DTYPES)
    for name, tensor in (("k", k), ("v", v)):
        _check_tensor(name, tensor, _FLOAT_DTYPES)
        if tensor.dtype != q.dtype:
            raise invalid_argument(f"{name}.dtype", tensor.dtype, f"expected {q.dtype} as q")
    _check_qk(q, k, layout)
    if v.shape[:-1] == k.shape[:-1] and v.shape[-1] != k.shape[-1]:
        raise _unservable("head_dim", invalid_argument(
            "v.shape", tuple(v.shape), f"expected {tuple(k.shape)}, the shape of k (intfa's V "
            "has K's head dim)"))
    _check_same("v", v, k.shape, "the shape of k")
    head_dim = q.shape[-1]
    kernel_dim = _padding.kernel_head_dim(head_dim)
    if kernel_dim is None:
        raise _unservable("head_dim", invalid_argument(
            "q.shape", tuple(q.shape), f"supported head dims are multiples of 8 up to 256 (64, "
            f"128 and 256 run their own kernels, others the next of them), not {head_dim} (the "
            "head dim of q)"))
    for name, tensor in (("q", q), ("k", k), ("v", v)):
        if tensor.stride(-1) != 1:
            raise _unservable("strides", invalid_argument(
                f"{name}.stride", tensor.stride(),
                "expected stride 1 on the head dim (the last dimension)"))
    _check_attention_problem(q, k, layout, bool(is_causal), numerics.variant, kernel_dim)
    _check_out(out, q)
    _check_kernel_device(q, k, v)
    return (bool(is_causal), softmax_scale, layout, numerics.variant, numerics.v_granularity,
            smooth_k, numerics.p_encoding, numerics.p_scale, rotate, numerics.k_granularity)


def _check_attention_problem(q, k, layout, is_causal, variant, kernel_dim):
    """The C++ problem rules at the kernel's head dim: heads that are no GQA grouping are the
    caller's error (SDPA refuses them too); other sizes (an empty sequence, the grid's limits)
    are SDPA's to serve."""
    b, heads_q, seq_q, _ = _bhnd(q, layout)
    _, heads_kv, seq_kv, _ = _bhnd(k, layout)
    try:
        _validate_problem(_checks.TENSOR_PROBLEM, batch=b, heads_q=heads_q, heads_kv=heads_kv,
                          seq_q=seq_q, seq_kv=seq_kv, head_dim=kernel_dim, causal=is_causal,
                          variant=variant)
    except InvalidArgument as error:
        if heads_q >= 1 and heads_kv >= 1 and heads_q % heads_kv:
            raise
        raise _unservable("shape", error) from None


def _check_out(out, q):
    """`out`: q's shape, dtype and device, and strides the kernels can write."""
    if out is None:
        return
    if not isinstance(out, torch.Tensor):
        raise invalid_argument("out", type(out).__name__, "expected a torch.Tensor or None")
    if out.dtype != q.dtype:
        raise invalid_argument("out.dtype", out.dtype, f"expected {q.dtype}, the dtype of q")
    _check_same("out", out, q.shape, "the shape of q")
    if out.device != q.device:
        raise invalid_argument("out.device", out.device, f"expected {q.device}, the device of q")
    strides = out.stride()
    last = out.dim() - 1
    steps = [(strides[dim], out.shape[dim]) for dim in range(out.dim()) if out.shape[dim] > 1]
    # As the C++ view rules: stride 1 on the head dim, 4-byte steps elsewhere, and ordered by
    # stride, each dimension steps over all the elements of those below it.
    writable = (out.shape[last] == 1 or strides[last] == 1) and all(
        strides[dim] % 2 == 0 for dim in range(last) if out.shape[dim] > 1)
    span = 1
    for stride, extent in sorted(steps):
        writable = writable and stride >= span
        span = stride * extent
    if not writable:
        raise invalid_argument("out.stride", strides, "expected stride 1 on the head dim, even "
                               "strides elsewhere (4-byte steps) and no two elements at one "
                               "address")


# Compute capability by device index, read once: the kernels need sm_80 or newer.
_CAPABILITIES = {}
_MIN_CAPABILITY = (8, 0)


def _check_kernel_device(q, k, v):
    """One CUDA device for q, k and v, of compute capability 8.0 or newer. The last check: the
    tests without a GPU stop here."""
    if not q.is_cuda:
        raise _unservable("device", invalid_argument("q.device", q.device,
                                                     "expected a CUDA tensor"))
    _check_device([("q", q), ("k", k), ("v", v)])
    if not torch.compiler.is_compiling():  # (fake tensors: no device to ask)
        index = q.device.index
        _check_arch(index if index is not None else torch.cuda.current_device())


def _check_arch(index):
    capability = _CAPABILITIES.get(index)
    if capability is None:
        capability = _CAPABILITIES[index] = tuple(torch.cuda.get_device_capability(index))
    if capability < _MIN_CAPABILITY:
        raise _unservable("arch", Unsupported(
            f"intfa: GPU {index} has compute capability {capability[0]}.{capability[1]}; "
            "intfa's kernels need 8.0 or newer", field="q.device"))


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, *,
                     is_causal=False, sm_scale=None, variant="full_int8", v_granularity=None,
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
    ``rotate`` as in ``attention``. K's scales are per token (``attention``'s ``k_granularity``
    "block" takes dense batches only).
    Returns the output [total_q, H_q, D] in q's dtype, and with ``return_lse`` also the
    natural-log log-sum-exp, float32 [H_q, total_q]. Runs the portable kernel (the Hopper one
    takes dense batches only). Forward only: no autograd."""
    call = None
    signature = None
    tensors = (q, k, v, cu_seqlens_q, cu_seqlens_k)
    if not torch.compiler.is_compiling():
        try:
            # As in `attention`: a call with the signature of one that passed the checks passes
            # them too (they read shapes, strides, dtypes, devices, the lengths and the options;
            # never the offsets' values).
            signature = tuple(map(_tensor_signature, tensors)) + (
                max_seqlen_q, type(max_seqlen_q), max_seqlen_k, type(max_seqlen_k), is_causal,
                sm_scale, type(sm_scale), variant, v_granularity, smooth_k, type(smooth_k),
                p_encoding, p_scale, return_lse, rotate, type(rotate))
            call = _CHECKED_VARLEN_CALLS.get(signature)
        except (AttributeError, TypeError):  # not tensors, or an unhashable option: checked below
            signature = None
    if call is None:
        call = _CheckedArguments(_check_attention_varlen(
            q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, is_causal, sm_scale,
            variant, v_granularity, smooth_k, p_encoding, p_scale, return_lse, rotate))
        if signature is not None:
            _remember(_CHECKED_VARLEN_CALLS, signature, call)
    if signature is not None and _plain_eager(tensors):
        out, lse = _run_attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                         max_seqlen_k, call.arguments, call)
    else:
        out, lse = _attention_varlen_op(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                        max_seqlen_k, *call.arguments)
    return (out, lse) if return_lse else out


# `attention_varlen`'s checked calls by call signature: _CheckedArguments values (the op's
# arguments after the tensors and lengths, and the plan).
_CHECKED_VARLEN_CALLS = {}


def _check_attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                            is_causal, sm_scale, variant, v_granularity, smooth_k, p_encoding,
                            p_scale, return_lse, rotate):
    """Every check of `attention_varlen`; returns the op's arguments after the tensors and the
    lengths."""
    softmax_scale = _resolve_sm_scale(sm_scale)
    numerics = _check_numerics(variant, v_granularity, p_encoding, p_scale)
    smooth_k, rotate = _qk_transforms(smooth_k, rotate)
    packed = "[total, H, D]"
    _check_inputs(q, k, v, dims=3, what=packed)
    for name, tensor in (("q", q), ("k", k), ("v", v)):
        if tensor.shape[0] == 0:
            raise invalid_argument(f"{name}.shape", tuple(tensor.shape),
                                   f"expected at least one row in {packed}")
    if k.shape[2] != q.shape[2]:
        raise invalid_argument("k.shape", tuple(k.shape),
                               f"expected head dim {q.shape[2]} as q {tuple(q.shape)}")
    _check_same("v", v, k.shape, "the shape of k")
    batch = _check_offsets(cu_seqlens_q, cu_seqlens_k)
    for name, value in (("max_seqlen_q", max_seqlen_q), ("max_seqlen_k", max_seqlen_k)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise invalid_argument(name, repr(value), "expected an int >= 1 (the longest sequence)")
    _validate_problem(_checks.VARLEN_PROBLEM, batch=batch, heads_q=q.shape[1],
                      heads_kv=k.shape[1], seq_q=max_seqlen_q, seq_kv=max_seqlen_k,
                      head_dim=_padding.kernel_head_dim(q.shape[2]) or q.shape[2],
                      causal=bool(is_causal), variant=numerics.variant)
    _check_device([("q", q), ("k", k), ("v", v), ("cu_seqlens_q", cu_seqlens_q),
                   ("cu_seqlens_k", cu_seqlens_k)])
    return (bool(is_causal), softmax_scale, numerics.variant, numerics.v_granularity, smooth_k,
            numerics.p_encoding, numerics.p_scale, bool(return_lse), rotate)
