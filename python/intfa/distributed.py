"""Context parallelism: one attention over a sequence sharded across the ranks of a
torch.distributed group, with intfa as each rank's local kernel (issue 29).

``ring_attention``: every rank keeps its Q shard; the K/V shards travel around the ring
(``batch_isend_irecv``, the transfer of the next shard posted before this shard's attention so that
the two overlap), and each rank merges its partial outputs by their LSE. K and V are quantized once,
on the rank that owns them: the INT8 shards and their scales are what travel (half the bytes of
FP16). Causal attention uses the zig-zag split for balance: the sequence cut into 2 * world_size
equal chunks, rank r holding chunks r and 2 * world_size - 1 - r, concatenated in that order
(``shard_sequence(x, rank, world_size, zigzag=True)``).

The ring quantizes as one ``intfa.attention`` call over the whole sequence does (issue 48): before
quantizing, the ranks all-reduce what that call computes over the whole sequence, K's sampled rows
(K smoothing's means) and V's per-channel or per-tensor scales, so every shard is smoothed by the
sequence's means and scaled by its scales; Q and K are per token (and rotated when asked) either
way. Each shard's INT8 Q, K and V are then the very rows and columns one call would make of it,
and the ring's result differs from one call's only by the rounding of its partial outputs to 16
bits before their merge.

``ulysses_attention``: all-to-all from sequence shards to head shards, one local
``intfa.attention`` over the whole sequence, all-to-all back. Shards are contiguous in rank order
(``shard_sequence(x, rank, world_size)``); the head counts must be divisible by the group size.

The per-step work is separate from the communication, so that ``simulate_ring_attention`` and
``simulate_ulysses_attention`` run every rank's steps in one process, through the same code, over a
list of shards. The local attention and merge are a ``kernels`` object: ``IntfaKernels`` (the
default) or ``SdpaKernels`` (exact, any device and dtype: the reference the tests inject).
"""
import os
from typing import NamedTuple, Optional

import torch
import torch.distributed as dist

try:
    from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
except ImportError:  # a torch built without distributed support
    DeviceMesh = init_device_mesh = None

import intfa
from intfa import _attention_checks, _checks, _intfa, _ops, _sdpa
from intfa._checks import option
from intfa._errors import invalid_argument
from intfa._tensors import on, stream

LAYOUTS = ("HND", "NHD")
FLOAT_DTYPES = (torch.float16, torch.bfloat16)
HEAD_DIMS = (64, 128, 256)  # the quantize kernels' (ring_attention quantizes each shard itself)


# --- sharding -------------------------------------------------------------------------------

def _seq_dim(layout):
    return 2 if layout == "HND" else 1


def _head_dim_index(layout):
    return 1 if layout == "HND" else 2


def _check_layout(layout):
    if layout not in LAYOUTS:
        raise invalid_argument("layout", repr(layout), "expected 'HND' or 'NHD'")


def _chunks_of_rank(rank, world_size, zigzag):
    """The global chunk indices a rank holds, in the order of its shard."""
    return (rank, 2 * world_size - 1 - rank) if zigzag else (rank,)


def shard_sequence(x, rank, world_size, *, layout="HND", zigzag=False, ulysses_size=1):
    """`rank`'s shard of a full sequence ``x`` ([B, H, N, D] for "HND", [B, N, H, D] for "NHD"; a
    [B, H, N] LSE as "HND"): the rank-th of world_size contiguous pieces, or with ``zigzag`` (what
    causal ``ring_attention`` expects) chunks rank and 2 * world_size - 1 - rank of 2 * world_size.
    With ``ulysses_size`` U > 1 (``usp_attention``: world_size / U ring ranks of U Ulysses ranks
    each, rank = ring rank * U + Ulysses rank): the (rank % U)-th of U contiguous pieces of ring
    rank rank // U's shard of world_size / U. A view when contiguous pieces, a copy for zig-zag."""
    _check_layout(layout)
    if ulysses_size != 1:
        _check_ulysses_size(ulysses_size, world_size)
        ring_shard = shard_sequence(x, rank // ulysses_size, world_size // ulysses_size,
                                    layout=layout, zigzag=zigzag)
        return shard_sequence(ring_shard, rank % ulysses_size, ulysses_size, layout=layout)
    dim = _seq_dim(layout)
    pieces = 2 * world_size if zigzag else world_size
    if x.shape[dim] % pieces:
        raise invalid_argument("x.shape", tuple(x.shape),
                               f"expected a sequence length (dim {dim}) divisible by {pieces}")
    size = x.shape[dim] // pieces
    chunks = [x.narrow(dim, index * size, size)
              for index in _chunks_of_rank(rank, world_size, zigzag)]
    return chunks[0] if len(chunks) == 1 else torch.cat(chunks, dim)


