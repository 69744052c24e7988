"""``attn_implementation="paged|intfa"``: transformers' continuous batching (``generate_batch``,
``init_continuous_batching``, ``transformers serve``) on intfa's paged INT8/INT4 KV cache, for
prefill, chunked prefill and decode, with no SDPA in the attention path. Written against
transformers 5.17's ``generation/continuous_batching`` (its ``paged|flash_attention_*`` functions'
arguments)::

    import intfa.integrations.transformers_paged as intfa_paged
    intfa_paged.register()                            # "paged|intfa", INT8 (bits=4: INT4)
    model.set_attn_implementation("paged|intfa")
    outputs = model.generate_batch(prompts, generation_config,
                                   continuous_batching_config=intfa_paged.config(
                                       model, memory_bytes=16 << 30, max_batch_tokens=8192))

transformers' interface hands an attention function its own 16-bit ``PagedAttentionCache``
(``cache``) with each step's ``read_index`` / ``write_index`` (cache slots), ``cu_seq_lens_q``
and ``cu_seq_lens_k``; it does not let a backend allocate the cache. So intfa keeps its cache
beside it, keyed by that cache object and the layer: one ``intfa.PagedKVCache`` per layer with
the same slots (slot = block * block_size + position; a transformers block of 256 or 512 tokens
is 2 or 4 intfa pages of 128), written by ``paged_append`` at ``write_index``. On a layer's first
call intfa releases transformers' 16-bit tensors of that layer: transformers reads them only in
its attention functions, in ``copy_cache`` for forked requests (``num_return_sequences`` > 1),
which intfa takes over for that cache object (it copies intfa's pages), and in CPU offloading,
which ``config`` refuses. From then on the KV memory is intfa's: at d=128, 0.52x (INT8: a byte a
value and a float32 scale per token and head) or 0.28x (INT4: a nibble a value and a float16
scale per 32 channels) of the 16-bit cache's for the same blocks, and ``config(model,
memory_bytes=...)`` sizes ``num_blocks`` for a budget: 1.94x (INT8) or 3.56x (INT4) the 16-bit
cache's tokens. The peak is not: transformers allocates its 16-bit tensors for ``num_blocks``
first (1.94x or 3.56x the budget, checked against free memory by transformers), and they go
layer by layer as the first step runs.

Each step: a batch whose sequences all have one query runs ``paged_decode``; any other
(prefills, chunks over cached prefixes, decode rows beside them) ``paged_prefill``. The block
table and lengths come from the step's ``read_index`` (or ``write_index`` when nothing is read)
and ``cu_seq_lens_k``, once per step for all layers. K smoothing (``smooth_k``, default on): a
layer's offset is the mean of the keys of its first call (padding rows left out), fixed from
then on; with CUDA graphs that call is transformers' warm-up batch (one token repeated), a
poorer estimate of the mean than a real prompt's, which costs accuracy, not correctness.

CUDA graphs: transformers leaves them off for an implementation whose name has no "flash"
(it assumes a mask); ``use_cuda_graph=True`` turns them on, and then transformers pads its
batches and captures them. The host bounds are then the padded sizes, which cannot tell a
decode-only batch from a padded one: every captured step runs ``paged_prefill``, its workspace
sized for the padded key count (transformers' warm-up captures one with the whole cache's).

Not served (``NotImplementedError`` or ``InvalidArgument``): sliding-window layers, attention
sinks, dropout, transformers' flash decode fast path (``block_table``; transformers enables it for
flash implementations only), transformers' CPU offloading (``cpu_offload_space`` > 0: it would
swap its own blocks, not intfa's; ``config`` refuses it, a hand-made config is not checked; with
the default 0 a request evicted for lack of blocks is computed again, which is served), block
sizes that are neither 16, 32, 64 nor a multiple of 128. Not tested: ``torch.compile`` of the
model (transformers' ``default_compile_level`` > 0).
"""
import weakref

from intfa._errors import invalid_argument

NAME = "paged|intfa"
_MAX_PAGE = 128  # intfa's largest page (templates/decode/README.md)


