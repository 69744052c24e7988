"""intfa's paged INT8/INT4 KV cache on torch tensors, in vLLM's and FlashInfer's shapes.

    cache = intfa.PagedKVCache(num_pages=4096, page_size=16, num_kv_heads=8, head_dim=128,
                               bits=8, device="cuda")
    cache.append(k, v, slot_mapping)          # k, v [num_tokens, num_kv_heads, head_dim]
    out = cache.decode(q, block_table, seq_lens)             # q [batch, num_qo_heads, head_dim]
    out, lse = cache.decode(q4, block_table, seq_lens, causal=True, return_lse=True)
                                                             # q4 [batch, q_len, heads, head_dim]
    out = cache.prefill(q, query_start_loc, block_table, seq_lens, max_q_len=max_q_len)
                                                     # q [total_q, num_qo_heads, head_dim] packed
    out, lse = intfa.merge_states(out_a, lse_a, out_b, lse_b)

or the functions ``paged_append``, ``paged_decode`` and ``paged_prefill`` on the cache's tensors (``paged_layout``
gives their shapes). Slots are ``page * page_size + position`` (vLLM's slot mapping; a negative
slot is a padding token, skipped), the block table int32 ``[batch, max_pages]`` of page ids and
the sequence lengths int32 ``[batch]``, all on the device and never read on the host: a decode
step can be captured in a CUDA graph and replayed with new lengths. Each function checks its
arguments first (InvalidArgument naming the argument) and runs as a torch.library custom op (with
a fake implementation for torch.compile); plain eager calls skip the dispatcher, as intfa.attention
does. Layout and numerics: templates/decode/README.md.
"""
from typing import List, Optional, Tuple

import torch

from intfa import _checks, _intfa
from intfa._attention_checks import check_device
from intfa._errors import InvalidArgument, invalid_argument
from intfa._paged_layout import (CACHE_ARGUMENTS, HEAD_DIMS, layout_shapes, paged_layout,
                                 renamed)
# (intfa._ops's custom-op wrapper: called in plain eager mode it runs the function directly)
from intfa._ops import custom_op as _op

_FLOAT_NAMES = {torch.float16: "f16", torch.bfloat16: "bf16"}
_FLOAT_DTYPES = tuple(_FLOAT_NAMES)
_INDEX_DTYPES = (torch.int32, torch.int64)
_MAX_QUERIES = 64
_MAX_SPLITS = 64
# The C++ problem members and the Python arguments they come from.
_DECODE_ARGUMENTS = dict(CACHE_ARGUMENTS, **{
    "problem.batch": "q.shape",
    "problem.q_len": "q.shape",
    "problem.heads_q": "q.shape",
    "problem.max_pages": "block_table.shape",
    "problem.max_seq_len": "max_seq_len",
    "options.num_splits": "num_splits",
    "options.softmax_scale": "sm_scale",
})
_PREFILL_ARGUMENTS = dict(CACHE_ARGUMENTS, **{
    "problem.batch": "query_start_loc.shape",
    "problem.heads_q": "q.shape",
    "problem.total_q": "q.shape",
    "problem.max_q_len": "max_q_len",
    "problem.max_pages": "block_table.shape",
    "problem.max_seq_len": "max_seq_len",
    "problem.kv_tokens": "kv_tokens",
    "tensors.q.strides": "q.stride",
    "tensors.q.data": "q",
    "options.softmax_scale": "sm_scale",
})


def _stream(device):
    return torch.cuda.current_stream(device).cuda_stream


def _ptr(tensor):
    return 0 if tensor is None else tensor.data_ptr()


# --- argument checks (before any op runs) ---------------------------------------------------

def _check_tensor(name, tensor, dtypes, dims, what):
    if not isinstance(tensor, torch.Tensor):
        raise invalid_argument(name, type(tensor).__name__, "expected a torch.Tensor")
    if tensor.dtype not in dtypes:
        raise invalid_argument(f"{name}.dtype", tensor.dtype,
                               "expected " + " or ".join(map(str, dtypes)))
    if dims is not None and tensor.dim() not in (dims if isinstance(dims, tuple) else (dims,)):
        raise invalid_argument(f"{name}.shape", tuple(tensor.shape), f"expected {what}")


def _check_contiguous(name, tensor):
    if not tensor.is_contiguous():
        raise invalid_argument(f"{name}.stride", tensor.stride(), "expected a contiguous tensor")