def unshard_sequence(shards, *, layout="HND", zigzag=False, ulysses_size=1):
    """The full sequence from every rank's shard (a list in rank order, as all_gather gives):
    the inverse of ``shard_sequence``."""
    _check_layout(layout)
    dim = _seq_dim(layout)
    if ulysses_size != 1:
        _check_ulysses_size(ulysses_size, len(shards))
        ring_shards = [torch.cat(list(shards[start:start + ulysses_size]), dim)
                       for start in range(0, len(shards), ulysses_size)]
        return unshard_sequence(ring_shards, layout=layout, zigzag=zigzag)
    world_size = len(shards)
    if not zigzag:
        return torch.cat(list(shards), dim)
    ordered = [None] * (2 * world_size)
    for rank, shard in enumerate(shards):
        first, second = shard.chunk(2, dim)
        low, high = _chunks_of_rank(rank, world_size, True)
        ordered[low], ordered[high] = first, second
    return torch.cat(ordered, dim)


def _check_ulysses_size(ulysses_size, world_size):
    if not isinstance(ulysses_size, int) or ulysses_size < 1 or world_size % ulysses_size:
        raise invalid_argument("ulysses_size", repr(ulysses_size),
                               f"expected a divisor of the group size {world_size}")


# --- the local kernels ----------------------------------------------------------------------

class QuantizedKV(NamedTuple):
    """One K/V chunk as it travels the ring: quantized by its owner."""

    k: torch.Tensor  # int8, k's shape and layout
    k_scale: torch.Tensor  # float32 [B, H_kv, N]
    v: torch.Tensor  # int8 V layout (full INT8) or k's FP16/BF16 shape (half INT8)
    v_scale: Optional[torch.Tensor]  # full INT8 only


class SequenceStatistics(NamedTuple):
    """One rank's part of what ``intfa.attention`` computes over the whole sequence before it
    quantizes: reduced over the ranks as REDUCTIONS says (summed, or maximised), every rank has
    the sequence's."""

    # K's rows at the sequence's sample positions (intfa._intfa.k_channel_mean_sample_rows, in
    # that order), [B, H_kv, samples, D] in K's dtype: this rank's rows, zeros for the others'
    # (a sum of one row and zeros is that row, bit for bit). None without K smoothing and without
    # automatic rotation (whose decisions are made from the same rows).
    k_samples: Optional[torch.Tensor]
    # V's per-tensor or per-channel scales of this rank's shard (float32); their maximum is the
    # whole sequence's. None for half INT8 and for per-block V scales (each block's own).
    v_scales: Optional[torch.Tensor]


# How each field of SequenceStatistics is reduced over the ranks.
REDUCTIONS = {"k_samples": "sum", "v_scales": "max"}


class SequenceQuantization(NamedTuple):
    """What every shard is quantized with: the whole sequence's K means (float32 [B, H_kv, D],
    None without smoothing) and V scales (None as in SequenceStatistics), and with automatic
    rotation its heads' decisions (int32 [B, H_kv], else None): those one call over the whole
    sequence makes, so every rank rotates the same heads."""

    k_mean: Optional[torch.Tensor]
    v_scales: Optional[torch.Tensor]
    rotated_heads: Optional[torch.Tensor] = None


