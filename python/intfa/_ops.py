"""The torch.library custom ops of the torch layer (``intfa::quantize_qk``, ``intfa::quantize_v``,
``intfa::attention_int8``, ``intfa::attention``, ``intfa::attention_varlen``): their schemas,
their fake implementations (output shapes for torch.compile, nothing run), their
implementations (the launches, on the tensors' device and current stream), and the wrapper that
lets a plain eager call run an implementation directly, without the dispatcher's per-call cost.

The ops' arguments are the public functions' after checking and defaulting: strings for the
enumerations, sm_scale 0.0 for 1/sqrt(head_dim) (as in the C API), an empty LSE when none is
asked for (an op cannot return None in a tuple), and the numerics options as one ``str numerics``
("p_encoding=u8,p_scale=tile", intfa._op_args.numerics_text; "" for the defaults), so that a new
option changes no schema. Their names are what torch.compile graphs and CUDA-graph users see. The
entry points hand over their checked arguments as one named value (intfa._op_args); ``call_*``
below spell it as the op's schema, and each op's implementation names it again: the only two
places that know the schema's order.
"""
from typing import List, Optional, Tuple

import torch

from intfa import _intfa, _plans
from intfa._op_args import AttentionArgs, Int8AttentionArgs, numerics_of_text, numerics_text
from intfa._tensors import (FLOAT_NAMES, bhnd, bhnd_strides, empty_attention, empty_lse,
                            empty_output, empty_qk, empty_v, empty_varlen_attention,
                            granularity_of, no_lse, on, stream, v_scale_shape)


# --- plain eager calls skip the dispatcher ---------------------------------------------------

def plain_eager(arguments):
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


class CustomOp:
    """A torch.library custom op and the function it runs. Called, it runs the function directly
    in plain eager mode (plain_eager) and goes through the op otherwise."""

    def __init__(self, name, implementation, mutates_args=()):
        self.implementation = implementation
        self.op = torch.library.custom_op(name, mutates_args=mutates_args,
                                          device_types="cuda")(implementation)

    def register_fake(self, fake):
        return self.op.register_fake(fake)

    def __call__(self, *arguments):
        if plain_eager(arguments):
            return self.implementation(*arguments)
        return self.op(*arguments)


def custom_op(name, mutates_args=()):
    return lambda implementation: CustomOp(name, implementation, mutates_args)


# --- quantize ---------------------------------------------------------------------------------

def launch_quantize_qk(x, layout, smooth_k, stream_handle, rotate="off", k_mean=None,
                       k_rotated_heads=None):
    """Q or K quantized per token (`rotate` "off", "on" or "auto"; with "auto" the heads'
    decisions, int32 [B, H_kv], are given in `k_rotated_heads`: intfa.distributed's K shards and
    Q): (x8, scales, K's means or Q's LSE terms)."""
    x8, scale, mean = empty_qk(x, layout, smooth_k, k_mean)
    term = {}
    if k_mean is not None:  # Q of a smoothed K: q . k_mean per row, the LSE term
        term = dict(k_channel_mean=k_mean.data_ptr(), k_channel_mean_heads=k_mean.shape[1],
                    q_dot_k_mean=mean.data_ptr())
    if k_rotated_heads is not None:
        term.update(k_rotated_heads=k_rotated_heads.data_ptr(),
                    k_channel_mean_heads=k_rotated_heads.shape[1])
    _intfa.quantize_qk(shape=bhnd(x, layout), input=x.data_ptr(),
                       input_dtype=FLOAT_NAMES[x.dtype], input_strides=bhnd_strides(x, layout),
                       output=x8.data_ptr(), output_strides=bhnd_strides(x8, layout),
                       scales=scale.data_ptr(),
                       smooth_k_channel_mean=mean.data_ptr() if smooth_k else 0,
                       stream=stream_handle, rotate=rotate, **term)
    return x8, scale, mean


def launch_quantize_v(v, layout, granularity, stream_handle):
    shape = bhnd(v, layout)
    v8, scale = empty_v(shape, granularity, v.device)
    _intfa.quantize_v(shape=shape, input=v.data_ptr(),
                      input_dtype=FLOAT_NAMES[v.dtype], input_strides=bhnd_strides(v, layout),
                      output=v8.data_ptr(), scales=scale.data_ptr(), v_granularity=granularity,
                      stream=stream_handle)
    return v8, scale


