"""What the torch layer keeps per signature, so that a repeated call is checked and planned once:
the C++ plans (intfa::attention_forward_16bit's AttentionPlan, intfa::attention_forward's
Int8AttentionPlan), by the shapes, strides, dtypes and options they are made for, and each entry
point's checked calls (CheckedCall), by what its checks read. Every cache is bounded: a process
that sees more signatures than MAX_ENTRIES starts that cache over.
"""
import torch

from intfa import _checks, _intfa
from intfa._attention_checks import check_same
from intfa._tensors import FLOAT_NAMES, bhnd, bhnd_strides, granularity_of, v_int8_strides

MAX_ENTRIES = 512

# intfa::attention_forward_16bit plans, one per signature (shapes, strides, dtype, options): a
# call of a known signature is one pybind11 call with seven addresses.
ATTENTION_PLANS = {}
# intfa::attention_forward plans over quantized tensors, one per signature.
INT8_ATTENTION_PLANS = {}

# Each entry point's checked calls by call signature (see intfa._torch): CheckedCall values.
CHECKED_ATTENTION_CALLS = {}
CHECKED_INT8_CALLS = {}
CHECKED_VARLEN_CALLS = {}


def remember(cache, key, value):
    if len(cache) >= MAX_ENTRIES:
        cache.clear()
    cache[key] = value
    return value


class CheckedCall:
    """What the checks of one call signature decided: the call's checked arguments (an
    intfa._op_args value) and the plan, made at its first plain eager call; or, for `attention`,
    why intfa cannot serve such calls (`unserved`, a key of intfa._fallback.REASONS, with the
    check's message as `detail`)."""

    __slots__ = ("args", "plan", "unserved", "detail")

    def __init__(self, args=None, unserved=None, detail=""):
        self.args = args
        self.plan = None
        self.unserved = unserved
        self.detail = detail


def tensor_signature(tensor):
    """What the checks read of a tensor argument (None stays None); contiguity is a function of
    the shape and strides."""
    if tensor is None:
        return None
    return (tensor.shape, tensor.stride(), tensor.dtype, tensor.device, type(tensor))


def plan_of(call, make):
    """The plan that `call` (a checked signature's) keeps, made by `make()` at its first use;
    without a call, a plan from `make()` (the plan caches by signature themselves)."""
    if call is None:
        return make()
    if call.plan is None:
        call.plan = make()
    return call.plan


def attention_plan(q, k, v, out, args, packing=None):
    """The plan of one signature (`args`: intfa._op_args.AttentionArgs); `packing`
    (sequences, max_seqlen_q, max_seqlen_k) for packed sequences, whose tensors are then
    [1, total, H, D] views in layout NHD (K per token)."""
    key = (q.shape, k.shape, v.shape, q.stride(), k.stride(), v.stride(), out.stride(), q.dtype,
           args, packing)
    plan = ATTENTION_PLANS.get(key)
    if plan is not None:
        return plan
    # The C++ views carry strides, not extents: V is read with K's (the public functions check
    # this too; the op may be called directly).
    check_same("v", v, k.shape, "the shape of k")
    layout = args.layout
    b, heads_q, seq_q, head_dim = bhnd(q, layout)
    _, heads_kv, seq_kv, _ = bhnd(k, layout)
    totals = {}
    if packing is not None:
        totals = dict(total_q=seq_q, total_kv=seq_kv)
        b, seq_q, seq_kv = packing
    # "auto" resolved here, in the op's implementation, not in the checks: nothing opaque runs
    # while torch.compile traces the call.
    variant = _checks.resolve_variant(args.variant, q.device, head_dim, seq_q, seq_kv,
                                      args.is_causal)
    return remember(ATTENTION_PLANS, key, _intfa.AttentionPlan(
        batch=b, heads_q=heads_q, heads_kv=heads_kv, seq_q=seq_q, seq_kv=seq_kv,
        head_dim=head_dim, causal=args.is_causal, variant=variant,
        dtype=FLOAT_NAMES[q.dtype], q_strides=bhnd_strides(q, layout),
        k_strides=bhnd_strides(k, layout), v_strides=bhnd_strides(v, layout),
        out_strides=bhnd_strides(out, layout), softmax_scale=args.sm_scale,
        numerics=dict(args.numerics), smooth_k=args.smooth_k, rotate=args.rotate, **totals))


def int8_attention_plan(q, k, v, v_scale, out, args):
    """intfa::attention_forward over quantized tensors, one plan per signature (`args`:
    intfa._op_args.Int8AttentionArgs; the output's dtype is out's)."""
    full = v.dtype == torch.int8
    config = args.config
    key = (q.shape, k.shape, v.shape, q.stride(), k.stride(), v.stride(), out.stride(), v.dtype,
           out.dtype, None if v_scale is None else v_scale.dim(), args.layout, args.is_causal,
           args.sm_scale, args.numerics, None if config is None else tuple(config))
    plan = INT8_ATTENTION_PLANS.get(key)
    if plan is not None:
        return plan
    layout = args.layout
    b, heads_q, seq_q, head_dim = bhnd(q, layout)
    _, heads_kv, seq_kv, _ = bhnd(k, layout)
    numerics = dict(args.numerics)
    if full:  # V's granularity is that of its scales (half INT8 V has none: the default)
        numerics["v_granularity"] = granularity_of(v_scale)
    return remember(INT8_ATTENTION_PLANS, key, _intfa.Int8AttentionPlan(
        batch=b, heads_q=heads_q, heads_kv=heads_kv, seq_q=seq_q, seq_kv=seq_kv,
        head_dim=head_dim, causal=args.is_causal, variant="full_int8" if full else "half_int8",
        v_dtype="i8" if full else FLOAT_NAMES[v.dtype], out_dtype=FLOAT_NAMES[out.dtype],
        q_strides=bhnd_strides(q, layout), k_strides=bhnd_strides(k, layout),
        v_strides=v_int8_strides(v) if full else bhnd_strides(v, layout),
        out_strides=bhnd_strides(out, layout), softmax_scale=args.sm_scale, numerics=numerics,
        config=config))