def _cache_geometry(k_data, v_data, k_scale, v_scale, head_dim, k_offset):
    """(num_pages, num_kv_heads, page_size, bits) of the cache tensors, checked against
    paged_layout's shapes for `head_dim`."""
    _check_tensor("k_data", k_data, (torch.uint8, torch.int8), 4,
                  "4 dimensions [num_pages, num_kv_heads, page_size, head_dim * bits / 8]")
    num_pages, heads_kv, page_size, row_bytes = k_data.shape
    int8_scales = isinstance(k_scale, torch.Tensor) and k_scale.dtype == torch.float32
    if row_bytes == head_dim:
        bits = 8
    elif row_bytes * 2 == head_dim and not int8_scales:
        bits = 4
    elif row_bytes * 2 == head_dim:
        # As wide as an INT4 cache of q's head dim, but float32 scales are an INT8 cache's.
        raise invalid_argument("k_data.shape", tuple(k_data.shape),
                               f"an INT8 cache (float32 k_scale) of head dim {row_bytes}, not "
                               f"{head_dim} as q")
    else:
        raise invalid_argument("k_data.shape", tuple(k_data.shape),
                               f"expected a last dimension of {head_dim} (INT8) or "
                               f"{head_dim // 2} (INT4) bytes for head_dim {head_dim}")
    try:
        if torch.compiler.is_compiling():
            # Dynamo cannot trace the C++ size check (a pybind11 function): the op's C++
            # validation runs the same rules on the same sizes at every launch.
            layout = layout_shapes(num_pages, page_size, heads_kv, head_dim, bits)
        else:
            layout = paged_layout(num_pages, page_size, heads_kv, head_dim, bits)
    except InvalidArgument as error:
        # The sizes come from k_data's shape.
        raise invalid_argument("k_data.shape", tuple(k_data.shape),
                               str(error).split(": ", 1)[-1]) from None
    scale_dtype = torch.float32 if bits == 8 else torch.float16
    for name, tensor, (shape, _) in (("v_data", v_data, layout["v_data"]),
                                     ("k_scale", k_scale, layout["k_scale"]),
                                     ("v_scale", v_scale, layout["v_scale"])):
        dtypes = (k_data.dtype,) if name == "v_data" else (scale_dtype,)
        _check_tensor(name, tensor, dtypes, None, "")
        if tuple(tensor.shape) != shape:
            raise invalid_argument(f"{name}.shape", tuple(tensor.shape),
                                   f"expected {shape} (the layout of k_data's cache)")
    for name, tensor in (("k_data", k_data), ("v_data", v_data), ("k_scale", k_scale),
                         ("v_scale", v_scale)):
        _check_contiguous(name, tensor)
    if k_offset is not None:
        _check_tensor("k_offset", k_offset, (torch.float32,), 2, "[num_kv_heads, head_dim]")
        if tuple(k_offset.shape) != (heads_kv, head_dim):
            raise invalid_argument("k_offset.shape", tuple(k_offset.shape),
                                   f"expected {(heads_kv, head_dim)}")
        _check_contiguous("k_offset", k_offset)
    return num_pages, heads_kv, page_size, bits


def _as_int32(name, tensor, dims, what):
    """An int32 contiguous index tensor; int64 (vLLM's slot mapping) is converted."""
    _check_tensor(name, tensor, _INDEX_DTYPES, dims, what)
    if tensor.dtype == torch.int64:
        tensor = tensor.to(torch.int32)
    return tensor.contiguous()


def _table_and_lengths(block_table, seq_lens, batch):
    """The block table int32 [batch, max_pages] and the lengths int32 [batch], checked."""
    block_table = _as_int32("block_table", block_table, 2, "[batch, max_pages]")
    seq_lens = _as_int32("seq_lens", seq_lens, 1, "[batch]")
    if block_table.shape[0] != batch or block_table.shape[1] < 1:
        raise invalid_argument("block_table.shape", tuple(block_table.shape),
                               f"expected ({batch}, max_pages >= 1), one row per sequence")
    if tuple(seq_lens.shape) != (batch,):
        raise invalid_argument("seq_lens.shape", tuple(seq_lens.shape),
                               f"expected ({batch},), one length per sequence")
    return block_table, seq_lens


def _cache_kwargs(k_data, v_data, k_scale, v_scale, k_offset, head_dim):
    num_pages, heads_kv, page_size, bits = _cache_geometry(k_data, v_data, k_scale, v_scale,
                                                           head_dim, k_offset)
    return dict(num_pages=num_pages, page_size=page_size, heads_kv=heads_kv, head_dim=head_dim,
                bits=bits, k_data=k_data.data_ptr(), v_data=v_data.data_ptr(),
                k_scale=k_scale.data_ptr(), v_scale=v_scale.data_ptr(), k_offset=_ptr(k_offset))


# --- the custom ops -------------------------------------------------------------------------


@_op("intfa::paged_append", mutates_args=("k_data", "v_data", "k_scale", "v_scale"))
def _paged_append_op(k: torch.Tensor, v: torch.Tensor, k_data: torch.Tensor,
                     v_data: torch.Tensor, k_scale: torch.Tensor, v_scale: torch.Tensor,
                     slot_mapping: torch.Tensor, k_offset: Optional[torch.Tensor]) -> None:
    tokens, heads_kv, head_dim = k.shape
    if tokens == 0:
        return
    with torch.cuda.device(k.device):
        s = lambda t: (0, t.stride(1), t.stride(0), 1)  # noqa: E731 ([1, heads, tokens, d])
        _intfa.paged_append(**_cache_kwargs(k_data, v_data, k_scale, v_scale, k_offset, head_dim),
                            k=k.data_ptr(), k_strides=s(k), v=v.data_ptr(), v_strides=s(v),
                            dtype=_FLOAT_NAMES[k.dtype], slot_mapping=slot_mapping.data_ptr(),
                            tokens=tokens, stream=_stream(k.device))