# --- the passes of a sequence split across devices (intfa.distributed) ------------------------
# The whole sequence's K means and V scales are reduced over the shards, then every shard is
# quantized with them: as one call over the whole sequence would quantize it.

def launch_k_channel_means(samples, stream_handle, smoothed=True, rotated_heads=False):
    """K smoothing's means, float32 [B, H, D], of ``samples`` ([B, H, n, D] "HND": the rows
    intfa._intfa.k_channel_mean_sample_rows names, gathered from a longer sequence), and with
    ``rotated_heads`` automatic rotation's decisions, int32 [B, H], for K smoothed by them (as
    given when ``smoothed`` is False: the means are then not returned): (means, decisions)."""
    b, h, _, d = samples.shape
    means = (torch.empty((b, h, d), dtype=torch.float32, device=samples.device) if smoothed
             else None)
    decisions = (torch.empty((b, h), dtype=torch.int32, device=samples.device) if rotated_heads
                 else None)
    _intfa.k_channel_means(shape=bhnd(samples, "HND"), input=samples.data_ptr(),
                           input_dtype=FLOAT_NAMES[samples.dtype],
                           input_strides=bhnd_strides(samples, "HND"),
                           means=means.data_ptr() if means is not None else 0,
                           stream=stream_handle,
                           rotated_heads=decisions.data_ptr() if decisions is not None else 0)
    return means, decisions


def launch_quantize_k_smoothed_by(k, layout, means, stream_handle, rotate="off",
                                  k_rotated_heads=None):
    """K quantized per token after subtracting ``means`` (float32 [B, H_kv, D], given), rotated
    as ``rotate`` says (with "auto", the decisions ``k_rotated_heads`` give): (k8, scales)."""
    k8, scale, _ = empty_qk(k, layout, False)
    _intfa.quantize_qk(shape=bhnd(k, layout), input=k.data_ptr(),
                       input_dtype=FLOAT_NAMES[k.dtype], input_strides=bhnd_strides(k, layout),
                       output=k8.data_ptr(), output_strides=bhnd_strides(k8, layout),
                       scales=scale.data_ptr(), smooth_k_channel_mean=0, stream=stream_handle,
                       rotate=rotate, smooth_k_given_mean=means.data_ptr(),
                       k_rotated_heads=(k_rotated_heads.data_ptr() if k_rotated_heads is not None
                                        else 0))
    return k8, scale


def launch_v_scales(v, layout, granularity, stream_handle):
    """V's per-tensor or per-channel scales of ``v`` alone (float32, v_scale_shape)."""
    b, h, n, d = shape = bhnd(v, layout)
    scales = torch.empty(v_scale_shape(granularity, b, h, n, d), dtype=torch.float32,
                         device=v.device)
    _intfa.v_scales(shape=shape, input=v.data_ptr(), input_dtype=FLOAT_NAMES[v.dtype],
                    input_strides=bhnd_strides(v, layout), scales=scales.data_ptr(),
                    v_granularity=granularity, stream=stream_handle)
    return scales


def launch_quantize_v_with_scales(v, layout, scales, stream_handle):
    """V in the INT8 V layout, quantized with ``scales`` (per tensor or channel, given)."""
    shape = bhnd(v, layout)
    v8, _ = empty_v(shape, granularity_of(scales), v.device)
    _intfa.quantize_v(shape=shape, input=v.data_ptr(), input_dtype=FLOAT_NAMES[v.dtype],
                      input_strides=bhnd_strides(v, layout), output=v8.data_ptr(),
                      scales=scales.data_ptr(), v_granularity=granularity_of(scales),
                      stream=stream_handle, scales_given=True)
    return v8


