"""A stand-in for intfa's C++ plan, so that the torch layer's path to the kernel (head dims, out=,
the LSE, the plan per signature, the integrations' routing) runs without a GPU on CPU tensors.

``StandInPlan`` is made with the tensors and arguments ``_plans.attention_plan`` is given and, at
``run``, reads and writes the addresses it is handed, as the C++ plan does: float64 attention
with the plan's own head dim, softmax scale (0: 1/sqrt(its head dim), as the C API) and
bottom-right causal mask. K smoothing and the rotation change nothing in exact arithmetic, the
LSE included (the kernel adds smoothing's shift back: intfa::AttentionInputs::lse), so the
stand-in only records them, and K's scale granularity too (a matter of rounding only). A layer
that passed the wrong buffers, the wrong scale or shifted LSEs gives wrong numbers."""
import contextlib
import ctypes
import math
from unittest import mock

from support import torch


def _view(address, shape, strides, dtype):
    """The tensor of `shape`, `strides`, `dtype` at host `address`."""
    span = 1 + sum((extent - 1) * stride for extent, stride in zip(shape, strides))
    element_bytes = torch.empty((), dtype=dtype).element_size()
    memory = (ctypes.c_char * (span * element_bytes)).from_address(address)
    return torch.frombuffer(memory, dtype=dtype, count=span).as_strided(shape, strides)


class StandInPlan:
    made = []  # every plan made, newest last
    error = None  # an exception that every run() raises (the runtime refusing a launch)

    def __init__(self, q, k, v, out, args, packing=None):
        self.views = [(tuple(x.shape), x.stride(), x.dtype) for x in (q, k, v, out)]
        self.head_dim = q.shape[-1]
        self.is_causal, self.sm_scale, self.layout, self.smooth_k = (args.is_causal, args.sm_scale,
                                                                     args.layout, args.smooth_k)
        self.variant, self.rotate = args.variant, args.rotate
        self.numerics = dict(args.numerics)  # the numerics options by name
        self.workspace_bytes = 256
        self.runs = 0
        StandInPlan.made.append(self)

    def run(self, q, k, v, out, lse, workspace, stream, cu_seqlens_q=0, cu_seqlens_kv=0):
        if self.error is not None:
            raise self.error
        self.runs += 1
        q, k, v, out = (_view(address, *view) for address, view in zip((q, k, v, out),
                                                                         self.views))
        hnd = (lambda x: x) if self.layout == "HND" else (lambda x: x.transpose(1, 2))
        q64, k64, v64 = (hnd(x).double() for x in (q, k, v))
        group = q64.shape[1] // k64.shape[1]
        k64, v64 = (x.repeat_interleave(group, dim=1) for x in (k64, v64))
        scale = self.sm_scale or 1 / math.sqrt(self.head_dim)
        scores = scale * q64 @ k64.transpose(-1, -2)
        seq_q, seq_kv = scores.shape[-2:]
        if self.is_causal:
            visible = torch.ones(seq_q, seq_kv, dtype=torch.bool).tril(seq_kv - seq_q)
            scores = scores.masked_fill(~visible, -math.inf)
        row_lse = torch.logsumexp(scores, dim=-1)
        weights = torch.exp(scores - row_lse[..., None]).nan_to_num(0.0)
        hnd(out).copy_(weights @ v64)
        if lse:
            _view(lse, tuple(row_lse.shape), row_lse.contiguous().stride(),
                  torch.float32).copy_(row_lse)


@contextlib.contextmanager
def stand_in_kernels():
    """intfa's torch layer with StandInPlan for the C++ plan and CPU tensors taken as the
    kernel's device; the checks' cache is emptied before and after, so that no test sees
    another's decisions."""
    from intfa import _attention_checks, _ops, _plans
    StandInPlan.made.clear()
    StandInPlan.error = None
    _plans.CHECKED_ATTENTION_CALLS.clear()
    try:
        with mock.patch.object(_plans, "attention_plan", StandInPlan), \
                mock.patch.object(_attention_checks, "check_kernel_device",
                                  lambda q, k, v: None), \
                mock.patch.object(_ops, "on", lambda device: contextlib.nullcontext()), \
                mock.patch.object(_ops, "stream", lambda device: 0):
            yield StandInPlan.made
    finally:
        StandInPlan.error = None
        _plans.CHECKED_ATTENTION_CALLS.clear()


def reference(q, k, v, is_causal=False, scale=None, layout="HND", top_left=False):
    """float64 attention and its LSE, [B, H, N] (keys repeated over query-head groups; rows
    that see no key: zeros and -inf), output in `layout`."""
    hnd = (lambda x: x) if layout == "HND" else (lambda x: x.transpose(1, 2))
    q64, k64, v64 = (hnd(x).double() for x in (q, k, v))
    group = q64.shape[1] // k64.shape[1]
    k64, v64 = (x.repeat_interleave(group, dim=1) for x in (k64, v64))
    scores = (scale or 1 / math.sqrt(q64.shape[-1])) * q64 @ k64.transpose(-1, -2)
    seq_q, seq_kv = scores.shape[-2:]
    if is_causal:
        diagonal = 0 if top_left else seq_kv - seq_q
        visible = torch.ones(seq_q, seq_kv, dtype=torch.bool).tril(diagonal)
        scores = scores.masked_fill(~visible, -math.inf)
    lse = torch.logsumexp(scores, dim=-1)
    out = torch.exp(scores - lse[..., None]).nan_to_num(0.0) @ v64
    return hnd(out), lse