@_paged_append_op.register_fake
def _(k, v, k_data, v_data, k_scale, v_scale, slot_mapping, k_offset):
    return None


def _empty_decode(q4, return_lse):
    batch, q_len, heads_q, _ = q4.shape
    out = torch.empty(q4.shape, dtype=q4.dtype, device=q4.device)
    lse_shape = (batch, q_len, heads_q) if return_lse else (0,)
    return out, torch.empty(lse_shape, dtype=torch.float32, device=q4.device)


@_op("intfa::paged_decode")
def _paged_decode_op(q: torch.Tensor, k_data: torch.Tensor, v_data: torch.Tensor,
                     k_scale: torch.Tensor, v_scale: torch.Tensor, block_table: torch.Tensor,
                     seq_lens: torch.Tensor, k_offset: Optional[torch.Tensor], max_seq_len: int,
                     causal: bool, sm_scale: float, num_splits: int, config: List[int],
                     return_lse: bool) -> Tuple[torch.Tensor, torch.Tensor]:
    batch, q_len, heads_q, head_dim = q.shape
    with torch.cuda.device(q.device):
        out, lse = _empty_decode(q, return_lse)
        cache = _cache_kwargs(k_data, v_data, k_scale, v_scale, k_offset, head_dim)
        problem = dict(batch=batch, q_len=q_len, heads_q=heads_q,
                       max_pages=block_table.shape[1], max_seq_len=max_seq_len, causal=causal)
        geometry = {name: cache[name] for name in ("num_pages", "page_size", "heads_kv",
                                                   "head_dim", "bits")}
        workspace_bytes, _ = _intfa.paged_decode_workspace_bytes(
            **geometry, **problem, softmax_scale=sm_scale, num_splits=num_splits, config=config)
        workspace = torch.empty(max(workspace_bytes, 1), dtype=torch.uint8, device=q.device)
        # [batch, q_len, heads, d] tensors as the C++ [batch, heads, q_len, d] views.
        s = lambda t: (t.stride(0), t.stride(2), t.stride(1), 1)  # noqa: E731
        _intfa.paged_decode(**cache, **problem, q=q.data_ptr(), q_strides=s(q),
                            q_dtype=_FLOAT_NAMES[q.dtype], out=out.data_ptr(), out_strides=s(out),
                            out_dtype=_FLOAT_NAMES[out.dtype], lse=_ptr(lse) if return_lse else 0,
                            block_table=block_table.data_ptr(), seq_lens=seq_lens.data_ptr(),
                            workspace=workspace.data_ptr(), workspace_bytes=workspace_bytes,
                            softmax_scale=sm_scale, num_splits=num_splits, config=config,
                            stream=_stream(q.device))
    return out, lse


@_paged_decode_op.register_fake
def _(q, k_data, v_data, k_scale, v_scale, block_table, seq_lens, k_offset, max_seq_len, causal,
      sm_scale, num_splits, config, return_lse):
    return _empty_decode(q, return_lse)


def _empty_prefill(q, return_lse):
    total_q, heads_q, _ = q.shape
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    lse_shape = (heads_q, total_q) if return_lse else (0,)
    return out, torch.empty(lse_shape, dtype=torch.float32, device=q.device)


@_op("intfa::paged_prefill")
def _paged_prefill_op(q: torch.Tensor, k_data: torch.Tensor, v_data: torch.Tensor,
                      k_scale: torch.Tensor, v_scale: torch.Tensor, query_start_loc: torch.Tensor,
                      block_table: torch.Tensor, seq_lens: torch.Tensor,
                      k_offset: Optional[torch.Tensor], max_q_len: int, max_seq_len: int,
                      kv_tokens: int, causal: bool, sm_scale: float,
                      return_lse: bool) -> Tuple[torch.Tensor, torch.Tensor]:
    total_q, heads_q, head_dim = q.shape
    with torch.cuda.device(q.device):
        out, lse = _empty_prefill(q, return_lse)
        cache = _cache_kwargs(k_data, v_data, k_scale, v_scale, k_offset, head_dim)
        problem = dict(batch=query_start_loc.shape[0] - 1, heads_q=heads_q, total_q=total_q,
                       max_q_len=max_q_len, max_pages=block_table.shape[1],
                       max_seq_len=max_seq_len, kv_tokens=kv_tokens, causal=causal)
        geometry = {name: cache[name] for name in ("num_pages", "page_size", "heads_kv",
                                                   "head_dim", "bits", "k_offset")}
        workspace_bytes = _intfa.paged_prefill_workspace_bytes(**geometry, **problem)
        workspace = torch.empty(workspace_bytes, dtype=torch.uint8, device=q.device)
        # [total_q, heads, d] tensors as the C++ [1, heads, total_q, d] views.
        s = lambda t: (0, t.stride(1), t.stride(0), 1)  # noqa: E731
        _intfa.paged_prefill(**cache, **problem, q=q.data_ptr(), q_strides=s(q),
                             dtype=_FLOAT_NAMES[q.dtype], out=out.data_ptr(), out_strides=s(out),
                             lse=_ptr(lse) if return_lse else 0,
                             query_start_loc=query_start_loc.data_ptr(),
                             block_table=block_table.data_ptr(), seq_lens=seq_lens.data_ptr(),
                             workspace=workspace.data_ptr(), workspace_bytes=workspace_bytes,
                             softmax_scale=sm_scale, stream=_stream(q.device))
    return out, lse