@custom_op("intfa::quantize_qk")
def quantize_qk_op(x: torch.Tensor, layout: str, smooth_k: bool, rotate: bool = False,
                   k_mean: Optional[torch.Tensor] = None
                   ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    with on(x.device):
        return launch_quantize_qk(x, layout, smooth_k, stream(x.device),
                                  "on" if rotate else "off", k_mean)


@quantize_qk_op.register_fake
def _(x, layout, smooth_k, rotate=False, k_mean=None):
    return empty_qk(x, layout, smooth_k, k_mean)


@custom_op("intfa::quantize_v")
def quantize_v_op(v: torch.Tensor, layout: str,
                  v_granularity: str) -> Tuple[torch.Tensor, torch.Tensor]:
    with on(v.device):
        return launch_quantize_v(v, layout, v_granularity, stream(v.device))


@quantize_v_op.register_fake
def _(v, layout, v_granularity):
    return empty_v(bhnd(v, layout), v_granularity, v.device)


# --- attention_int8 ---------------------------------------------------------------------------

def run_attention_int8(q, k, v, q_scale, k_scale, v_scale, q_dot_k_mean, args, return_lse,
                       call=None):
    """intfa::attention_forward on checked quantized tensors (`args`: Int8AttentionArgs): the
    output, and the LSE when asked for (else None, and no tensor is allocated for it). `call`,
    when given, keeps the plan of its signature."""
    out = empty_output(q, args.out_dtype)
    lse = empty_lse(q, args.layout) if return_lse else None
    plan = _plans.plan_of(call, lambda: _plans.int8_attention_plan(q, k, v, v_scale, out, args))
    with on(q.device):
        plan.run(q.data_ptr(), k.data_ptr(), v.data_ptr(), q_scale.data_ptr(), k_scale.data_ptr(),
                 v_scale.data_ptr() if v_scale is not None else 0, out.data_ptr(),
                 lse.data_ptr() if lse is not None else 0, stream(q.device),
                 q_dot_k_mean.data_ptr() if q_dot_k_mean is not None else 0)
    return out, lse


@custom_op("intfa::attention_int8")
def attention_int8_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                      q_scale: torch.Tensor, k_scale: torch.Tensor,
                      v_scale: Optional[torch.Tensor], is_causal: bool, sm_scale: float,
                      layout: str, out_dtype: torch.dtype, return_lse: bool,
                      config: Optional[List[int]], q_dot_k_mean: Optional[torch.Tensor] = None,
                      numerics: str = "") -> Tuple[torch.Tensor, torch.Tensor]:
    args = Int8AttentionArgs(is_causal=is_causal, sm_scale=sm_scale, layout=layout,
                             out_dtype=out_dtype, numerics=numerics_of_text(numerics),
                             config=config)
    out, lse = run_attention_int8(q, k, v, q_scale, k_scale, v_scale, q_dot_k_mean, args,
                                  return_lse)
    return out, (lse if lse is not None else no_lse(q))


@attention_int8_op.register_fake
def _(q, k, v, q_scale, k_scale, v_scale, is_causal, sm_scale, layout, out_dtype, return_lse,
      config, q_dot_k_mean=None, numerics=""):
    return empty_attention(q, layout, out_dtype, return_lse)


def call_attention_int8(q, k, v, q_scale, k_scale, v_scale, q_dot_k_mean, args, return_lse):
    """intfa::attention_int8 through the op, `args` (Int8AttentionArgs) spelled as its schema."""
    return attention_int8_op(q, k, v, q_scale, k_scale, v_scale, args.is_causal, args.sm_scale,
                             args.layout, args.out_dtype, return_lse, args.config, q_dot_k_mean,
                             numerics_text(args.numerics))


# --- attention --------------------------------------------------------------------------------

def run_attention(q, k, v, out, args, return_lse, call=None):
    """intfa::attention_forward_16bit on checked q, k, v (`args`: AttentionArgs): into `out`
    (allocated when None), with the natural-log LSE [B, H_q, N_q] when `return_lse` (else None).
    A head dim between the kernels' own (a multiple of 8) runs the next kernel, which reads the
    missing channels as zeros and leaves them out of `out` (intfa/_padding.py says why zero
    channels are exact). `call`, when given, keeps the plan of its signature (a plain eager
    call's fast path).

    One C++ call quantizes Q, K (and V) into a workspace from torch's caching allocator and
    attends; the workspace goes back to the allocator at once, stream-ordered, as any temporary
    of an eager op does."""
    if out is None:
        out = empty_output(q, q.dtype)
    lse = empty_lse(q, args.layout) if return_lse else None
    plan = _plans.plan_of(call, lambda: _plans.attention_plan(q, k, v, out, args))
    workspace = torch.empty(plan.workspace_bytes, dtype=torch.uint8, device=q.device)
    with on(q.device):
        plan.run(q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(),
                 lse.data_ptr() if lse is not None else 0, workspace.data_ptr(),
                 stream(q.device))
    # (With K smoothing the LSE is already that of the original scores: the kernel adds
    # sm_scale * q . k_mean back, intfa::AttentionInputs::lse.)
    return out, lse