def _local_rows(rows, rank, world_size, shard_length, zigzag):
    """The indices in `rank`'s shard of those global `rows` it holds, as (positions in `rows`,
    indices in the shard): shards as ``shard_sequence`` cuts them."""
    held, local = [], []
    chunk = shard_length // 2 if zigzag else shard_length
    chunks = _chunks_of_rank(rank, world_size, zigzag)
    for position, row in enumerate(rows):
        if row // chunk in chunks:
            held.append(position)
            local.append(chunks.index(row // chunk) * chunk + row % chunk)
    return held, local


class IntfaKernels:
    """intfa as the local kernel: each chunk quantized with the whole sequence's K means and V
    scales (``statistics``, reduced over the ranks, then ``quantization``), ``intfa.attention_int8``
    with its LSE per (Q chunk, K/V chunk) pair, ``intfa.merge_states`` in place; ``attention``
    (Ulysses) is ``intfa.attention``."""

    def __init__(self, *, layout="HND", variant=None, sm_scale=None, smooth_k=None,
                 v_granularity=None, rotate=None):
        _check_layout(layout)
        # Checked here, before any rank communicates (None, and only None, is the default).
        self.layout, self.variant, self.sm_scale = layout, option("variant", variant), sm_scale
        # This call's variant: "auto" resolved as intfa.attention over the whole sequence
        # resolves it (statistics, the first step of every call, sets it).
        self.call_variant = "full_int8" if self.variant == "auto" else self.variant
        self.smooth_k = option("smooth_k", smooth_k)
        self.rotate = option("rotate", rotate)
        self.v_granularity = option("v_granularity", v_granularity)

    def _full(self):
        return self.call_variant == "full_int8"

    def statistics(self, q, k, v, rank, world_size, zigzag):
        """This rank's SequenceStatistics, from its K and V shards (``shard_sequence``'s, zig-zag
        or not). The shards are checked here, before any rank communicates. With variant "auto"
        it also chooses this call's variant, as intfa.attention over the whole sequence (every
        rank's shards together; zig-zag shards are causal) would."""
        if self.variant == "auto":
            _, _, n_q, head_dim = _as_bhnd(q, self.layout).shape
            n_kv = _as_bhnd(k, self.layout).shape[2]
            self.call_variant = _checks.resolve_variant("auto", q.device, head_dim,
                                                        n_q * world_size, n_kv * world_size, zigzag)
        _attention_checks.check_quantize(q, k, v if self._full() else None, self.layout,
                                         self.v_granularity, self.smooth_k, self.rotate == "on")
        k_samples = v_scales = None
        with on(k.device):
            if self.smooth_k or self.rotate == "auto":
                k_bhnd = _as_bhnd(k, self.layout)
                shard_length = k_bhnd.shape[2]
                rows = _intfa.k_channel_mean_sample_rows(shard_length * world_size)
                held, local = _local_rows(rows, rank, world_size, shard_length, zigzag)
                b, h, _, d = k_bhnd.shape
                k_samples = torch.zeros((b, h, len(rows), d), dtype=k.dtype, device=k.device)
                index = torch.tensor(local, dtype=torch.long, device=k.device)
                k_samples[:, :, held] = k_bhnd.index_select(2, index)
            if self._full() and self.v_granularity != "block":
                v_scales = _ops.launch_v_scales(v, self.layout, self.v_granularity,
                                                stream(v.device))
        return SequenceStatistics(k_samples, v_scales)

    def quantization(self, statistics):
        """The SequenceQuantization of the whole sequence's (reduced) statistics."""
        k_mean = rotated_heads = None
        if statistics.k_samples is not None:
            with on(statistics.k_samples.device):
                k_mean, rotated_heads = _ops.launch_k_channel_means(
                    statistics.k_samples, stream(statistics.k_samples.device),
                    smoothed=self.smooth_k, rotated_heads=self.rotate == "auto")
        return SequenceQuantization(k_mean, statistics.v_scales, rotated_heads)

    def prepare(self, q, k, v, quantization):
        """A rank's own chunk: (what its Q needs at every step, the K/V chunk that travels)."""
        layout, rotate, k_mean = self.layout, self.rotate, quantization.k_mean
        decisions = quantization.rotated_heads  # automatic rotation: the sequence's
        with on(q.device):
            handle = stream(q.device)
            if k_mean is not None:
                k8, k_scale = _ops.launch_quantize_k_smoothed_by(k, layout, k_mean, handle, rotate,
                                                                 decisions)
            else:
                k8, k_scale, _ = _ops.launch_quantize_qk(k, layout, False, handle, rotate,
                                                         k_rotated_heads=decisions)
            q8, q_scale, q_dot_k_mean = _ops.launch_quantize_qk(q, layout, False, handle, rotate,
                                                                k_mean, decisions)
            if not self._full():
                v8, v_scale = v.contiguous(), None
            elif quantization.v_scales is not None:
                v_scale = quantization.v_scales
                v8 = _ops.launch_quantize_v_with_scales(v, layout, v_scale, handle)
            else:  # per-block scales: each block's own
                v8, v_scale = _ops.launch_quantize_v(v, layout, self.v_granularity, handle)
        q_state = (q8, q_scale, q_dot_k_mean if k_mean is not None else None, q.dtype)
        return q_state, QuantizedKV(k8, k_scale, v8, v_scale)

    def attend(self, q_state, kv, is_causal):
        q8, q_scale, q_dot_k_mean, out_dtype = q_state
        return intfa.attention_int8(q8, kv.k, kv.v, q_scale, kv.k_scale, kv.v_scale,
                                    is_causal=is_causal, sm_scale=self.sm_scale, layout=self.layout,
                                    out_dtype=out_dtype, return_lse=True, q_dot_k_mean=q_dot_k_mean)

    def merge(self, out, lse, part_out, part_lse):
        views = [_as_bhnd(x, self.layout) for x in (out, part_out)]
        intfa.merge_states(views[0], lse, views[1], part_lse, out=views[0], out_lse=lse)
        return out, lse

    def attention(self, q, k, v, is_causal):
        return intfa.attention(q, k, v, is_causal=is_causal, sm_scale=self.sm_scale,
                               layout=self.layout, variant=self.variant, smooth_k=self.smooth_k,
                               rotate=self.rotate, v_granularity=self.v_granularity,
                               return_lse=True)


class SdpaKernels:
    """Exact attention (``intfa._sdpa``: torch's SDPA, the LSE from float32 scores) and a merge in
    torch, on any device and float dtype: nothing is quantized, K and V travel as they are."""

    def __init__(self, *, layout="HND", sm_scale=None):
        _check_layout(layout)
        self.layout, self.sm_scale = layout, sm_scale

    def statistics(self, q, k, v, rank, world_size, zigzag):
        return None  # nothing is quantized

    def quantization(self, statistics):
        return None

    def prepare(self, q, k, v, quantization):
        return q, (k.contiguous(), v.contiguous())

    def attend(self, q, kv, is_causal):
        return self.attention(q, *kv, is_causal)

    def merge(self, out, lse, part_out, part_lse):
        return merge_exact(out, lse, part_out, part_lse, layout=self.layout)

    def attention(self, q, k, v, is_causal):
        return _sdpa.attention(q, k, v, None, 0.0, is_causal, self.sm_scale, self.layout, True,
                               None)


def merge_exact(out_a, lse_a, out_b, lse_b, *, layout="HND"):
    """What ``intfa.merge_states`` computes, in torch (float32 at least): the attention over the
    union of two key sets from each one's output and LSE ([B, H, N]; -inf: no key)."""
    lse = torch.logaddexp(lse_a, lse_b)
    # Both -inf: no key at all; the weights would be nan (exp(-inf - -inf)), the output is zero.
    safe_lse = torch.where(torch.isinf(lse), torch.zeros_like(lse), lse)
    compute = torch.promote_types(out_a.dtype, torch.float32)

    def weight(part_lse):
        w = torch.exp(part_lse - safe_lse).to(compute)
        return w.unsqueeze(-1) if layout == "HND" else w.transpose(1, 2).unsqueeze(-1)

    out = out_a.to(compute) * weight(lse_a) + out_b.to(compute) * weight(lse_b)
    return out.to(out_a.dtype), lse


def _as_bhnd(x, layout):
    return x if layout == "HND" else x.transpose(1, 2)


# --- ring attention -------------------------------------------------------------------------

class _RingRank:
    """One rank's side of the ring attention: its Q chunks and their partial (out, lse). ``attend``
    folds in the K/V shard of one step; the drivers (P2P or simulated) only move shards."""

    def __init__(self, q_states, rank, world_size, is_causal, kernels):
        self.q_states, self.rank, self.world_size = q_states, rank, world_size
        self.is_causal, self.kernels = is_causal, kernels
        self.partials = [None] * len(q_states)

    def attend(self, step, kv_shard):
        """Step `step`: the shard of rank (rank - step) mod world_size, one QuantizedKV (or the
        kernels' payload) per chunk it holds."""
        source = (self.rank - step) % self.world_size
        q_chunks = _chunks_of_rank(self.rank, self.world_size, self.is_causal)
        kv_chunks = _chunks_of_rank(source, self.world_size, self.is_causal)
        for slot, (q_chunk, q_state) in enumerate(zip(q_chunks, self.q_states)):
            for kv_chunk, kv in zip(kv_chunks, kv_shard):
                # Zig-zag chunks are equal, so a chunk sees an earlier one whole, itself causally
                # (square: intfa's bottom-right mask is the usual one) and a later one not at all.
                if self.is_causal and kv_chunk > q_chunk:
                    continue
                part = self.kernels.attend(q_state, kv, self.is_causal and kv_chunk == q_chunk)
                previous = self.partials[slot]
                self.partials[slot] = part if previous is None else self.kernels.merge(*previous,
                                                                                       *part)

    def result(self, layout):
        outs, lses = zip(*self.partials)
        return torch.cat(outs, _seq_dim(layout)), torch.cat(lses, 2)


def _prepare_shard(q, k, v, is_causal, kernels, statistics):
    """A rank's shard cut into its chunks (two for zig-zag), each prepared once with the whole
    sequence's `statistics` (reduced over the ranks): (Q states, K/V shard as a tuple of chunk
    payloads)."""
    quantization = kernels.quantization(statistics)
    dim = _seq_dim(kernels.layout)
    count = 2 if is_causal else 1
    pieces = [tuple(x.chunk(count, dim)) for x in (q, k, v)]
    prepared = [kernels.prepare(*chunk, quantization) for chunk in zip(*pieces)]
    return [q_state for q_state, _ in prepared], tuple(kv for _, kv in prepared)


_REDUCE_OPS = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX} if dist.is_available() else {}


def _sequence_statistics(q, k, v, group, rank, world_size, is_causal, kernels):
    """The whole sequence's statistics on every rank of `group`: each rank's, all-reduced."""
    statistics = kernels.statistics(q, k, v, rank, world_size, is_causal)
    if statistics is not None and world_size > 1:
        for name, op in REDUCTIONS.items():
            tensor = getattr(statistics, name)
            if tensor is not None:
                dist.all_reduce(tensor, op=_REDUCE_OPS[op], group=group)
    return statistics


def _reduced_in_process(statistics):
    """Every rank's statistics (a list in rank order) replaced by their reduction in place, as
    the all-reduce of ``_sequence_statistics`` leaves them."""
    if statistics[0] is None:
        return
    for name, op in REDUCTIONS.items():
        fields = [getattr(rank_statistics, name) for rank_statistics in statistics]
        if fields[0] is None:
            continue
        stacked = torch.stack(fields)
        reduced = stacked.sum(0) if op == "sum" else stacked.amax(0)
        for field in fields:
            field.copy_(reduced)


def _flatten(shard):
    return [tensor.contiguous() for chunk in shard for tensor in chunk if tensor is not None]


def _unflatten(template, tensors):
    """`tensors` in the structure of `template` (a tuple of chunk payloads, tuples or NamedTuples
    of tensors and Nones)."""
    tensors = iter(tensors)
    chunks = []
    for chunk in template:
        fields = [None if field is None else next(tensors) for field in chunk]
        chunks.append(type(chunk)(*fields) if hasattr(chunk, "_fields") else tuple(fields))
    return tuple(chunks)


_ALIGNMENT = 256  # bytes: each tensor of a packed shard starts as an allocation would


class _PackedShard:
    """A shard's tensors in one byte buffer, each at an aligned offset, and the shard (``chunks``)
    as views into it: what the ring sends, one message per step instead of one per tensor (a
    copy of the quantized shard, once, on the rank that made it)."""

    def __init__(self, shard, buffer=None):
        tensors = _flatten(shard)
        self.offsets, total = [], 0
        for tensor in tensors:
            self.offsets.append(total)
            total += -(-tensor.numel() * tensor.element_size() // _ALIGNMENT) * _ALIGNMENT
        self.buffer = buffer if buffer is not None else torch.empty(
            total, dtype=torch.uint8, device=tensors[0].device)
        views = [self.buffer[offset:offset + tensor.numel() * tensor.element_size()]
                 .view(tensor.dtype).view(tensor.shape)
                 for tensor, offset in zip(tensors, self.offsets)]
        if buffer is None:
            for view, tensor in zip(views, tensors):
                view.copy_(tensor)
        self.chunks = _unflatten(shard, views)

    def over(self, buffer):
        """The same shard layout over another buffer (one received from a rank)."""
        return _PackedShard(self.chunks, buffer)


class _P2PRing:
    """Passes a shard (a _PackedShard) to the next rank and receives one from the previous, with
    batch_isend_irecv: ``start`` posts both and returns at once, ``wait`` gives the shard."""

    def __init__(self, group):
        group = group if group is not None else dist.group.WORLD
        rank, world_size = dist.get_rank(group), dist.get_world_size(group)
        self.group = group
        self.next_rank = dist.get_global_rank(group, (rank + 1) % world_size)
        self.previous_rank = dist.get_global_rank(group, (rank - 1) % world_size)

    def start(self, packed):
        received = torch.empty_like(packed.buffer)
        works = dist.batch_isend_irecv([
            dist.P2POp(dist.isend, packed.buffer, self.next_rank, self.group),
            dist.P2POp(dist.irecv, received, self.previous_rank, self.group)])
        return _Transfer(works, packed, received)


class _Transfer:
    def __init__(self, works, sent, received):
        # `sent` is held until the transfer completes: the send may still read its buffer.
        self.works, self.sent, self.received = works, sent, received

    def wait(self):
        for work in self.works:
            work.wait()
        return self.sent.over(self.received)


def _check_shards(q, k, v, is_causal, layout):
    _check_layout(layout)
    for name, tensor in (("q", q), ("k", k), ("v", v)):
        if not isinstance(tensor, torch.Tensor):
            raise invalid_argument(name, type(tensor).__name__, "expected a torch.Tensor")
        if tensor.dim() != 4:
            raise invalid_argument(f"{name}.shape", tuple(tensor.shape),
                                   "expected 4 dimensions [B, H, N, D] or [B, N, H, D]")
    if not isinstance(is_causal, bool):
        raise invalid_argument("is_causal", repr(is_causal), "expected True or False")
    if tuple(v.shape) != tuple(k.shape):
        raise invalid_argument("v.shape", tuple(v.shape), f"expected {tuple(k.shape)} as k")
    dim = _seq_dim(layout)
    if is_causal:
        if k.shape[dim] != q.shape[dim]:
            raise invalid_argument("k.shape", tuple(k.shape),
                                   f"expected as many tokens as q {tuple(q.shape)} (causal "
                                   "shards hold the same positions of Q and K)")
        if q.shape[dim] % 2:
            raise invalid_argument("q.shape", tuple(q.shape),
                                   "expected an even shard length: two zig-zag chunks per rank")


def _resolve_kernels(kernels, layout, options):
    if kernels is None:
        return IntfaKernels(layout=layout, **options)
    if getattr(kernels, "layout", None) != layout:
        raise invalid_argument("kernels.layout", repr(getattr(kernels, "layout", None)),
                               f"expected {layout!r}, the layout argument")
    if any(value is not None for value in options.values()):
        raise invalid_argument("kernels", type(kernels).__name__,
                               "expected None when variant, sm_scale, smooth_k, rotate or "
                               "v_granularity is given: the kernels carry their own options")
    return kernels


def ring_attention(q, k, v, group=None, is_causal=False, *, layout="HND", variant=None,
                   sm_scale=None, smooth_k=None, v_granularity=None, rotate=None, return_lse=False,
                   kernels=None):
    """Attention of this rank's Q shard over the K/V shards of every rank of ``group`` (default:
    the whole world), by ring. ``q``, ``k``, ``v``: this rank's shards, FP16/BF16, [B, H, n, D]
    ("HND") or [B, n, H, D] ("NHD"), GQA as ``intfa.attention``; every rank's K/V shards the same
    shape. Causal: zig-zag shards (``shard_sequence(..., zigzag=True)``), Q and K of the same
    positions; otherwise any split. Returns this rank's output (and with ``return_lse`` its LSE,
    float32 [B, H, n]), as ``intfa.attention`` over the whole sequence would give for these rows.
    ``variant`` ("auto", the default, chooses as ``intfa.attention`` over the whole sequence
    would), ``sm_scale``, ``smooth_k``, ``rotate`` and
    ``v_granularity`` as in ``intfa.attention``, which the shards then quantize as (K smoothing's
    means and V's scales are the whole sequence's when the shards are ``shard_sequence``'s; the
    rows of another split of a non-causal sequence give other means, and the same attention);
    ``kernels`` replaces the local kernels (``SdpaKernels``, say). K is quantized per token:
    ``intfa.attention``'s ``k_granularity`` is not an option here."""
    _check_shards(q, k, v, is_causal, layout)
    kernels = _resolve_kernels(kernels, layout, dict(variant=variant, sm_scale=sm_scale,
                                                     smooth_k=smooth_k, rotate=rotate,
                                                     v_granularity=v_granularity))
    rank, world_size = dist.get_rank(group), dist.get_world_size(group)
    statistics = _sequence_statistics(q, k, v, group, rank, world_size, is_causal, kernels)
    q_states, shard = _prepare_shard(q, k, v, is_causal, kernels, statistics)
    ring_rank = _RingRank(q_states, rank, world_size, is_causal, kernels)
    ring = _P2PRing(group) if world_size > 1 else None
    packed = _PackedShard(shard) if ring is not None else None
    for step in range(world_size):
        # The next shard's transfer is posted before this one's attention: the two overlap.
        transfer = ring.start(packed) if step + 1 < world_size else None
        ring_rank.attend(step, shard)
        if transfer is not None:
            packed = transfer.wait()
            shard = packed.chunks
    out, lse = ring_rank.result(layout)
    return (out, lse) if return_lse else out


def simulate_ring_attention(q_shards, k_shards, v_shards, is_causal=False, *, layout="HND",
                            kernels=None, **options):
    """``ring_attention`` of every rank in one process: the shards given as lists in rank order,
    each K/V shard prepared once and copied from rank to rank each step as the ring would send it.
    Returns the list of every rank's (out, lse)."""
    world_size = len(q_shards)
    for name, shards in (("k_shards", k_shards), ("v_shards", v_shards)):
        if len(shards) != world_size:
            raise invalid_argument(f"{name}.length", len(shards),
                                   f"expected {world_size}, as many shards as q_shards")
    for q, k, v in zip(q_shards, k_shards, v_shards):
        _check_shards(q, k, v, is_causal, layout)
    kernels = _resolve_kernels(kernels, layout, options)
    statistics = [kernels.statistics(q, k, v, rank, world_size, is_causal)
                  for rank, (q, k, v) in enumerate(zip(q_shards, k_shards, v_shards))]
    _reduced_in_process(statistics)
    prepared = [_prepare_shard(q, k, v, is_causal, kernels, rank_statistics)
                for q, k, v, rank_statistics in zip(q_shards, k_shards, v_shards, statistics)]
    ranks = [_RingRank(q_states, rank, world_size, is_causal, kernels)
             for rank, (q_states, _) in enumerate(prepared)]
    held = [_PackedShard(shard) for _, shard in prepared]
    for step in range(world_size):
        for ring_rank, packed in zip(ranks, held):
            ring_rank.attend(step, packed.chunks)
        # What each rank sends, copied as over the wire; rank r receives rank r - 1's.
        sent = [packed.over(packed.buffer.clone()) for packed in held]
        held = [sent[(rank - 1) % world_size] for rank in range(world_size)]
    return [ring_rank.result(layout) for ring_rank in ranks]


# --- Ulysses (all-to-all) attention ---------------------------------------------------------

def _split_for_all_to_all(x, split_dim, world_size):
    """[..., S, ...] -> [world_size, ..., S / world_size, ...]: piece w goes to rank w."""
    return x.unflatten(split_dim, (world_size, -1)).movedim(split_dim, 0).contiguous()


def _join_after_all_to_all(received, gather_dim):
    """[world_size, ...] from every rank -> the pieces concatenated along `gather_dim`, in rank
    order."""
    return received.movedim(0, gather_dim).flatten(gather_dim, gather_dim + 1)


def _all_to_all(x, split_dim, gather_dim, group, world_size):
    send = _split_for_all_to_all(x, split_dim, world_size)
    received = torch.empty_like(send)
    dist.all_to_all_single(received, send, group=group)
    return _join_after_all_to_all(received, gather_dim)


def _check_heads(q, k, layout, world_size):
    heads = _head_dim_index(layout)
    for name, tensor in (("q", q), ("k", k)):
        if tensor.shape[heads] % world_size:
            raise invalid_argument(f"{name}.shape", tuple(tensor.shape),
                                   f"expected a number of heads (dim {heads}) divisible by the "
                                   f"group size {world_size}")


def ulysses_attention(q, k, v, group=None, is_causal=False, *, layout="HND", variant=None,
                      sm_scale=None, smooth_k=None, v_granularity=None, rotate=None,
                      return_lse=False, kernels=None):
    """Attention of this rank's sequence shard by all-to-all head parallelism: each rank attends
    H / world_size heads over the whole sequence. Shards contiguous in rank order (causal masks
    need the positions in order), every rank's the same shape; H_q and H_kv divisible by the
    group size. Arguments and result as ``ring_attention``."""
    _check_shards(q, k, v, False, layout)
    if not isinstance(is_causal, bool):
        raise invalid_argument("is_causal", repr(is_causal), "expected True or False")
    kernels = _resolve_kernels(kernels, layout, dict(variant=variant, sm_scale=sm_scale,
                                                     smooth_k=smooth_k, rotate=rotate,
                                                     v_granularity=v_granularity))
    world_size = dist.get_world_size(group)
    _check_heads(q, k, layout, world_size)
    seq, heads = _seq_dim(layout), _head_dim_index(layout)
    q, k, v = (_all_to_all(x, heads, seq, group, world_size) for x in (q, k, v))
    out, lse = kernels.attention(q, k, v, is_causal)
    out = _all_to_all(out, seq, heads, group, world_size)
    if not return_lse:
        return out
    return out, _all_to_all(lse, 2, 1, group, world_size)


def simulate_ulysses_attention(q_shards, k_shards, v_shards, is_causal=False, *, layout="HND",
                               kernels=None, **options):
    """``ulysses_attention`` of every rank in one process (the all-to-alls done on lists);
    returns the list of every rank's (out, lse)."""
    world_size = len(q_shards)
    for q, k, v in zip(q_shards, k_shards, v_shards):
        _check_shards(q, k, v, False, layout)
        _check_heads(q, k, layout, world_size)
    kernels = _resolve_kernels(kernels, layout, options)
    seq, heads = _seq_dim(layout), _head_dim_index(layout)

    def all_to_all(tensors, split_dim, gather_dim):
        sent = [_split_for_all_to_all(x, split_dim, world_size) for x in tensors]
        received = [torch.stack([sent[source][rank] for source in range(world_size)])
                    for rank in range(world_size)]
        return [_join_after_all_to_all(x, gather_dim) for x in received]

    q_heads, k_heads, v_heads = (all_to_all(x, heads, seq) for x in (q_shards, k_shards, v_shards))
    results = [kernels.attention(q, k, v, is_causal) for q, k, v in zip(q_heads, k_heads, v_heads)]
    outs = all_to_all([out for out, _ in results], seq, heads)
    lses = all_to_all([lse for _, lse in results], 2, 1)
    return list(zip(outs, lses))


# --- Ulysses within groups of ranks, ring across them (USP) -------------------------------------

def usp_attention(q, k, v, ulysses_group, ring_group, is_causal=False, *, layout="HND",
                  variant=None, sm_scale=None, smooth_k=None, v_granularity=None, rotate=None,
                  return_lse=False, kernels=None):
    """Unified sequence parallelism (Fang and Zhao, arXiv:2405.07719): an all-to-all within
    ``ulysses_group`` (U ranks) turns their sequence shards into head shards of their ring shard,
    ``ring_attention`` over ``ring_group`` (R ranks, the same Ulysses rank of every group) attends
    those H / U heads over the whole sequence, and an all-to-all turns the output back. Shards as
    ``shard_sequence(x, rank, U * R, zigzag=is_causal, ulysses_size=U)`` cuts them, rank = ring
    rank * U + Ulysses rank (diffusers' and ``torch.distributed.device_mesh``'s order for a
    ("ring", "ulysses") mesh); H_q and H_kv divisible by U. Arguments and result as
    ``ring_attention``; the ring's numerics are one call's, as there."""
    _check_shards(q, k, v, False, layout)
    if not isinstance(is_causal, bool):
        raise invalid_argument("is_causal", repr(is_causal), "expected True or False")
    options = dict(variant=variant, sm_scale=sm_scale, smooth_k=smooth_k, rotate=rotate,
                   v_granularity=v_granularity)
    kernels = _resolve_kernels(kernels, layout, options)
    ulysses_size = dist.get_world_size(ulysses_group)
    _check_heads(q, k, layout, ulysses_size)
    seq, heads = _seq_dim(layout), _head_dim_index(layout)
    q, k, v = (_all_to_all(x, heads, seq, ulysses_group, ulysses_size) for x in (q, k, v))
    out, lse = ring_attention(q, k, v, ring_group, is_causal, layout=layout, return_lse=True,
                              kernels=kernels)
    out = _all_to_all(out, seq, heads, ulysses_group, ulysses_size)
    if not return_lse:
        return out
    return out, _all_to_all(lse, 2, 1, ulysses_group, ulysses_size)


# From this many tokens per rank on, the ring alone: it hides its transfer behind each step's
# attention and has no all-to-all to wait for. On 2 H200s (bench/history/2026-11-29.md, issue 48):
# ring / Ulysses 1.98x / 1.94x one GPU at 512k causal, 2.00x / 1.98x non-causal (256k per rank);
# 1.91x / 1.86x at 128k causal but 1.84x / 1.92x non-causal, 1.40x / 1.58x at 32k causal.
RING_SHARD_TOKENS = 1 << 18


def choose_ulysses_size(heads_q, heads_kv, world_size, ranks_per_node=None, shard_tokens=0):
    """The Ulysses degree ``context_parallel_attention`` takes by default: the largest divisor of
    world_size that divides both head counts and fits one node (``ranks_per_node``, default
    LOCAL_WORLD_SIZE as torchrun sets it, else this machine's GPU count): all-to-alls within a
    node, the ring's neighbour-to-neighbour transfers across nodes; 1 (the ring alone) when each
    rank holds ``shard_tokens`` >= RING_SHARD_TOKENS tokens."""
    if shard_tokens >= RING_SHARD_TOKENS:
        return 1
    if ranks_per_node is None:
        ranks_per_node = int(os.environ.get("LOCAL_WORLD_SIZE", 0)) or torch.cuda.device_count()
    return max(size for size in range(1, world_size + 1)
               if world_size % size == 0 and heads_q % size == 0 and heads_kv % size == 0
               and size <= max(ranks_per_node, 1))


_MESHES = {}


def _groups_of(where, ulysses_size, device_type):
    """(Ulysses group, ring group) of this rank: a 2-D DeviceMesh's ("ring", "ulysses") groups,
    or for a 1-D mesh, a group or None (the default group, which must then be the whole world)
    a ("ring", "ulysses") mesh over the world, made once per size (every rank makes it)."""
    if DeviceMesh is not None and isinstance(where, DeviceMesh):
        if where.ndim == 2:
            return where.get_group("ulysses"), where.get_group("ring")
        where = where.get_group()
    world_size = dist.get_world_size(where)
    if ulysses_size in (1, world_size):  # one kind only: the group itself
        return where, where
    if world_size != dist.get_world_size():
        raise invalid_argument("group", "a subgroup",
                               "expected the default group or a ('ring', 'ulysses') device mesh "
                               "for Ulysses and ring together")
    # The default group's identity too: a mesh of a destroyed process group is not reused.
    key = (id(dist.group.WORLD), world_size, ulysses_size, device_type)
    if key not in _MESHES:
        _MESHES[key] = init_device_mesh(device_type, (world_size // ulysses_size, ulysses_size),
                                        mesh_dim_names=("ring", "ulysses"))
    mesh = _MESHES[key]
    return mesh.get_group("ulysses"), mesh.get_group("ring")


def context_parallel_attention(q, k, v, group=None, is_causal=False, *, ulysses_size=None,
                               layout="HND", variant=None, sm_scale=None, smooth_k=None,
                               v_granularity=None, rotate=None, return_lse=False, kernels=None):
    """Attention of this rank's shard by Ulysses, ring or both over ``group``: a process group
    (None: the default group), a 1-D ``DeviceMesh``, or a 2-D one with dims ("ring", "ulysses")
    (which fixes the sizes, as diffusers' context-parallel config makes it). ``ulysses_size``
    (default ``choose_ulysses_size``: as much Ulysses as the heads and one node allow, the ring
    alone for shards of RING_SHARD_TOKENS and more) of the group size U: U = the group size is
    ``ulysses_attention``, U = 1 ``ring_attention``, else ``usp_attention``. The size decides the
    shards, so a caller that leaves it to the default shards with ``choose_ulysses_size``'s. Shards: ``shard_sequence(x, rank, world_size, zigzag=is_causal,
    ulysses_size=U)``. Other arguments and the result as ``ring_attention``."""
    _check_layout(layout)
    if DeviceMesh is not None and isinstance(group, DeviceMesh) and group.ndim == 2:
        if sorted(group.mesh_dim_names or ()) != ["ring", "ulysses"]:
            raise invalid_argument("group.mesh_dim_names", repr(group.mesh_dim_names),
                                   "expected ('ring', 'ulysses') for a 2-D mesh")
        mesh_size = group.size(group.mesh_dim_names.index("ulysses"))
        if ulysses_size not in (None, mesh_size):
            raise invalid_argument("ulysses_size", repr(ulysses_size),
                                   f"expected None or {mesh_size}, the mesh's 'ulysses' size")
        ulysses_size, world_size = mesh_size, group.size()
    else:
        process_group = group.get_group() if DeviceMesh is not None and isinstance(
            group, DeviceMesh) else group
        world_size = dist.get_world_size(process_group)
    if ulysses_size is None:
        heads = _head_dim_index(layout)
        ulysses_size = choose_ulysses_size(q.shape[heads], k.shape[heads], world_size,
                                           shard_tokens=q.shape[_seq_dim(layout)])
    _check_ulysses_size(ulysses_size, world_size)
    ulysses_group, ring_group = _groups_of(group, ulysses_size, q.device.type)
    arguments = dict(layout=layout, variant=variant, sm_scale=sm_scale, smooth_k=smooth_k,
                     v_granularity=v_granularity, rotate=rotate, return_lse=return_lse,
                     kernels=kernels)
    if ulysses_size == world_size:
        return ulysses_attention(q, k, v, ulysses_group, is_causal, **arguments)
    if ulysses_size == 1:
        return ring_attention(q, k, v, ring_group, is_causal, **arguments)
    return usp_attention(q, k, v, ulysses_group, ring_group, is_causal, **arguments)
