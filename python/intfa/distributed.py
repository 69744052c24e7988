"""Context parallelism: one attention over a sequence sharded across the ranks of a
torch.distributed group, with intfa as each rank's local kernel (issue 29).

``ring_attention``: every rank keeps its Q shard; the K/V shards travel around the ring
(``batch_isend_irecv``, the transfer of the next shard posted before this shard's attention so that
the two overlap), and each rank merges its partial outputs by their LSE. K and V are quantized once,
on the rank that owns them: the INT8 shards and their scales are what travel (half the bytes of
FP16). Causal attention uses the zig-zag split for balance: the sequence cut into 2 * world_size
equal chunks, rank r holding chunks r and 2 * world_size - 1 - r, concatenated in that order
(``shard_sequence(x, rank, world_size, zigzag=True)``).

``ulysses_attention``: all-to-all from sequence shards to head shards, one local
``intfa.attention`` over the whole sequence, all-to-all back. Shards are contiguous in rank order
(``shard_sequence(x, rank, world_size)``); the head counts must be divisible by the group size.

The per-step work is separate from the communication, so that ``simulate_ring_attention`` and
``simulate_ulysses_attention`` run every rank's steps in one process, through the same code, over a
list of shards. The local attention and merge are a ``kernels`` object: ``IntfaKernels`` (the
default) or ``SdpaKernels`` (exact, any device and dtype: the reference the tests inject).
"""
from typing import NamedTuple, Optional

import torch
import torch.distributed as dist

import intfa
from intfa import _sdpa
from intfa._checks import option
from intfa._errors import invalid_argument

LAYOUTS = ("HND", "NHD")


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


def shard_sequence(x, rank, world_size, *, layout="HND", zigzag=False):
    """`rank`'s shard of a full sequence ``x`` ([B, H, N, D] for "HND", [B, N, H, D] for "NHD"; a
    [B, H, N] LSE as "HND"): the rank-th of world_size contiguous pieces, or with ``zigzag`` (what
    causal ``ring_attention`` expects) chunks rank and 2 * world_size - 1 - rank of 2 * world_size.
    A view when contiguous pieces, a copy for zig-zag."""
    _check_layout(layout)
    dim = _seq_dim(layout)
    pieces = 2 * world_size if zigzag else world_size
    if x.shape[dim] % pieces:
        raise invalid_argument("x.shape", tuple(x.shape),
                               f"expected a sequence length (dim {dim}) divisible by {pieces}")
    size = x.shape[dim] // pieces
    chunks = [x.narrow(dim, index * size, size)
              for index in _chunks_of_rank(rank, world_size, zigzag)]
    return chunks[0] if len(chunks) == 1 else torch.cat(chunks, dim)


def unshard_sequence(shards, *, layout="HND", zigzag=False):
    """The full sequence from every rank's shard (a list in rank order, as all_gather gives):
    the inverse of ``shard_sequence``."""
    _check_layout(layout)
    dim = _seq_dim(layout)
    world_size = len(shards)
    if not zigzag:
        return torch.cat(list(shards), dim)
    ordered = [None] * (2 * world_size)
    for rank, shard in enumerate(shards):
        first, second = shard.chunk(2, dim)
        low, high = _chunks_of_rank(rank, world_size, True)
        ordered[low], ordered[high] = first, second
    return torch.cat(ordered, dim)


# --- the local kernels ----------------------------------------------------------------------

class QuantizedKV(NamedTuple):
    """One K/V chunk as it travels the ring: quantized by its owner."""

    k: torch.Tensor  # int8, k's shape and layout
    k_scale: torch.Tensor  # float32 [B, H_kv, N]
    v: torch.Tensor  # int8 V layout (full INT8) or k's FP16/BF16 shape (half INT8)
    v_scale: Optional[torch.Tensor]  # full INT8 only
    # float32 [B, H_kv, D]: the channel mean K smoothing subtracted from this chunk (None without
    # smoothing); the receiver needs it for the LSE term q . k_mean.
    k_mean: Optional[torch.Tensor]


