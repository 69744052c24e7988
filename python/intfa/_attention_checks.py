"""The argument checks of the torch entry points (``quantize``, ``attention_int8``, ``attention``,
``attention_varlen``), run before any op: types, dtypes, shapes, strides, devices and the
options, each failure an InvalidArgument naming the argument (or Unsupported), in the order the
entry points have always checked them. Each ``check_*`` of an entry point returns its checked
and defaulted arguments (intfa._op_args); those without torch are in intfa._checks.

For ``attention``, what torch's SDPA could serve instead (a dtype, head dim, size, stride, device
or GPU intfa's kernels do not take) raises an error marked by ``unservable`` with its fallback
reason, so that the caller can follow the fallback policy instead of raising.
"""
import torch

from intfa import _checks, _fallback, _padding
from intfa._checks import check_numerics, option
from intfa._errors import InvalidArgument, Unsupported, invalid_argument
from intfa._op_args import AttentionArgs, Int8AttentionArgs
from intfa._tensors import (FLOAT_DTYPES, LAYOUTS, bhnd, granularity_of, padded_seq,
                            v_scale_shape)


# --- one argument each -----------------------------------------------------------------------

def check_layout(layout):
    if layout not in LAYOUTS:
        raise invalid_argument("layout", repr(layout),
                               "expected " + " or ".join(map(repr, LAYOUTS)))
    return layout


def check_tensor(name, tensor, dtypes, dims=4, what="[B, H, N, D] or [B, N, H, D]"):
    """Type, dtype, then the number of dimensions (unchecked when `dims` is None)."""
    if not isinstance(tensor, torch.Tensor):
        raise invalid_argument(name, type(tensor).__name__, "expected a torch.Tensor")
    if tensor.dtype not in dtypes:
        raise invalid_argument(f"{name}.dtype", tensor.dtype,
                               "expected " + " or ".join(map(str, dtypes)))
    if dims is not None and tensor.dim() != dims:
        raise invalid_argument(f"{name}.shape", tuple(tensor.shape),
                               f"expected {dims} dimensions {what}")


def check_head_dim_stride(name, tensor):
    if tensor.stride(-1) != 1:
        raise invalid_argument(f"{name}.stride", tensor.stride(),
                               "expected stride 1 on the head dim (the last dimension)")


def check_same(name, tensor, expected, what):
    if tuple(tensor.shape) != tuple(expected):
        raise invalid_argument(f"{name}.shape", tuple(tensor.shape),
                               f"expected {tuple(expected)} ({what})")


def check_qk(q, k, layout, q_name="q", k_name="k"):
    b, _, _, d = bhnd(q, layout)
    kb, _, _, kd = bhnd(k, layout)
    if kb != b or kd != d:
        raise invalid_argument(f"{k_name}.shape", tuple(k.shape),
                               f"expected batch {b} and head dim {d} as {q_name} {tuple(q.shape)} "
                               f"(layout {layout})")


def validate_problem(names, **problem):
    # The C++ rules (head dims 64/128/256, heads_q a multiple of heads_kv, sizes >= 1), with the
    # C++ reason, naming the Python argument (`names`: _checks.TENSOR_PROBLEM, VARLEN_PROBLEM).
    # Under torch.compile the shapes may be symbolic and an opaque call would break the graph:
    # the op checks them again, still before its launch.
    if not torch.compiler.is_compiling():
        _checks.validate_problem(names, **problem)


def check_problem(q, k, layout, is_causal, variant):
    b, heads_q, seq_q, head_dim = bhnd(q, layout)
    _, heads_kv, seq_kv, _ = bhnd(k, layout)
    validate_problem(_checks.TENSOR_PROBLEM, batch=b, heads_q=heads_q, heads_kv=heads_kv,
                     seq_q=seq_q, seq_kv=seq_kv, head_dim=head_dim, causal=is_causal,
                     variant=variant)


def check_device(named_tensors):
    first_name, first = named_tensors[0]
    if not first.is_cuda:
        raise invalid_argument(f"{first_name}.device", first.device, "expected a CUDA tensor")
    for name, tensor in named_tensors[1:]:
        if tensor is not None and tensor.device != first.device:
            raise invalid_argument(f"{name}.device", tensor.device,
                                   f"expected {first.device}, the device of {first_name}")


def check_scale(name, scale, expected_shape):
    check_tensor(name, scale, (torch.float32,), dims=len(expected_shape),
                 what=f"like {tuple(expected_shape)}")
    check_same(name, scale, expected_shape, "the scales of the quantized tensor")
    if not scale.is_contiguous():
        raise invalid_argument(f"{name}.stride", scale.stride(), "expected a contiguous tensor")