def page_size(block_size):
    """intfa's page size for transformers' ``block_size``: the block itself (16, 32, 64, 128),
    or 128 for a multiple of 128 (a block is then block_size / 128 intfa pages, same slots)."""
    if not isinstance(block_size, int) or isinstance(block_size, bool):
        raise invalid_argument("block_size", repr(block_size), "expected an int")
    if block_size in (16, 32, 64) or (block_size > 0 and block_size % _MAX_PAGE == 0):
        return min(block_size, _MAX_PAGE)
    raise invalid_argument("block_size", repr(block_size),
                           "expected 16, 32, 64 or a multiple of 128 (intfa's pages are 16-128 "
                           "tokens)")


def bytes_per_block(block_size, num_kv_heads, head_dim, num_layers, bits):
    """KV bytes of one transformers block over all layers: intfa's INT8/INT4 cache (``bits`` 8
    or 4, scales included) or transformers' 16-bit one (``bits`` 16)."""
    if bits == 16:
        return 2 * block_size * num_kv_heads * head_dim * 2 * num_layers
    from intfa._paged_layout import cache_bytes
    pages = block_size // page_size(block_size)
    data, scales = cache_bytes(pages, page_size(block_size), num_kv_heads, head_dim, bits)
    return 2 * (data + scales) * num_layers