class IntfaKernels:
    """intfa as the local kernel: ``intfa.quantize`` per chunk, ``intfa.attention_int8`` with its
    LSE per (Q chunk, K/V chunk) pair, ``intfa.merge_states`` in place; ``attention`` (Ulysses) is
    ``intfa.attention``.

    K smoothing across shards: every K chunk is smoothed by its own channel mean, the one
    ``quantize`` computes on the owner, and that mean ([B, H_kv, D] float32: 1/N of the chunk's
    bytes) travels with the chunk. The receiver computes q . k_mean against the mean of the chunk
    it attends, so each partial LSE is that of the original scores and the merge is exact. One
    mean shared by all ranks (an all-reduce before quantizing) would need a quantize kernel that
    takes an external mean, and a chunk's own mean centres its keys at least as well as the
    sequence's."""

    def __init__(self, *, layout="HND", variant=None, sm_scale=None, smooth_k=None,
                 v_granularity=None):
        _check_layout(layout)
        # Checked here, before any rank communicates (None, and only None, is the default).
        self.layout, self.variant, self.sm_scale = layout, option("variant", variant), sm_scale
        self.smooth_k = option("smooth_k", smooth_k)
        self.v_granularity = option("v_granularity", v_granularity)

    def prepare(self, q, k, v):
        """A rank's own chunk: (what its Q needs at every step, the K/V chunk that travels)."""
        full = self.variant == "full_int8"
        quantized = intfa.quantize(q, k, v if full else None, layout=self.layout,
                                   smooth_k=self.smooth_k, v_granularity=self.v_granularity)
        k_mean = quantized.k_mean
        if k_mean is not None:  # [B, H_kv, 1, D] or [B, 1, H_kv, D] -> [B, H_kv, D]
            k_mean = k_mean.squeeze(_seq_dim(self.layout))
        kv = QuantizedKV(quantized.k, quantized.k_scale, quantized.v if full else v.contiguous(),
                         quantized.v_scale, k_mean)
        return (quantized.q, quantized.q_scale, q), kv

    def attend(self, q_state, kv, is_causal):
        q8, q_scale, q = q_state
        q_dot_k_mean = None if kv.k_mean is None else _q_dot_k_mean(q, kv.k_mean, self.layout)
        return intfa.attention_int8(q8, kv.k, kv.v, q_scale, kv.k_scale, kv.v_scale,
                                    is_causal=is_causal, sm_scale=self.sm_scale, layout=self.layout,
                                    out_dtype=q.dtype, return_lse=True, q_dot_k_mean=q_dot_k_mean)

    def merge(self, out, lse, part_out, part_lse):
        views = [_as_bhnd(x, self.layout) for x in (out, part_out)]
        intfa.merge_states(views[0], lse, views[1], part_lse, out=views[0], out_lse=lse)
        return out, lse

    def attention(self, q, k, v, is_causal):
        return intfa.attention(q, k, v, is_causal=is_causal, sm_scale=self.sm_scale,
                               layout=self.layout, variant=self.variant, smooth_k=self.smooth_k,
                               v_granularity=self.v_granularity, return_lse=True)


class SdpaKernels:
    """Exact attention (``intfa._sdpa``: torch's SDPA, the LSE from float32 scores) and a merge in
    torch, on any device and float dtype: nothing is quantized, K and V travel as they are."""

    def __init__(self, *, layout="HND", sm_scale=None):
        _check_layout(layout)
        self.layout, self.sm_scale = layout, sm_scale

    def prepare(self, q, k, v):
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