def resolve_sm_scale(sm_scale, name="sm_scale"):
    # The C API reads 0 as "1/sqrt(head_dim)"; here None says that and 0 is refused (as are
    # bools, and what float32 cannot hold: _checks.resolve_sm_scale).
    return _checks.resolve_sm_scale(sm_scale, name)


def qk_transforms(smooth_k, rotate):
    """K smoothing (True or False) and the rotation of Q and K (True, False, "on", "off" or
    "auto", returned by name), None meaning the C++ default (intfa::AttentionOptions: smoothing
    on, automatic rotation); anything else is refused."""
    return option("smooth_k", smooth_k), option("rotate", rotate)


def check_inputs(q, k, v, dims=4, what="[B, H, N, D] or [B, N, H, D]"):
    """FP16/BF16 q, k and v of one dtype and `dims` dimensions, each with stride 1 on the head
    dim."""
    check_tensor("q", q, FLOAT_DTYPES, dims, what)
    for name, tensor in (("k", k), ("v", v)):
        check_tensor(name, tensor, FLOAT_DTYPES, dims, what)
        if tensor.dtype != q.dtype:
            raise invalid_argument(f"{name}.dtype", tensor.dtype, f"expected {q.dtype} as q")
    for name, tensor in (("q", q), ("k", k), ("v", v)):
        check_head_dim_stride(name, tensor)


def check_offsets(cu_seqlens_q, cu_seqlens_k):
    """int32 [batch + 1] contiguous offsets, as many for q as for k; returns batch."""
    for name, offsets in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
        check_tensor(name, offsets, (torch.int32,), dims=1, what="[batch + 1]")
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


# --- quantize ---------------------------------------------------------------------------------

def check_quantize(q, k, v, layout, v_granularity, smooth_k, rotate):
    """Every check of `quantize`; returns (v_granularity, smooth_k, rotate), defaulted: the
    steps rotate on request (True or "on") and never by themselves (None is off here; "auto",
    which decides per head inside `attention`'s one call, is refused)."""
    if rotate == "auto":
        raise invalid_argument("rotate", "'auto'", "expected True or False: automatic rotation "
                               "is intfa.attention's, whose one call keeps the heads' decisions")
    smooth_k, rotate = qk_transforms(smooth_k, False if rotate is None else rotate)
    check_layout(layout)
    v_granularity = option("v_granularity", v_granularity)
    check_tensor("q", q, FLOAT_DTYPES)
    check_tensor("k", k, FLOAT_DTYPES)
    check_head_dim_stride("q", q)
    check_head_dim_stride("k", k)
    check_qk(q, k, layout)
    if v is not None:
        check_tensor("v", v, FLOAT_DTYPES)
        check_head_dim_stride("v", v)
        check_same("v", v, k.shape, "the shape of k")
    check_problem(q, k, layout, False, "full_int8" if v is not None else "half_int8")
    check_device([("q", q), ("k", k), ("v", v)])
    return v_granularity, smooth_k, rotate


# --- attention_int8 ---------------------------------------------------------------------------

def check_attention_int8(q, k, v, q_scale, k_scale, v_scale, is_causal, sm_scale, layout,
                         out_dtype, numerics, config, q_dot_k_mean=None):
    """Every check of `attention_int8` (`numerics`: the numerics options it takes, by name);
    returns its Int8AttentionArgs."""
    check_layout(layout)
    numerics = check_numerics(numerics)
    softmax_scale = resolve_sm_scale(sm_scale)
    check_tensor("q", q, (torch.int8,))
    check_tensor("k", k, (torch.int8,))
    check_head_dim_stride("q", q)
    check_head_dim_stride("k", k)
    check_qk(q, k, layout)
    b, heads_q, seq_q, head_dim = bhnd(q, layout)
    _, heads_kv, seq_kv, _ = bhnd(k, layout)
    check_tensor("v", v, (torch.int8,) + FLOAT_DTYPES)
    full = v.dtype == torch.int8
    if full:
        check_same("v", v, (b, heads_kv, head_dim, padded_seq(seq_kv)),
                   "the INT8 V layout [B, H_kv, D, v_padded_seq(N_kv)] that quantize writes")
        if v_scale is None:
            raise invalid_argument("v_scale", None, "expected V's scales for INT8 V")
        check_tensor("v_scale", v_scale, (torch.float32,), dims=None)
        if v_scale.dim() not in (2, 3, 4):
            raise invalid_argument("v_scale.shape", tuple(v_scale.shape),
                                   "expected [B, H_kv], [B, H_kv, D] or [B, H_kv, N_pad/64, D]")
        granularity = granularity_of(v_scale)
        check_scale("v_scale", v_scale, v_scale_shape(granularity, b, heads_kv, seq_kv, head_dim))
    else:
        check_head_dim_stride("v", v)
        check_same("v", v, k.shape, "the shape of k")
        if v_scale is not None:
            raise invalid_argument("v_scale", "a tensor", "expected None for FP16/BF16 V")
    check_scale("q_scale", q_scale, (b, heads_q, seq_q))
    check_scale("k_scale", k_scale, (b, heads_kv, seq_kv))
    if out_dtype is None:
        out_dtype = torch.float16 if full else v.dtype
    if out_dtype not in FLOAT_DTYPES:
        raise invalid_argument("out_dtype", out_dtype, "expected torch.float16 or torch.bfloat16")
    if config is not None:
        if (not isinstance(config, (tuple, list)) or len(config) != 4
                or not all(isinstance(value, int) for value in config)):
            raise invalid_argument("config", repr(config),
                                   "expected (block_m, block_n, warps, stages), four ints")
        config = [int(value) for value in config]
    check_problem(q, k, layout, is_causal, "full_int8" if full else "half_int8")
    check_device([("q", q), ("k", k), ("v", v), ("q_scale", q_scale), ("k_scale", k_scale),
                  ("v_scale", v_scale)])
    if q_dot_k_mean is not None:
        check_scale("q_dot_k_mean", q_dot_k_mean, tuple(q_scale.shape))
        check_device([("q", q), ("q_dot_k_mean", q_dot_k_mean)])

    return Int8AttentionArgs(is_causal=bool(is_causal), sm_scale=softmax_scale, layout=layout,
                             out_dtype=out_dtype, numerics=numerics, config=config)