@custom_op("intfa::attention")
def attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool,
                 sm_scale: float, layout: str, variant: str, smooth_k: bool, rotate: str,
                 return_lse: bool, numerics: str = "") -> Tuple[torch.Tensor, torch.Tensor]:
    args = AttentionArgs(is_causal=is_causal, sm_scale=sm_scale, layout=layout, variant=variant,
                         smooth_k=smooth_k, rotate=rotate, numerics=numerics_of_text(numerics))
    out, lse = run_attention(q, k, v, None, args, return_lse)
    return out, (lse if lse is not None else no_lse(q))


@attention_op.register_fake
def _(q, k, v, is_causal, sm_scale, layout, variant, smooth_k, rotate, return_lse, numerics=""):
    return empty_attention(q, layout, q.dtype, return_lse)


def call_attention(q, k, v, args, return_lse):
    """intfa::attention through the op, `args` (AttentionArgs) spelled as its schema."""
    return attention_op(q, k, v, args.is_causal, args.sm_scale, args.layout, args.variant,
                        args.smooth_k, args.rotate, return_lse, numerics_text(args.numerics))


# --- attention_varlen -------------------------------------------------------------------------

def run_attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, args,
                         return_lse, call=None):
    """intfa::attention_forward_16bit on checked packed sequences (`args`: AttentionArgs, layout
    NHD): the output [total_q, H_q, D], and the LSE [H_q, total_q] when asked for (else None,
    and none is allocated). `call`, when given, keeps the plan of its signature."""
    out = empty_output(q, q.dtype)
    lse = (torch.empty((q.shape[1], q.shape[0]), dtype=torch.float32, device=q.device)
           if return_lse else None)
    # The kernels see packed tensors as one batch of NHD rows: [1, total, H, D]; the plan has the
    # sequences' count and longest lengths, the offsets come with the call.
    plan = _plans.plan_of(call, lambda: _plans.attention_plan(
        *(x.unsqueeze(0) for x in (q, k, v, out)), args,
        packing=(cu_seqlens_q.numel() - 1, max_seqlen_q, max_seqlen_k)))
    workspace = torch.empty(plan.workspace_bytes, dtype=torch.uint8, device=q.device)
    with on(q.device):
        plan.run(q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(),
                 lse.data_ptr() if lse is not None else 0, workspace.data_ptr(),
                 stream(q.device), cu_seqlens_q.data_ptr(), cu_seqlens_k.data_ptr())
    return out, lse


@custom_op("intfa::attention_varlen")
def attention_varlen_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                        cu_seqlens_q: torch.Tensor, cu_seqlens_k: torch.Tensor,
                        max_seqlen_q: int, max_seqlen_k: int, is_causal: bool, sm_scale: float,
                        variant: str, smooth_k: bool, rotate: str, return_lse: bool,
                        numerics: str = "") -> Tuple[torch.Tensor, torch.Tensor]:
    args = AttentionArgs(is_causal=is_causal, sm_scale=sm_scale, layout="NHD", variant=variant,
                         smooth_k=smooth_k, rotate=rotate, numerics=numerics_of_text(numerics))
    out, lse = run_attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                    max_seqlen_k, args, return_lse)
    return out, (lse if lse is not None else no_lse(q))


@attention_varlen_op.register_fake
def _(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, is_causal, sm_scale,
      variant, smooth_k, rotate, return_lse, numerics=""):
    return empty_varlen_attention(q, return_lse)


def call_attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, args,
                          return_lse):
    """intfa::attention_varlen through the op, `args` (AttentionArgs) spelled as its schema (no
    layout: packed rows are NHD)."""
    return attention_varlen_op(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                               args.is_causal, args.sm_scale, args.variant, args.smooth_k,
                               args.rotate, return_lse, numerics_text(args.numerics))
