"""intfa: JIT-generated INT8 FlashAttention (INT-FlashAttention) for PyTorch.

    import torch, intfa
    q, k, v = (torch.randn(2, 32, 4096, 128, dtype=torch.float16, device="cuda")
               for _ in range(3))
    out = intfa.attention(q, k, v, is_causal=True)  # for F.scaled_dot_product_attention
    qz = intfa.quantize(q, k, v)  # INT8 tensors + scales, kept for reuse
    out, lse = intfa.attention_int8(*qz[:6], return_lse=True)
    # packed sequences, as flash_attn_varlen_func: q [total_q, H, D], int32 offsets [batch + 1]
    out = intfa.attention_varlen(q_packed, k_packed, v_packed, cu_seqlens_q, cu_seqlens_k,
                                 max_seqlen_q, max_seqlen_k, is_causal=True)
    # a paged INT8/INT4 KV cache for decode and prefill (vLLM/FlashInfer shapes), and the LSE merge
    cache = intfa.PagedKVCache(num_pages, page_size=16, num_kv_heads=8, head_dim=128, bits=8)
    cache.append(k_new, v_new, slot_mapping)
    out = cache.decode(q_new, block_table, seq_lens)
    out, lse = intfa.merge_states(out_a, lse_a, out_b, lse_b)
    out = intfa.distributed.ring_attention(q_shard, k_shard, v_shard, is_causal=True)  # torchrun
    with intfa.patch_sdpa():  # F.scaled_dot_product_attention runs intfa.attention
        model(x)
    # transformers: intfa.integrations.transformers.register(), then attn_implementation="intfa"

What intfa cannot serve (masks, dropout, FP32, ...) runs torch's SDPA instead, with one
``FallbackWarning`` per reason and a count in ``intfa.fallback_stats()``; ``fallback="error"``
(or ``intfa.set_fallback("error")``, INTFA_FALLBACK=error) raises instead. ``check=True`` (or
INTFA_CHECK=1) samples a call's error against float32 attention and warns
(``AccuracyWarning``) when the inputs quantize far worse than N(0,1) does.

The kernels are generated for each head dim, variant and dtype, compiled by NVRTC on first use
(or ahead of time with ``intfa.precompile``) and cached on disk; ``intfa.cache_info()`` shows the
cache. ``cache_info`` and ``precompile`` need no PyTorch; the tensor functions need torch >= 2.4
(custom ops with fake implementations, so torch.compile graphs keep them). Errors are
``intfa.Error`` subclasses carrying the C++ message; bad arguments raise ``InvalidArgument``
(also a ValueError) naming the argument, before anything is launched.
"""
from intfa import _nvrtc

_nvrtc.preload()  # a wheel without the toolkit: PyPI's NVRTC, before the extension needs it
try:
    from intfa import _intfa
except ImportError as error:  # no NVRTC: say where this build looks for it
    if "libnvrtc" not in str(error):
        raise
    raise ImportError(f"{error}: {_nvrtc.missing_hint()}") from error
from intfa._errors import (CacheError, CompileError, DriverError, Error, InternalError,
                           InvalidArgument, NoDevice, Unsupported)
from intfa._fallback import (FallbackWarning, fallback_stats, get_fallback,
                             reset_fallback_stats, set_fallback)
from intfa._paged_layout import paged_layout, precompile_paged
from intfa import _runtime
from intfa._runtime import auto_variant, cache_info, precompile

_runtime.use_packaged_kernels()  # the kernels a wheel ships, when it ships any

__version__ = _intfa.version()

_TORCH_NAMES = ("Quantized", "quantize", "attention_int8", "attention", "attention_varlen",
                "PagedKVCache", "paged_append", "paged_decode", "paged_prefill", "merge_states",
                "patch_sdpa",
                "AccuracyWarning", "accuracy_check_stats", "reset_accuracy_check_stats")
_MIN_TORCH = (2, 4)  # torch.library.custom_op and register_fake


def _torch_problem():
    """Why the torch functions are unavailable, or None when they are."""
    import re  # (here, not at the top: `dir(intfa)` lists the package's names only)
    try:
        import torch
    except ImportError as error:
        return f"PyTorch is not installed ({error})"
    found = re.match(r"(\d+)\.(\d+)", torch.__version__)
    if found is None or tuple(int(part) for part in found.groups()) < _MIN_TORCH:
        return f"PyTorch {torch.__version__} is older than 2.4"
    return None


TORCH_UNAVAILABLE = _torch_problem()
if TORCH_UNAVAILABLE is None:
    from intfa._torch import (Quantized, attention, attention_int8, attention_varlen,  # noqa: F401
                              quantize)
    from intfa._paged import (PagedKVCache, merge_states, paged_append,  # noqa: F401
                              paged_decode, paged_prefill)
    from intfa.integrations.sdpa import patch_sdpa  # noqa: F401
    from intfa._accuracy_guard import (AccuracyWarning, accuracy_check_stats,  # noqa: F401
                                       reset_accuracy_check_stats)


def __getattr__(name):
    # intfa.distributed (context parallelism) imports torch.distributed: only on first use, so
    # that `import intfa` stays light.
    if name == "distributed" and TORCH_UNAVAILABLE is None:
        import importlib
        return importlib.import_module("intfa.distributed")
    if name in _TORCH_NAMES or name == "distributed":
        raise ImportError(f"intfa.{name} needs PyTorch >= 2.4: {TORCH_UNAVAILABLE}. "
                          "intfa.cache_info() and intfa.precompile() work without it.")
    raise AttributeError(f"module 'intfa' has no attribute '{name}'")


__all__ = ["CacheError", "CompileError", "DriverError", "Error", "InternalError",
           "InvalidArgument", "NoDevice", "Unsupported", "auto_variant", "cache_info",
           "precompile",
           "paged_layout", "precompile_paged",
           "FallbackWarning", "fallback_stats", "get_fallback", "reset_fallback_stats",
           "set_fallback",
           "TORCH_UNAVAILABLE", *(_TORCH_NAMES if TORCH_UNAVAILABLE is None else ())]