# --- attention --------------------------------------------------------------------------------

def unservable(reason, error):
    """`error`, marked as what policy "sdpa" answers by running SDPA (`reason`: a key of
    intfa._fallback.REASONS) rather than raising."""
    error.fallback_reason = reason
    return error


def check_attention(q, k, v, is_causal, scale, sm_scale, layout, variant, smooth_k, out,
                    fallback, rotate, numerics):
    """Every check of `attention` (`numerics`: its numerics options, by name); returns its
    AttentionArgs. What SDPA could serve instead raises an error marked by unservable."""
    _fallback.check_argument(fallback)
    smooth_k, rotate = qk_transforms(smooth_k, rotate)
    if scale is not None and sm_scale is not None and scale != sm_scale:
        raise invalid_argument("scale", scale, f"expected the same as sm_scale = {sm_scale} "
                               "(they are one argument under two names)")
    softmax_scale = (resolve_sm_scale(sm_scale) if sm_scale is not None
                     else resolve_sm_scale(scale, "scale"))
    check_layout(layout)
    variant = option("variant", variant)
    numerics = check_numerics(numerics)
    for name, tensor in (("q", q), ("k", k), ("v", v)):
        if not isinstance(tensor, torch.Tensor):
            raise invalid_argument(name, type(tensor).__name__, "expected a torch.Tensor")
    if (q.dtype == k.dtype == v.dtype and q.dtype.is_floating_point
            and q.dtype not in FLOAT_DTYPES):
        raise unservable("dtype", invalid_argument(
            "q.dtype", q.dtype, "expected " + " or ".join(map(str, FLOAT_DTYPES))))
    check_tensor("q", q, FLOAT_DTYPES)
    for name, tensor in (("k", k), ("v", v)):
        check_tensor(name, tensor, FLOAT_DTYPES)
        if tensor.dtype != q.dtype:
            raise invalid_argument(f"{name}.dtype", tensor.dtype, f"expected {q.dtype} as q")
    check_qk(q, k, layout)
    if v.shape[:-1] == k.shape[:-1] and v.shape[-1] != k.shape[-1]:
        raise unservable("head_dim", invalid_argument(
            "v.shape", tuple(v.shape), f"expected {tuple(k.shape)}, the shape of k (intfa's V "
            "has K's head dim)"))
    check_same("v", v, k.shape, "the shape of k")
    head_dim = q.shape[-1]
    kernel_dim = _padding.kernel_head_dim(head_dim)
    if kernel_dim is None:
        raise unservable("head_dim", invalid_argument(
            "q.shape", tuple(q.shape), f"supported head dims are multiples of 8 up to 256 (64, "
            f"128 and 256 run their own kernels, others the next of them), not {head_dim} (the "
            "head dim of q)"))
    for name, tensor in (("q", q), ("k", k), ("v", v)):
        if tensor.stride(-1) != 1:
            raise unservable("strides", invalid_argument(
                f"{name}.stride", tensor.stride(),
                "expected stride 1 on the head dim (the last dimension)"))
    # "auto" stays "auto" down to the op's plan, which resolves it (_checks.resolve_variant):
    # nothing opaque runs here while torch.compile traces the call.
    check_attention_problem(q, k, layout, bool(is_causal), variant, kernel_dim)
    check_out(out, q)
    check_kernel_device(q, k, v)
    return AttentionArgs(is_causal=bool(is_causal), sm_scale=softmax_scale, layout=layout,
                         variant=variant, smooth_k=smooth_k, rotate=rotate, numerics=numerics)