@_paged_prefill_op.register_fake
def _(q, k_data, v_data, k_scale, v_scale, query_start_loc, block_table, seq_lens, k_offset,
      max_q_len, max_seq_len, kv_tokens, causal, sm_scale, return_lse):
    return _empty_prefill(q, return_lse)


def _merge(a, lse_a, b, lse_b, out, out_lse):
    """Launches merge_states on [B, H, N, D] values and [B, H, N] LSEs (any strides)."""
    def lse_strides(lse):
        return tuple(lse.stride())

    _intfa.merge_states(shape=tuple(a.shape), dtype=_FLOAT_NAMES[a.dtype], a=a.data_ptr(),
                        a_strides=tuple(a.stride()), a_lse=lse_a.data_ptr(),
                        a_lse_strides=lse_strides(lse_a), b=b.data_ptr(),
                        b_strides=tuple(b.stride()), b_lse=lse_b.data_ptr(),
                        b_lse_strides=lse_strides(lse_b), out=out.data_ptr(),
                        out_strides=tuple(out.stride()), out_dtype=_FLOAT_NAMES[out.dtype],
                        out_lse=out_lse.data_ptr(), out_lse_strides=lse_strides(out_lse),
                        stream=_stream(a.device))


def _as_bhnd(values, lse):
    """[seq, heads, d] + [seq, heads] (FlashInfer) as [1, heads, seq, d] + [1, heads, seq]
    views; 4-D [B, H, N, D] + [B, H, N] unchanged."""
    if values.dim() == 3:
        return values.unsqueeze(0).transpose(1, 2), lse.unsqueeze(0).transpose(1, 2)
    return values, lse


