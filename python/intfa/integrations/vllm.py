"""A vLLM attention backend over intfa's paged INT8/INT4 KV cache, written against vLLM 0.11.0's
V1 interface (``vllm/attention/backends/abstract.py``, ``vllm/v1/attention/backends/utils.py``
and ``flash_attn.py`` as of that release) without importing vLLM:

* ``IntfaAttentionBackend``: the static/class methods vLLM's selector and model runner call
  (``get_name``, ``get_impl_cls``, ``get_metadata_cls``, ``get_builder_cls``,
  ``get_kv_cache_shape``, ``get_kv_cache_stride_order``, ``get_supported_dtypes``,
  ``get_supported_head_sizes``, ``validate_head_size``; ``accept_output_buffer``).
* ``IntfaAttentionMetadataBuilder``: built as vLLM builds a backend's builder,
  ``(kv_cache_spec, layer_names, vllm_config, device)``; ``build(common_prefix_len,
  common_attn_metadata, fast_build=False)`` takes the fields of vLLM's
  ``CommonAttentionMetadata`` (``query_start_loc``, ``seq_lens``, ``seq_lens_cpu``,
  ``block_table_tensor``, ``slot_mapping``, ``num_actual_tokens``, ``max_query_len``,
  ``max_seq_len``, ``causal``) and returns ``IntfaAttentionMetadata``.
* ``IntfaAttentionImpl``: ``(num_heads, head_size, scale, num_kv_heads, alibi_slopes,
  sliding_window, kv_cache_dtype, logits_soft_cap=None, attn_type="decoder",
  kv_sharing_target_layer_name=None, sinks=None)`` and ``forward(layer, query, key, value,
  kv_cache, attn_metadata, output, output_scale=None, output_block_scale=None)``: the new K/V
  rows go into the cache (``intfa.paged_append`` at ``slot_mapping``, vLLM's
  ``reshape_and_cache``), then the step's decode requests (one query each) run
  ``intfa.paged_decode`` and the rest (prefills, chunks over cached prefixes)
  ``intfa.paged_prefill``, into ``output[:num_actual_tokens]``. The builder sets ``reorder_batch_threshold`` 1, as
  FlashInfer's does, so that vLLM's runner puts the decode requests first
  (``reorder_batch_to_split_decodes_and_prefills``); ``build`` counts the leading one-query
  requests on the host (``query_start_loc_cpu``), so a batch in any order is still served right.

The cache lives in the tensor vLLM allocates from ``get_kv_cache_shape`` (``[2, num_blocks,
num_kv_heads, block_size, head_size]``: K's half then V's, each read as intfa's
``[num_pages, num_kv_heads, page_size, row bytes]``). With ``kv_cache_dtype`` "fp8" (vLLM's
one-byte cache: a uint8 tensor) each half holds exactly the INT8 values, and the FP32 scales (3%
more at d=128) are kept beside it by each layer's impl, keyed by the cache tensor; INT4
(``INTFA_VLLM_KV_BITS=4``) puts values and FP16 group scales in the first 9/16 of each half.
With "auto" (the model's 16-bit dtype) values and scales fit in each half's bytes, and the memory
is the 16-bit cache's. Not served (``NotImplementedError``, as vLLM's backends refuse what they
lack): ALiBi, sliding windows, logit soft-capping, attention sinks, encoder and cross attention,
cascade attention (``use_cascade_attention`` says no), quantized outputs. CUDA graphs: none
(``cudagraph_support`` NEVER): a prefill's workspace is sized from the batch's token count.
"""
import dataclasses
import enum
import os
from typing import Any

from intfa._errors import invalid_argument

HEAD_SIZES = (64, 128, 256)
BLOCK_SIZES = (16, 32, 64, 128)
BITS_VARIABLE = "INTFA_VLLM_KV_BITS"


class AttentionCGSupport(enum.Enum):
    """vLLM's ``vllm.v1.attention.backends.utils.AttentionCGSupport`` (same names and values), for
    the builder's ``cudagraph_support`` when vLLM is not importable."""
    ALWAYS = 3
    UNIFORM_BATCH = 2
    UNIFORM_SINGLE_TOKEN_DECODE = 1
    NEVER = 0