def config(model, *, bits=8, memory_bytes=None, block_size=256, **options):
    """A ``transformers.ContinuousBatchingConfig`` for ``paged|intfa``: with ``memory_bytes``,
    the ``num_blocks`` that intfa's ``bits``-wide cache of every layer fits in that many bytes
    (``max_batch_tokens`` then needs setting too, or transformers sizes it from free memory).
    Other keywords (``use_cuda_graph``, ``max_batch_tokens``, ...) go to
    ``ContinuousBatchingConfig``."""
    from transformers import ContinuousBatchingConfig
    from transformers.generation.continuous_batching.cache import find_head_dim, find_num_kv_heads
    text = model.config.get_text_config()
    page_size(block_size)
    if options.get("cpu_offload_space", 0.0) != 0.0:  # None too: transformers sizes it then
        raise invalid_argument("cpu_offload_space", repr(options["cpu_offload_space"]),
                               "expected 0: transformers' CPU offloading moves its own 16-bit "
                               "blocks, not intfa's, so a restored request would read pages "
                               "that were not restored")
    if memory_bytes is not None:
        if not isinstance(memory_bytes, int) or memory_bytes < 1:
            raise invalid_argument("memory_bytes", repr(memory_bytes), "expected an int >= 1")
        per_block = bytes_per_block(block_size, find_num_kv_heads(text), find_head_dim(text),
                                    text.num_hidden_layers, bits)
        # transformers adds two blocks of its own (the read and write trash).
        options["num_blocks"] = max(1, memory_bytes // per_block - 2)
    return ContinuousBatchingConfig(block_size=block_size, **options)


def register(name=NAME, *, bits=8, smooth_k=True):
    """Registers intfa as ``attn_implementation=name`` (it must start with "paged|": that prefix
    is what makes transformers hand it the paged cache) in transformers' AttentionInterface.
    Registering a name again replaces its function; a transformers cache keeps the intfa cache
    it got first (its width and smoothing must stay). Returns `name`."""
    if not isinstance(name, str) or not name.startswith("paged|") or name == "paged|":
        raise invalid_argument("name", repr(name), 'expected a str "paged|<name>"')
    if bits not in (8, 4) or isinstance(bits, bool):
        raise invalid_argument("bits", repr(bits), "expected 8 or 4")
    if not isinstance(smooth_k, bool):
        raise invalid_argument("smooth_k", repr(smooth_k), "expected True or False")
    from transformers import AttentionInterface
    AttentionInterface.register(name, attention_function(bits, smooth_k))
    return name


class _Step:
    """One step's batch, shared by its layers: intfa's block table and lengths, and the host
    bounds. Under transformers' CUDA graphs (padded batches) the bounds are the padded sizes, so
    a captured step holds for every batch padded to them."""
    __slots__ = ("key", "block_table", "seq_lens", "query_start_loc", "max_q_len",
                 "max_seq_len", "kv_tokens", "write_slots")


class _Caches:
    """intfa's caches beside one transformers PagedAttentionCache: a PagedKVCache per layer and
    the current step. Holds no reference to the transformers cache (it is the weak key)."""

    def __init__(self, cache, bits, smooth_k):
        if getattr(cache, "num_sliding_attention_groups", 0):
            raise NotImplementedError("paged|intfa does not serve sliding-window layers")
        self.page = page_size(cache.block_size)
        self.pages_per_block = cache.block_size // self.page
        self.num_pages = (cache.num_blocks + 2) * self.pages_per_block  # + the two trash blocks
        self.write_trash = getattr(cache, "write_trash_index", None)
        self.bits, self.smooth_k = bits, smooth_k
        self.layers = {}
        self.step = None

    def layer(self, cache, layer_idx, key_rows, write_slots):
        import intfa
        import torch
        layer = self.layers.get(layer_idx)
        if layer is not None:
            return layer
        layer = intfa.PagedKVCache(self.num_pages, self.page, cache.num_key_value_heads,
                                   cache.head_dim, bits=self.bits, device=key_rows.device)
        # Zeroed: transformers' warm-up (with CUDA graphs) reads pages nothing wrote, and its
        # next layers' keys come from that attention; zero scales read as zeros, not NaN.
        for tensor in (layer.k_data, layer.v_data, layer.k_scale, layer.v_scale):
            tensor.zero_()
        if self.smooth_k:  # the mean of the call's keys, padding rows (the write trash) left out
            weight = torch.ones(key_rows.shape[0], device=key_rows.device)
            if self.write_trash is not None:
                weight = (write_slots != self.write_trash).float()
            total = (key_rows.float() * weight[:, None, None]).sum(0)
            layer.set_k_offset(torch.nan_to_num(total / weight.sum().clamp(min=1.0),
                                                nan=0.0, posinf=0.0, neginf=0.0))
        # transformers' 16-bit tensors of this layer are released (its allocation's memory
        # becomes free for intfa's): its attention functions and, for forks, copy_cache (taken
        # over in register's function) are what read them; CPU offloading, which also does, is
        # refused by config().
        _, in_group = cache.layer_index_to_group_indices[layer_idx]
        for tensors in (cache.key_cache, cache.value_cache):
            tensors[in_group] = torch.empty(0, dtype=tensors[in_group].dtype,
                                            device=key_rows.device)
        self.layers[layer_idx] = layer
        return layer

    def copy_blocks(self, list_source_blocks, list_forked_blocks):
        """transformers' PagedAttentionCache.copy_cache (a fork's shared blocks copied to its
        own) on intfa's pages: block b is pages b * pages_per_block and the next ones."""
        import torch
        if not self.layers:
            return
        device = next(iter(self.layers.values())).k_data.device
        per_block = torch.arange(self.pages_per_block, device=device)

        def pages(blocks):
            blocks = torch.tensor(list(blocks), dtype=torch.int64, device=device)
            return (blocks[:, None] * self.pages_per_block + per_block[None, :]).reshape(-1)
        source, forked = pages(list_source_blocks), pages(list_forked_blocks)
        for layer in self.layers.values():
            for tensor in (layer.k_data, layer.v_data, layer.k_scale, layer.v_scale):
                tensor[forked] = tensor[source]

    def step_for(self, cu_seq_lens_q, cu_seq_lens_k, max_seqlen_q, max_seqlen_k, read_index,
                 write_index, total_q):
        """The step's metadata, computed by its first layer (the kwargs' tensors are the same
        objects for every layer of one forward; the step holds them, so their ids stay unique)."""
        import torch
        # A graph capture runs the step again on the same tensors after an eager run: its
        # metadata must be computed inside the capture, to be computed again on each replay.
        capturing = torch.cuda.is_current_stream_capturing()
        if (self.step is not None and self.step.key[0] is cu_seq_lens_q
                and self.step.key[1] == capturing):
            return self.step
        step = _Step()
        step.key = (cu_seq_lens_q, capturing)
        num_seqs = cu_seq_lens_q.shape[0] - 1
        # Nothing read from the cache (only fresh prefills): the keys are the new rows.
        slots = read_index if read_index.numel() else write_index
        step.seq_lens = (cu_seq_lens_k[1:] - cu_seq_lens_k[:-1]).to(torch.int32)
        step.max_seq_len = max(1, int(max_seqlen_k))
        max_pages = -(-step.max_seq_len // self.page)
        # Entry p of sequence b: the page of its key p * page, read from its slots.
        position = torch.arange(max_pages, device=slots.device, dtype=torch.int64) * self.page
        valid = position[None, :] < step.seq_lens[:, None]
        index = (cu_seq_lens_k[:-1, None].to(torch.int64) + position[None, :])
        index = torch.where(valid, index, 0).clamp_(max=max(0, slots.numel() - 1))
        pages = torch.div(slots.to(torch.int64)[index], self.page, rounding_mode="floor")
        step.block_table = torch.where(valid, pages, 0).to(torch.int32)
        step.query_start_loc = cu_seq_lens_q.to(torch.int32)
        # A sequence's queries are among its keys: under padding (CUDA graphs) max_seqlen_q is
        # the padded token count, which may pass the padded max_seqlen_k.
        step.max_q_len = max(1, min(int(max_seqlen_q), step.max_seq_len))
        step.kv_tokens = min(num_seqs * step.max_seq_len, max(step.max_seq_len, slots.numel()))
        step.write_slots = write_index[:total_q].to(torch.int32)
        self.step = step
        return step


# intfa's caches, keyed by transformers' cache object: one set whichever function (a name
# registered again, a persistent manager used again) serves it.
_CACHES = weakref.WeakKeyDictionary()


def _caches_of(cache, bits, smooth_k):
    state = _CACHES.get(cache)
    if state is None:
        state = _CACHES[cache] = _Caches(cache, bits, smooth_k)
        # Forks copy blocks through the cache's copy_cache: on intfa's pages (an attribute of
        # this cache object only; transformers' own tensors are released).
        cache.copy_cache = state.copy_blocks
    elif (state.bits, state.smooth_k) != (bits, smooth_k):
        raise invalid_argument("bits", repr(bits), f"this cache is intfa's INT{state.bits} cache "
                               f"(smooth_k={state.smooth_k}) already: one paged|intfa "
                               "registration per transformers cache")
    return state


def attention_function(bits, smooth_k):
    """The AttentionInterface function of ``paged|intfa``."""

    def intfa_paged_attention_forward(module, query, key, value, attention_mask, dropout=0.0,
                                      scaling=None, cache=None, cu_seq_lens_q=None,
                                      cu_seq_lens_k=None, max_seqlen_q=None, max_seqlen_k=None,
                                      read_index=None, write_index=None, block_table=None,
                                      **kwargs):
        from intfa._paged import attend_step
        if cache is None or cu_seq_lens_q is None or write_index is None:
            raise invalid_argument("cache", repr(cache), "paged|intfa runs inside transformers' "
                                   "continuous batching (generate_batch); for a standard forward "
                                   "use attn_implementation='intfa'")
        if dropout:
            raise NotImplementedError("paged|intfa does not serve dropout (inference only)")
        if kwargs.get("s_aux") is not None:
            raise NotImplementedError("paged|intfa does not serve attention sinks (s_aux)")
        if block_table is not None:
            raise NotImplementedError("paged|intfa takes transformers' varlen path (read_index "
                                      "and write_index), not its flash decode fast path")
        if isinstance(cu_seq_lens_k, dict):
            cu_seq_lens_k, max_seqlen_k = (cu_seq_lens_k["full_attention"],
                                           max_seqlen_k["full_attention"])
        state = _caches_of(cache, bits, smooth_k)
        group, _ = cache.layer_index_to_group_indices[module.layer_idx]
        total_q = query.shape[2]
        # [1, H, tokens, D] -> intfa's [tokens, H, D] rows (views; the head dim stays innermost).
        q_rows = query[0].transpose(0, 1)
        k_rows, v_rows = key[0].transpose(0, 1), value[0].transpose(0, 1)
        step = state.step_for(cu_seq_lens_q, cu_seq_lens_k, max_seqlen_q, max_seqlen_k,
                              read_index[group], write_index[group], total_q)
        layer = state.layer(cache, module.layer_idx, k_rows, step.write_slots)
        layer.append(k_rows, v_rows, step.write_slots)
        out = attend_step(q_rows, layer.k_data, layer.v_data, layer.k_scale, layer.v_scale,
                          step.query_start_loc, step.block_table, step.seq_lens,
                          max_q_len=step.max_q_len, max_seq_len=step.max_seq_len,
                          kv_tokens=step.kv_tokens, sm_scale=scaling, k_offset=layer.k_offset)
        return out.unsqueeze(0), None  # [1, tokens, H, D], as transformers' paged functions

    return intfa_paged_attention_forward


__all__ = ["NAME", "attention_function", "bytes_per_block", "config", "page_size", "register"]