@_op("intfa::merge_states")
def _merge_states_op(a: torch.Tensor, lse_a: torch.Tensor, b: torch.Tensor,
                     lse_b: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    out, out_lse = torch.empty_like(a), torch.empty_like(lse_a)
    with torch.cuda.device(a.device):
        views = [_as_bhnd(x, y) for x, y in ((a, lse_a), (b, lse_b), (out, out_lse))]
        _merge(*views[0], *views[1], *views[2])
    return out, out_lse


@_merge_states_op.register_fake
def _(a, lse_a, b, lse_b):
    return torch.empty_like(a), torch.empty_like(lse_a)


@_op("intfa::merge_states_into", mutates_args=("out", "out_lse"))
def _merge_states_into_op(a: torch.Tensor, lse_a: torch.Tensor, b: torch.Tensor,
                          lse_b: torch.Tensor, out: torch.Tensor, out_lse: torch.Tensor) -> None:
    with torch.cuda.device(a.device):
        views = [_as_bhnd(x, y) for x, y in ((a, lse_a), (b, lse_b), (out, out_lse))]
        _merge(*views[0], *views[1], *views[2])


@_merge_states_into_op.register_fake
def _(a, lse_a, b, lse_b, out, out_lse):
    return None


# --- the public functions -------------------------------------------------------------------

def _check_rows(name, tensor, dtype=None):
    _check_tensor(name, tensor, _FLOAT_DTYPES, 3, "3 dimensions [num_tokens, num_kv_heads, "
                  "head_dim]")
    if dtype is not None and tensor.dtype != dtype:
        raise invalid_argument(f"{name}.dtype", tensor.dtype, f"expected {dtype} as k")
    if tensor.stride(-1) != 1:
        raise invalid_argument(f"{name}.stride", tensor.stride(),
                               "expected stride 1 on the head dim (the last dimension)")


def paged_append(k, v, k_data, v_data, k_scale, v_scale, slot_mapping, *, k_offset=None):
    """Quantizes new K and V rows (FP16/BF16 ``[num_tokens, num_kv_heads, head_dim]``) into the
    cache tensors (``paged_layout``; modified in place) at ``slot_mapping`` (int32 or int64
    ``[num_tokens]``; a negative slot skips its token), as vLLM's ``reshape_and_cache``.
    ``k_offset`` (float32 ``[num_kv_heads, head_dim]``) is subtracted from K first (K smoothing:
    fix it before the first append; decode then needs the same offset for its LSE)."""
    _check_rows("k", k)
    _check_rows("v", v, k.dtype)
    if tuple(v.shape) != tuple(k.shape):
        raise invalid_argument("v.shape", tuple(v.shape), f"expected {tuple(k.shape)} as k")
    tokens, heads_kv, head_dim = k.shape
    if head_dim not in HEAD_DIMS:
        raise invalid_argument("k.shape", tuple(k.shape), "supported head dims are 64, 128 and 256")
    _, cache_heads, _, _ = _cache_geometry(k_data, v_data, k_scale, v_scale, head_dim, k_offset)
    if heads_kv != cache_heads:
        raise invalid_argument("k.shape", tuple(k.shape),
                               f"expected {cache_heads} KV heads as k_data {tuple(k_data.shape)}")
    slot_mapping = _as_int32("slot_mapping", slot_mapping, 1, "[num_tokens]")
    if slot_mapping.shape[0] != tokens:
        raise invalid_argument("slot_mapping.shape", tuple(slot_mapping.shape),
                               f"expected ({tokens},), one slot per token of k")
    check_device([("k", k), ("v", v), ("k_data", k_data), ("v_data", v_data),
                   ("k_scale", k_scale), ("v_scale", v_scale), ("slot_mapping", slot_mapping),
                   ("k_offset", k_offset)])
    _paged_append_op(k, v, k_data, v_data, k_scale, v_scale, slot_mapping, k_offset)


def paged_decode(q, k_data, v_data, k_scale, v_scale, block_table, seq_lens, *, max_seq_len=None,
                 causal=False, sm_scale=None, k_offset=None, return_lse=False, num_splits=None,
                 config=None):
    """Attention of new queries over the paged cache: ``q`` FP16/BF16 ``[batch, num_qo_heads,
    head_dim]`` (one query per sequence) or ``[batch, q_len, num_qo_heads, head_dim]`` (q_len
    1..64, causal within them when ``causal``: query i of a sequence of length L sits at L - q_len
    + i), ``num_qo_heads`` a multiple of the cache's KV heads. ``block_table`` int32 ``[batch,
    max_pages]`` page ids, ``seq_lens`` int32 ``[batch]`` (each sequence's tokens, its new ones
    included; 0 allowed). ``max_seq_len`` bounds the lengths for the split heuristic only
    (default: the block table's capacity, which keeps a captured graph valid for every length);
    ``num_splits`` overrides the heuristic; ``config`` (block_rows, stage_tokens, stages) the tile
    config. Returns the output in q's shape and dtype, and with ``return_lse`` the natural-log LSE
    float32 ``[batch, num_qo_heads]`` (or ``[batch, q_len, num_qo_heads]``) of the unsmoothed
    keys."""
    _check_tensor("q", q, _FLOAT_DTYPES, (3, 4), "[batch, num_qo_heads, head_dim] or "
                  "[batch, q_len, num_qo_heads, head_dim]")
    if q.stride(-1) != 1:
        raise invalid_argument("q.stride", q.stride(),
                               "expected stride 1 on the head dim (the last dimension)")
    one_query = q.dim() == 3
    q4 = q.unsqueeze(1) if one_query else q
    batch, q_len, heads_q, head_dim = q4.shape
    if head_dim not in HEAD_DIMS:
        raise invalid_argument("q.shape", tuple(q.shape), "supported head dims are 64, 128 and 256")
    if not 1 <= q_len <= _MAX_QUERIES:
        raise invalid_argument("q.shape", tuple(q.shape),
                               "expected 1 to 64 queries per sequence (decode)")
    num_pages, heads_kv, page_size, _ = _cache_geometry(k_data, v_data, k_scale, v_scale,
                                                        head_dim, k_offset)
    if heads_q % heads_kv != 0:
        raise invalid_argument("q.shape", tuple(q.shape),
                               f"expected query heads a multiple of the cache's {heads_kv} KV heads")
    block_table, seq_lens = _table_and_lengths(block_table, seq_lens, batch)
    capacity = block_table.shape[1] * page_size
    if max_seq_len is None:
        max_seq_len = capacity
    elif not _checks.is_int(max_seq_len) or not 1 <= max_seq_len <= capacity:
        raise invalid_argument("max_seq_len", repr(max_seq_len),
                               f"expected an int in [1, {capacity}] (max_pages * page_size)")
    if not isinstance(causal, bool):
        raise invalid_argument("causal", repr(causal), "expected True or False")
    if not isinstance(return_lse, bool):
        raise invalid_argument("return_lse", repr(return_lse), "expected True or False")
    scale = _checks.resolve_sm_scale(sm_scale)
    if num_splits is None:
        num_splits = 0
    elif not _checks.is_int(num_splits) or not 1 <= num_splits <= _MAX_SPLITS:
        raise invalid_argument("num_splits", repr(num_splits), "expected an int in [1, 64] or None")
    if config is None:
        config = [0, 0, 0]
    else:
        config = list(_checks.as_list("config", config))
        if len(config) != 3 or not all(_checks.is_int(value) for value in config):
            raise invalid_argument("config", repr(config),
                                   "expected (block_rows, stage_tokens, stages) ints")
    check_device([("q", q), ("k_data", k_data), ("v_data", v_data), ("k_scale", k_scale),
                   ("v_scale", v_scale), ("block_table", block_table), ("seq_lens", seq_lens),
                   ("k_offset", k_offset)])
    try:
        out, lse = _paged_decode_op(q4, k_data, v_data, k_scale, v_scale, block_table, seq_lens,
                                    k_offset, max_seq_len, causal, scale, num_splits, config,
                                    return_lse)
    except InvalidArgument as error:
        raise renamed(error, _DECODE_ARGUMENTS) from None
    if one_query:
        out = out.squeeze(1)
        lse = lse.squeeze(1) if return_lse else lse
    return (out, lse) if return_lse else out


def paged_prefill(q, k_data, v_data, k_scale, v_scale, query_start_loc, block_table, seq_lens, *,
                  max_q_len=None, max_seq_len=None, kv_tokens=None, causal=True, sm_scale=None,
                  k_offset=None, return_lse=False):
    """Attention of packed queries over their sequences' cached K/V (vLLM's chunked prefill,
    FlashInfer's BatchPrefillWithPagedKVCache): ``q`` FP16/BF16 ``[total_q, num_qo_heads,
    head_dim]``, sequence b's queries rows ``query_start_loc[b]`` .. ``query_start_loc[b + 1]``
    (int32 or int64 ``[batch + 1]``, from 0 to total_q), its keys its first ``seq_lens[b]``
    cached tokens (its new ones appended first), query i at position seq_lens[b] - (its query
    count) + i (bottom-right causal masking when ``causal``). A sequence of one query is a decode
    row: prefills, chunks over cached prefixes and decode rows mix in one batch.
    ``block_table`` int32 ``[batch, max_pages]``. Host-side bounds, as FlashInfer's plan takes
    them: ``max_q_len`` the most queries of one sequence, ``max_seq_len`` the longest sequence,
    ``kv_tokens`` the sum of seq_lens or more (the workspace holds that many gathered rows per KV
    head); each one not given is read from the offsets and lengths (one host sync; refused while
    a CUDA graph is captured). Returns the output in q's shape and dtype, and with
    ``return_lse`` the natural-log LSE float32 ``[total_q, num_qo_heads]`` of the unsmoothed
    keys. Numerics: K as cached (INT8; an INT4 cache's K quantized again to INT8 per row), V
    dequantized to q's dtype, Q per token in INT8, 16-bit P.V (half INT8)."""
    _check_tensor("q", q, _FLOAT_DTYPES, 3, "[total_q, num_qo_heads, head_dim]")
    if q.stride(-1) != 1:
        raise invalid_argument("q.stride", q.stride(),
                               "expected stride 1 on the head dim (the last dimension)")
    total_q, heads_q, head_dim = q.shape
    if head_dim not in HEAD_DIMS:
        raise invalid_argument("q.shape", tuple(q.shape), "supported head dims are 64, 128 and 256")
    num_pages, heads_kv, page_size, _ = _cache_geometry(k_data, v_data, k_scale, v_scale,
                                                        head_dim, k_offset)
    if heads_q % heads_kv != 0:
        raise invalid_argument("q.shape", tuple(q.shape),
                               f"expected query heads a multiple of the cache's {heads_kv} KV heads")
    query_start_loc = _as_int32("query_start_loc", query_start_loc, 1, "[batch + 1]")
    if query_start_loc.shape[0] < 2:
        raise invalid_argument("query_start_loc.shape", tuple(query_start_loc.shape),
                               "expected [batch + 1] offsets for batch >= 1")
    batch = query_start_loc.shape[0] - 1
    block_table, seq_lens = _table_and_lengths(block_table, seq_lens, batch)
    capacity = block_table.shape[1] * page_size
    if max_seq_len is not None and (not _checks.is_int(max_seq_len)
                                    or not 1 <= max_seq_len <= capacity):
        raise invalid_argument("max_seq_len", repr(max_seq_len),
                               f"expected an int in [1, {capacity}] (max_pages * page_size)")
    if max_q_len is not None and (not _checks.is_int(max_q_len)
                                  or not 1 <= max_q_len <= max(1, total_q)):
        raise invalid_argument("max_q_len", repr(max_q_len),
                               f"expected an int in [1, {max(1, total_q)}] (q's rows)")

    def check_kv_tokens():
        if not _checks.is_int(kv_tokens) or not max_seq_len <= kv_tokens <= batch * max_seq_len:
            raise invalid_argument("kv_tokens", repr(kv_tokens),
                                   f"expected an int in [{max_seq_len}, {batch * max_seq_len}] "
                                   "(the sum of seq_lens, or more)")
    if kv_tokens is not None and max_seq_len is not None:
        check_kv_tokens()
    for name, value in (("causal", causal), ("return_lse", return_lse)):
        if not isinstance(value, bool):
            raise invalid_argument(name, repr(value), "expected True or False")
    scale = _checks.resolve_sm_scale(sm_scale)
    check_device([("q", q), ("k_data", k_data), ("v_data", v_data), ("k_scale", k_scale),
                   ("v_scale", v_scale), ("query_start_loc", query_start_loc),
                   ("block_table", block_table), ("seq_lens", seq_lens), ("k_offset", k_offset)])
    # Bounds not given are read from the lengths and offsets: one host sync, which a CUDA graph
    # capture cannot take (the bounds are then the caller's to give, as FlashInfer's plan takes
    # them). Upper bounds from the block table's capacity instead would size the workspace for
    # batch * capacity rows.
    missing = [name for name, value in (("max_q_len", max_q_len), ("max_seq_len", max_seq_len),
                                        ("kv_tokens", kv_tokens)) if value is None]
    if missing and torch.cuda.is_current_stream_capturing():
        raise invalid_argument(missing[0], "None", "expected the bound while a CUDA graph is "
                               "captured (it cannot be read from the device then)")
    if max_seq_len is None:
        max_seq_len = max(1, min(capacity, int(seq_lens.max())))
    if max_q_len is None:
        max_q_len = max(1, min(total_q, int((query_start_loc[1:] - query_start_loc[:-1]).max())))
    if kv_tokens is None:
        kv_tokens = min(batch * max_seq_len,
                        max(max_seq_len, int(seq_lens.clamp(0, max_seq_len).sum())))
    else:
        check_kv_tokens()
    if total_q == 0:
        out, lse = _empty_prefill(q, return_lse)
    else:
        try:
            out, lse = _paged_prefill_op(q, k_data, v_data, k_scale, v_scale, query_start_loc,
                                         block_table, seq_lens, k_offset, max_q_len, max_seq_len,
                                         kv_tokens, causal, scale, return_lse)
        except InvalidArgument as error:
            raise renamed(error, _PREFILL_ARGUMENTS) from None
    return (out, lse.t()) if return_lse else out


def attend_step(q, k_data, v_data, k_scale, v_scale, query_start_loc, block_table, seq_lens, *,
                max_q_len, max_seq_len, kv_tokens, causal=True, sm_scale=None, k_offset=None,
                num_decodes=0, decode_max_seq_len=None):
    """One serving step's attention as the integrations (vLLM's, transformers') run it, the new
    K/V appended already: ``paged_decode`` (split over the keys) when every sequence has one
    query (``max_q_len`` 1 and a row of ``q`` per sequence), else ``paged_prefill`` (prefills,
    chunks and decode rows in one call). ``num_decodes`` (a host int, default 0): the first
    ``num_decodes`` sequences have one query each (rows 0 .. num_decodes - 1 of ``q``, vLLM's
    decode-first batch order); in a mixed step they run ``paged_decode``
    (``decode_max_seq_len`` bounding their lengths for its split heuristic; default the block
    table's capacity, or ``max_seq_len`` when every sequence is a decode) and only the rest
    ``paged_prefill``, whose bounds ``max_q_len``, ``max_seq_len`` and ``kv_tokens`` then need
    cover only those sequences. Otherwise arguments as ``paged_prefill``'s."""
    batch = query_start_loc.shape[0] - 1
    if not _checks.is_int(num_decodes) or not 0 <= num_decodes <= min(batch, q.shape[0]):
        raise invalid_argument("num_decodes", repr(num_decodes),
                               f"expected an int in [0, {min(batch, q.shape[0])}] (the leading "
                               "sequences with one query each)")
    if max_q_len == 1 and q.shape[0] == batch:
        num_decodes = batch
    if num_decodes == batch and q.shape[0] == batch:
        return paged_decode(q, k_data, v_data, k_scale, v_scale, block_table, seq_lens,
                            max_seq_len=decode_max_seq_len or max_seq_len, sm_scale=sm_scale,
                            k_offset=k_offset)
    prefill = dict(max_q_len=max_q_len, max_seq_len=max_seq_len, kv_tokens=kv_tokens,
                   causal=causal, sm_scale=sm_scale, k_offset=k_offset)
    if num_decodes == 0:
        return paged_prefill(q, k_data, v_data, k_scale, v_scale, query_start_loc, block_table,
                             seq_lens, **prefill)
    # A mixed step: the decode rows need none of the prefill's gather of their whole cached
    # sequences into dense K/V, which for long contexts costs far more than their attention.
    # Rows past the sequences' queries (a caller's padding) are zeros.
    out = torch.zeros_like(q) if num_decodes == batch else torch.empty_like(q)
    # max_seq_len bounds the prefill part's lengths only: without decode_max_seq_len, the
    # decodes' split heuristic takes the block table's capacity.
    out[:num_decodes] = paged_decode(q[:num_decodes], k_data, v_data, k_scale, v_scale,
                                     block_table[:num_decodes], seq_lens[:num_decodes],
                                     max_seq_len=decode_max_seq_len, sm_scale=sm_scale,
                                     k_offset=k_offset)
    if num_decodes < batch:
        out[num_decodes:] = paged_prefill(q[num_decodes:], k_data, v_data, k_scale, v_scale,
                                          query_start_loc[num_decodes:] - num_decodes,
                                          block_table[num_decodes:], seq_lens[num_decodes:],
                                          **prefill)
    return out


def merge_states(v_a, s_a, v_b, s_b, *, out=None, out_lse=None):
    """Merges two partial attention states by their LSE (issue 29): ``v`` FP16/BF16
    ``[seq, num_heads, head_dim]`` with ``s`` float32 ``[seq, num_heads]`` (FlashInfer's
    merge_state), or ``[batch, heads, seq, head_dim]`` with ``[batch, heads, seq]`` (intfa.attention
    with return_lse). Returns ``(v, s)`` = the attention over the union of both key sets; with
    ``out`` and ``out_lse`` it writes them there instead (``out=v_a, out_lse=s_a`` merges in place)
    and returns them. A state whose LSE is -inf weighs nothing; both -inf give zeros and -inf."""
    _check_tensor("v_a", v_a, _FLOAT_DTYPES, (3, 4), "[seq, heads, head_dim] or "
                  "[batch, heads, seq, head_dim]")
    _check_tensor("v_b", v_b, (v_a.dtype,), v_a.dim(), f"{v_a.dim()} dimensions as v_a")
    if tuple(v_b.shape) != tuple(v_a.shape):
        raise invalid_argument("v_b.shape", tuple(v_b.shape), f"expected {tuple(v_a.shape)} as v_a")
    lse_shape = tuple(v_a.shape[:-1])
    for name, lse in (("s_a", s_a), ("s_b", s_b)):
        _check_tensor(name, lse, (torch.float32,), v_a.dim() - 1, f"{lse_shape}")
        if tuple(lse.shape) != lse_shape:
            raise invalid_argument(f"{name}.shape", tuple(lse.shape), f"expected {lse_shape}")
    if v_a.shape[-1] not in HEAD_DIMS:
        raise invalid_argument("v_a.shape", tuple(v_a.shape),
                               "supported head dims are 64, 128 and 256")
    for name, values in (("v_a", v_a), ("v_b", v_b)):
        if values.stride(-1) != 1:
            raise invalid_argument(f"{name}.stride", values.stride(),
                                   "expected stride 1 on the head dim (the last dimension)")
    if (out is None) != (out_lse is None):
        raise invalid_argument("out_lse" if out_lse is None else "out", "None",
                               "expected out and out_lse together, or neither")
    if out is not None:
        _check_tensor("out", out, _FLOAT_DTYPES, v_a.dim(), f"{tuple(v_a.shape)}")
        if tuple(out.shape) != tuple(v_a.shape) or out.stride(-1) != 1:
            raise invalid_argument("out.shape", tuple(out.shape),
                                   f"expected {tuple(v_a.shape)} with a unit head-dim stride")
        _check_tensor("out_lse", out_lse, (torch.float32,), v_a.dim() - 1, f"{lse_shape}")
        if tuple(out_lse.shape) != lse_shape:
            raise invalid_argument("out_lse.shape", tuple(out_lse.shape), f"expected {lse_shape}")
    check_device([("v_a", v_a), ("s_a", s_a), ("v_b", v_b), ("s_b", s_b), ("out", out),
                   ("out_lse", out_lse)])
    if out is None:
        return _merge_states_op(v_a, s_a, v_b, s_b)
    _merge_states_into_op(v_a, s_a, v_b, s_b, out, out_lse)
    return out, out_lse


class PagedKVCache:
    """One layer's paged INT8/INT4 KV cache: its tensors (``k_data``, ``v_data``, ``k_scale``,
    ``v_scale``, optional ``k_offset``; ``paged_layout`` gives their shapes) with ``append``,
    ``decode`` and ``prefill``. Pages are the caller's to hand out (a block table per sequence,
    as vLLM's block manager does): ``slot = page * page_size + position``. ``k_offset`` (K
    smoothing: e.g. the per-channel mean of the first prompt's keys, ``k.float().mean(0)``) must
    be set before the first append and stay fixed."""

    def __init__(self, num_pages, page_size, num_kv_heads, head_dim, *, bits=8, device="cuda",
                 k_offset=None):
        layout = paged_layout(num_pages, page_size, num_kv_heads, head_dim, bits)
        dtypes = {"uint8": torch.uint8, "float32": torch.float32, "float16": torch.float16}
        for name in ("k_data", "v_data", "k_scale", "v_scale"):
            shape, dtype = layout[name]
            setattr(self, name, torch.empty(shape, dtype=dtypes[dtype], device=device))
        self.page_size, self.num_kv_heads, self.head_dim, self.bits = (page_size, num_kv_heads,
                                                                       head_dim, bits)
        self.k_offset = None
        if k_offset is not None:
            self.set_k_offset(k_offset)

    def set_k_offset(self, k_offset):
        """Fixes K smoothing's offset (float32-convertible ``[num_kv_heads, head_dim]``)."""
        if not isinstance(k_offset, torch.Tensor):
            raise invalid_argument("k_offset", type(k_offset).__name__, "expected a torch.Tensor")
        if tuple(k_offset.shape) != (self.num_kv_heads, self.head_dim):
            raise invalid_argument("k_offset.shape", tuple(k_offset.shape),
                                   f"expected {(self.num_kv_heads, self.head_dim)}")
        self.k_offset = k_offset.to(device=self.k_data.device, dtype=torch.float32).contiguous()

    def append(self, k, v, slot_mapping):
        """``paged_append`` into this cache."""
        paged_append(k, v, self.k_data, self.v_data, self.k_scale, self.v_scale, slot_mapping,
                     k_offset=self.k_offset)

    def decode(self, q, block_table, seq_lens, **options):
        """``paged_decode`` over this cache (same options)."""
        return paged_decode(q, self.k_data, self.v_data, self.k_scale, self.v_scale, block_table,
                            seq_lens, k_offset=self.k_offset, **options)

    def prefill(self, q, query_start_loc, block_table, seq_lens, **options):
        """``paged_prefill`` over this cache (same options)."""
        return paged_prefill(q, self.k_data, self.v_data, self.k_scale, self.v_scale,
                             query_start_loc, block_table, seq_lens, k_offset=self.k_offset,
                             **options)


__all__ = ["PagedKVCache", "merge_states", "paged_append", "paged_decode", "paged_prefill"]