def _q_dot_k_mean(q, k_mean, layout):
    """float32 [B, H_q, N]: each query row . the K channel mean of its KV head ([B, H_kv, D]),
    the term K smoothing took out of the scores (the kernel adds sm_scale times it to the LSE)."""
    q = _as_bhnd(q, layout)
    heads_kv = k_mean.shape[1]
    grouped = q.unflatten(1, (heads_kv, q.shape[1] // heads_kv)).float()  # [B, H_kv, G, N, D]
    return torch.matmul(grouped, k_mean[:, :, None, :, None]).squeeze(-1).flatten(1, 2).contiguous()


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


def _prepare_shard(q, k, v, world_size, is_causal, kernels):
    """A rank's shard cut into its chunks (two for zig-zag), each prepared once: (Q states, K/V
    shard as a tuple of chunk payloads)."""
    dim = _seq_dim(kernels.layout)
    count = 2 if is_causal else 1
    pieces = [tuple(x.chunk(count, dim)) for x in (q, k, v)]
    prepared = [kernels.prepare(*chunk) for chunk in zip(*pieces)]
    return [q_state for q_state, _ in prepared], tuple(kv for _, kv in prepared)


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


class _P2PRing:
    """Passes a shard to the next rank and receives one from the previous, with
    batch_isend_irecv: ``start`` posts both and returns at once, ``wait`` gives the shard."""

    def __init__(self, group):
        group = group if group is not None else dist.group.WORLD
        rank, world_size = dist.get_rank(group), dist.get_world_size(group)
        self.group = group
        self.next_rank = dist.get_global_rank(group, (rank + 1) % world_size)
        self.previous_rank = dist.get_global_rank(group, (rank - 1) % world_size)

    def start(self, shard):
        sent = _flatten(shard)
        received = [torch.empty_like(tensor) for tensor in sent]
        operations = ([dist.P2POp(dist.isend, tensor, self.next_rank, self.group)
                       for tensor in sent] +
                      [dist.P2POp(dist.irecv, tensor, self.previous_rank, self.group)
                       for tensor in received])
        works = dist.batch_isend_irecv(operations)
        return _Transfer(works, shard, received, sent)


class _Transfer:
    def __init__(self, works, template, received, sent):
        # `sent` is held until the transfer completes: the send may still read those tensors.
        self.works, self.template, self.received, self.sent = works, template, received, sent

    def wait(self):
        for work in self.works:
            work.wait()
        return _unflatten(self.template, self.received)


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
                               "expected None when variant, sm_scale, smooth_k or v_granularity "
                               "is given: the kernels carry their own options")
    return kernels


def ring_attention(q, k, v, group=None, is_causal=False, *, layout="HND", variant=None,
                   sm_scale=None, smooth_k=None, v_granularity=None, return_lse=False,
                   kernels=None):
    """Attention of this rank's Q shard over the K/V shards of every rank of ``group`` (default:
    the whole world), by ring. ``q``, ``k``, ``v``: this rank's shards, FP16/BF16, [B, H, n, D]
    ("HND") or [B, n, H, D] ("NHD"), GQA as ``intfa.attention``; every rank's K/V shards the same
    shape. Causal: zig-zag shards (``shard_sequence(..., zigzag=True)``), Q and K of the same
    positions; otherwise any split. Returns this rank's output (and with ``return_lse`` its LSE,
    float32 [B, H, n]), as ``intfa.attention`` over the whole sequence would give for these rows.
    ``variant`` "full_int8" (default) or "half_int8", ``sm_scale``, ``smooth_k`` and
    ``v_granularity`` as in ``intfa.attention``; ``kernels`` replaces the local kernels
    (``SdpaKernels``, say). Each shard is quantized with one scale per token and unrotated:
    ``intfa.attention``'s ``k_granularity`` and ``rotate`` are not options here."""
    _check_shards(q, k, v, is_causal, layout)
    kernels = _resolve_kernels(kernels, layout, dict(variant=variant, sm_scale=sm_scale,
                                                     smooth_k=smooth_k,
                                                     v_granularity=v_granularity))
    rank, world_size = dist.get_rank(group), dist.get_world_size(group)
    q_states, shard = _prepare_shard(q, k, v, world_size, is_causal, kernels)
    ring_rank = _RingRank(q_states, rank, world_size, is_causal, kernels)
    ring = _P2PRing(group) if world_size > 1 else None
    for step in range(world_size):
        # The next shard's transfer is posted before this one's attention: the two overlap.
        transfer = ring.start(shard) if step + 1 < world_size else None
        ring_rank.attend(step, shard)
        if transfer is not None:
            shard = transfer.wait()
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
    prepared = [_prepare_shard(q, k, v, world_size, is_causal, kernels)
                for q, k, v in zip(q_shards, k_shards, v_shards)]
    ranks = [_RingRank(q_states, rank, world_size, is_causal, kernels)
             for rank, (q_states, _) in enumerate(prepared)]
    held = [shard for _, shard in prepared]
    for step in range(world_size):
        for ring_rank, shard in zip(ranks, held):
            ring_rank.attend(step, shard)
        # What each rank sends, copied as over the wire; rank r receives rank r - 1's.
        sent = [_unflatten(shard, [t.clone() for t in _flatten(shard)]) for shard in held]
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
                      sm_scale=None, smooth_k=None, v_granularity=None, return_lse=False,
                      kernels=None):
    """Attention of this rank's sequence shard by all-to-all head parallelism: each rank attends
    H / world_size heads over the whole sequence. Shards contiguous in rank order (causal masks
    need the positions in order), every rank's the same shape; H_q and H_kv divisible by the
    group size. Arguments and result as ``ring_attention``."""
    _check_shards(q, k, v, False, layout)
    if not isinstance(is_causal, bool):
        raise invalid_argument("is_causal", repr(is_causal), "expected True or False")
    kernels = _resolve_kernels(kernels, layout, dict(variant=variant, sm_scale=sm_scale,
                                                     smooth_k=smooth_k,
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