def check_attention_problem(q, k, layout, is_causal, variant, kernel_dim):
    """The C++ problem rules at the kernel's head dim: heads that are no GQA grouping are the
    caller's error (SDPA refuses them too); other sizes (an empty sequence, the grid's limits)
    are SDPA's to serve."""
    b, heads_q, seq_q, _ = bhnd(q, layout)
    _, heads_kv, seq_kv, _ = bhnd(k, layout)
    try:
        validate_problem(_checks.TENSOR_PROBLEM, batch=b, heads_q=heads_q, heads_kv=heads_kv,
                         seq_q=seq_q, seq_kv=seq_kv, head_dim=kernel_dim, causal=is_causal,
                         variant=variant)
    except InvalidArgument as error:
        if heads_q >= 1 and heads_kv >= 1 and heads_q % heads_kv:
            raise
        raise unservable("shape", error) from None


def check_out(out, q):
    """`out`: q's shape, dtype and device, and strides the kernels can write."""
    if out is None:
        return
    if not isinstance(out, torch.Tensor):
        raise invalid_argument("out", type(out).__name__, "expected a torch.Tensor or None")
    if out.dtype != q.dtype:
        raise invalid_argument("out.dtype", out.dtype, f"expected {q.dtype}, the dtype of q")
    check_same("out", out, q.shape, "the shape of q")
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
CAPABILITIES = {}
_MIN_CAPABILITY = (8, 0)


def check_kernel_device(q, k, v):
    """One CUDA device for q, k and v, of compute capability 8.0 or newer. The last check: the
    tests without a GPU stop here."""
    if not q.is_cuda:
        raise unservable("device", invalid_argument("q.device", q.device,
                                                    "expected a CUDA tensor"))
    check_device([("q", q), ("k", k), ("v", v)])
    if not torch.compiler.is_compiling():  # (fake tensors: no device to ask)
        index = q.device.index
        check_arch(index if index is not None else torch.cuda.current_device())


def check_arch(index):
    capability = CAPABILITIES.get(index)
    if capability is None:
        capability = CAPABILITIES[index] = tuple(torch.cuda.get_device_capability(index))
    if capability < _MIN_CAPABILITY:
        raise unservable("arch", Unsupported(
            f"intfa: GPU {index} has compute capability {capability[0]}.{capability[1]}; "
            "intfa's kernels need 8.0 or newer", field="q.device"))


# --- attention_varlen -------------------------------------------------------------------------

def check_attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                           is_causal, sm_scale, variant, smooth_k, rotate, numerics):
    """Every check of `attention_varlen` (`numerics`: its numerics options, by name); returns its
    AttentionArgs (layout NHD: the kernels see packed rows as one batch of NHD rows)."""
    softmax_scale = resolve_sm_scale(sm_scale)
    # The variant table was measured on dense batches, not packed ones: "auto" is full INT8, the
    # default before the table.
    variant = option("variant", variant)
    variant = "full_int8" if variant == "auto" else variant
    numerics = check_numerics(numerics)
    smooth_k, rotate = qk_transforms(smooth_k, rotate)
    packed = "[total, H, D]"
    check_inputs(q, k, v, dims=3, what=packed)
    for name, tensor in (("q", q), ("k", k), ("v", v)):
        if tensor.shape[0] == 0:
            raise invalid_argument(f"{name}.shape", tuple(tensor.shape),
                                   f"expected at least one row in {packed}")
    if k.shape[2] != q.shape[2]:
        raise invalid_argument("k.shape", tuple(k.shape),
                               f"expected head dim {q.shape[2]} as q {tuple(q.shape)}")
    check_same("v", v, k.shape, "the shape of k")
    batch = check_offsets(cu_seqlens_q, cu_seqlens_k)
    for name, value in (("max_seqlen_q", max_seqlen_q), ("max_seqlen_k", max_seqlen_k)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise invalid_argument(name, repr(value), "expected an int >= 1 (the longest sequence)")
    validate_problem(_checks.VARLEN_PROBLEM, batch=batch, heads_q=q.shape[1],
                     heads_kv=k.shape[1], seq_q=max_seqlen_q, seq_kv=max_seqlen_k,
                     head_dim=_padding.kernel_head_dim(q.shape[2]) or q.shape[2],
                     causal=bool(is_causal), variant=variant)
    check_device([("q", q), ("k", k), ("v", v), ("cu_seqlens_q", cu_seqlens_q),
                  ("cu_seqlens_k", cu_seqlens_k)])
    return AttentionArgs(is_causal=bool(is_causal), sm_scale=softmax_scale, layout="NHD",
                         variant=variant, smooth_k=smooth_k, rotate=rotate, numerics=numerics)