def _cudagraph_support_never():
    try:  # vLLM's own enum where vLLM is installed, so that its comparisons hold
        from vllm.v1.attention.backends.utils import AttentionCGSupport as VllmSupport
        return VllmSupport.NEVER
    except ImportError:
        return AttentionCGSupport.NEVER


def kv_bits():
    """The cache's width: ``INTFA_VLLM_KV_BITS`` (8 by default, or 4)."""
    value = os.environ.get(BITS_VARIABLE, "8")
    if value not in ("8", "4"):
        raise invalid_argument(BITS_VARIABLE, repr(value), "expected 8 or 4")
    return int(value)


def _one_byte(cache_dtype_str):
    """Whether vLLM allocates the cache in bytes (its fp8 cache dtypes) or in the model's dtype."""
    if cache_dtype_str == "auto" or cache_dtype_str in ("bfloat16", "float16", "half"):
        return False
    if str(cache_dtype_str).startswith("fp8"):
        return True
    raise invalid_argument("cache_dtype_str", repr(cache_dtype_str),
                           "expected 'auto' (the model's 16-bit dtype) or an fp8 cache dtype, "
                           "whose bytes intfa fills with INT8/INT4 values")


class IntfaAttentionBackend:
    accept_output_buffer = True
    supports_quant_query_input = False

    @staticmethod
    def get_name():
        return "INTFA"

    @staticmethod
    def get_impl_cls():
        return IntfaAttentionImpl

    @staticmethod
    def get_metadata_cls():
        return IntfaAttentionMetadata

    @staticmethod
    def get_builder_cls():
        return IntfaAttentionMetadataBuilder

    @classmethod
    def make_metadata(cls, *args, **kwargs):
        return IntfaAttentionMetadata(*args, **kwargs)

    @staticmethod
    def get_kv_cache_shape(num_blocks, block_size, num_kv_heads, head_size,
                           cache_dtype_str="auto"):
        """``(2, num_blocks, num_kv_heads, block_size, head_size)``: K's and V's halves, each
        intfa's page layout; its elements are bytes (fp8 cache dtypes) or 16-bit values."""
        for name, value in (("num_blocks", num_blocks), ("num_kv_heads", num_kv_heads)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise invalid_argument(name, repr(value), "expected an int >= 1")
        if block_size not in BLOCK_SIZES:
            raise invalid_argument("block_size", repr(block_size), "expected 16, 32, 64 or 128")
        IntfaAttentionBackend.validate_head_size(head_size)
        _one_byte(cache_dtype_str)
        return (2, num_blocks, num_kv_heads, block_size, head_size)

    @staticmethod
    def get_kv_cache_stride_order():
        return (0, 1, 2, 3, 4)

    @classmethod
    def get_supported_dtypes(cls):
        import torch
        return [torch.float16, torch.bfloat16]

    @classmethod
    def get_supported_head_sizes(cls):
        return list(HEAD_SIZES)

    @classmethod
    def validate_head_size(cls, head_size):
        if head_size not in HEAD_SIZES:
            raise invalid_argument("head_size", repr(head_size),
                                   "intfa's paged kernels take head sizes 64, 128 and 256")


@dataclasses.dataclass
class IntfaAttentionMetadata:
    """One step's batch, from vLLM's CommonAttentionMetadata (FlashAttentionMetadata's names)."""
    num_actual_tokens: int  # query rows, padding excluded
    max_query_len: int
    query_start_loc: Any  # int32 [num_reqs + 1], device
    max_seq_len: int
    seq_lens: Any  # int32 [num_reqs], device
    block_table: Any  # int32 [num_reqs, max_blocks], device
    slot_mapping: Any  # int64 [num_actual_tokens], device
    num_reqs: int
    kv_tokens: int  # the sum of the prefill requests' seq_lens (host-side, from seq_lens_cpu)
    causal: bool = True
    num_decodes: int = 0  # the leading requests with one query each (paged_decode's)
    decode_max_seq_len: int = 0  # their longest seq_len


def _reorder_decodes_first(input_batch, scheduler_output, threshold):
    """vLLM's own reorder where vLLM is installed (its releases before the runner read
    ``reorder_batch_threshold`` ask the builder's ``reorder_batch``); without vLLM, no reorder."""
    try:
        from vllm.v1.attention.backends.utils import reorder_batch_to_split_decodes_and_prefills
    except ImportError:
        return False
    return reorder_batch_to_split_decodes_and_prefills(input_batch, scheduler_output,
                                                       decode_threshold=threshold)


def _as_list(values):
    """A host tensor's values in one call (tolist), or any sequence's."""
    return values.tolist() if hasattr(values, "tolist") else list(values)


def split_decodes(query_start_loc_cpu, seq_lens_cpu):
    """(num_decodes, decode_max_seq_len, prefill_max_seq_len, prefill_kv_tokens) of a step from
    its host-side metadata: the leading requests with exactly one query are decodes."""
    starts = [int(x) for x in _as_list(query_start_loc_cpu)]
    lengths = [int(x) for x in _as_list(seq_lens_cpu)]
    num_decodes = 0
    while num_decodes < len(lengths) and starts[num_decodes + 1] - starts[num_decodes] == 1:
        num_decodes += 1
    decodes, prefills = lengths[:num_decodes], lengths[num_decodes:]
    return (num_decodes, max(decodes, default=0), max(prefills, default=0), sum(prefills))


class IntfaAttentionMetadataBuilder:
    cudagraph_support = _cudagraph_support_never()
    # Requests of at most this many queries first: the runner reorders the batch (vLLM's
    # FlashInfer builder sets the same), and build() splits it there.
    reorder_batch_threshold = 1

    def __init__(self, kv_cache_spec, layer_names, vllm_config, device):
        self.kv_cache_spec = kv_cache_spec
        self.layer_names = layer_names
        self.vllm_config = vllm_config
        self.device = device

    def build(self, common_prefix_len, common_attn_metadata, fast_build=False):
        m = common_attn_metadata
        if common_prefix_len:
            raise NotImplementedError("intfa's vLLM backend has no cascade attention "
                                      "(use_cascade_attention returns False)")
        num_reqs = int(m.num_reqs)
        num_decodes, decode_max_seq_len, prefill_max_seq_len, prefill_kv_tokens = split_decodes(
            m.query_start_loc_cpu[:num_reqs + 1], m.seq_lens_cpu[:num_reqs])
        return IntfaAttentionMetadata(
            num_actual_tokens=int(m.num_actual_tokens), max_query_len=int(m.max_query_len),
            query_start_loc=m.query_start_loc[:num_reqs + 1],
            max_seq_len=max(1, prefill_max_seq_len) if num_decodes < num_reqs
            else int(m.max_seq_len),
            seq_lens=m.seq_lens[:num_reqs], block_table=m.block_table_tensor[:num_reqs],
            slot_mapping=m.slot_mapping[:int(m.num_actual_tokens)], num_reqs=num_reqs,
            kv_tokens=prefill_kv_tokens, causal=bool(getattr(m, "causal", True)),
            num_decodes=num_decodes, decode_max_seq_len=decode_max_seq_len)

    def build_for_cudagraph_capture(self, common_attn_metadata):
        return self.build(0, common_attn_metadata)

    def use_cascade_attention(self, *args, **kwargs):
        return False

    def reorder_batch(self, input_batch, scheduler_output):
        return _reorder_decodes_first(input_batch, scheduler_output, self.reorder_batch_threshold)


class IntfaAttentionImpl:
    def __init__(self, num_heads, head_size, scale, num_kv_heads, alibi_slopes, sliding_window,
                 kv_cache_dtype, logits_soft_cap=None, attn_type="decoder",
                 kv_sharing_target_layer_name=None, sinks=None):
        IntfaAttentionBackend.validate_head_size(head_size)
        if num_kv_heads is None:
            num_kv_heads = num_heads
        if num_heads % num_kv_heads != 0:
            raise invalid_argument("num_heads", repr(num_heads),
                                   f"expected a multiple of num_kv_heads = {num_kv_heads}")
        refused = {"alibi_slopes": alibi_slopes is not None,
                   "sliding_window": sliding_window not in (None, -1, (-1, -1)),
                   "logits_soft_cap": logits_soft_cap not in (None, 0, 0.0),
                   "sinks": sinks is not None,
                   "attn_type": str(getattr(attn_type, "value", attn_type)).lower()
                   not in ("decoder", "attentiontype.decoder")}
        for name, is_refused in refused.items():
            if is_refused:
                raise NotImplementedError(f"intfa's vLLM backend does not serve {name} "
                                          "(causal decoder self-attention only)")
        _one_byte(kv_cache_dtype)
        self.num_heads, self.head_size, self.scale = num_heads, head_size, float(scale)
        self.num_kv_heads, self.kv_cache_dtype = num_kv_heads, kv_cache_dtype
        self.kv_sharing_target_layer_name = kv_sharing_target_layer_name
        self.bits = kv_bits()
        self._scales = None  # (cache tensor's data_ptr, k_scale, v_scale) of an INT8 byte cache

    def cache_views(self, kv_cache):
        """(k_data, v_data, k_scale, v_scale) of intfa's cache in vLLM's tensor."""
        import torch
        from intfa._paged_layout import paged_layout
        _, num_blocks, heads_kv, block_size, head_size = kv_cache.shape
        layout = paged_layout(num_blocks, block_size, heads_kv, head_size, self.bits)
        dtypes = {"uint8": torch.uint8, "float32": torch.float32, "float16": torch.float16}
        halves = kv_cache.view(torch.uint8).view(2, -1)  # each half's bytes, contiguous
        views = []
        for half in halves:
            data_shape, _ = layout["k_data"]
            data_bytes = _numel(data_shape)
            views.append([half[:data_bytes].view(data_shape)])
            scale_shape, scale_dtype = layout["k_scale"]
            scale_bytes = _numel(scale_shape) * (4 if scale_dtype == "float32" else 2)
            start = (data_bytes + 255) // 256 * 256  # the scales 256-byte aligned after the data
            if start + scale_bytes <= half.numel():
                views[-1].append(half[start:start + scale_bytes].view(dtypes[scale_dtype])
                                 .view(scale_shape))
            else:
                views[-1].append(None)
        if views[0][1] is None:  # INT8 in a byte cache: the scales beside it, one set per tensor
            key = kv_cache.data_ptr()
            if self._scales is None or self._scales[0] != key:
                scale_shape, _ = layout["k_scale"]
                self._scales = (key, torch.zeros(scale_shape, dtype=torch.float32,
                                                 device=kv_cache.device),
                                torch.zeros(scale_shape, dtype=torch.float32,
                                            device=kv_cache.device))
            views[0][1], views[1][1] = self._scales[1], self._scales[2]
        (k_data, k_scale), (v_data, v_scale) = views
        return k_data, v_data, k_scale, v_scale

    def forward(self, layer, query, key, value, kv_cache, attn_metadata, output=None,
                output_scale=None, output_block_scale=None):
        import intfa
        from intfa._paged import attend_step
        if output is None:
            raise invalid_argument("output", "None", "expected vLLM's output buffer "
                                   "(accept_output_buffer)")
        if output_scale is not None or output_block_scale is not None:
            raise NotImplementedError("intfa's vLLM backend does not quantize its output")
        if attn_metadata is None:  # vLLM's profiling run
            return output
        m = attn_metadata
        n = m.num_actual_tokens
        k_data, v_data, k_scale, v_scale = self.cache_views(kv_cache)
        if self.kv_sharing_target_layer_name is None and key is not None:
            intfa.paged_append(key[:n], value[:n], k_data, v_data, k_scale, v_scale,
                               m.slot_mapping[:n])
        out = output.view(output.shape[0], self.num_heads, self.head_size)
        out[:n] = attend_step(query[:n], k_data, v_data, k_scale, v_scale, m.query_start_loc,
                              m.block_table, m.seq_lens, max_q_len=m.max_query_len,
                              max_seq_len=m.max_seq_len, kv_tokens=m.kv_tokens, causal=m.causal,
                              sm_scale=self.scale, num_decodes=m.num_decodes,
                              decode_max_seq_len=m.decode_max_seq_len or None)
        return output


def _numel(shape):
    count = 1
    for size in shape:
        count *= size
    return count


__all__ = ["AttentionCGSupport", "IntfaAttentionBackend", "IntfaAttentionImpl",
           "IntfaAttentionMetadata", "IntfaAttentionMetadataBuilder", "kv_bits"]
