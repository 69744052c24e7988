"""The checked arguments of one attention call, after its tensors, as named values: what the checks
(intfa._attention_checks) return, what a checked call keeps per signature, and what the plans and
the ops' implementations read, each field by its name.

The custom ops' schemas spell the same values as positional primitives (torch.library takes no
other kind; torch.compile graphs and CUDA-graph users rely on the op names and schemas, so they do
not change). intfa._ops converts between the two at the ops themselves and nowhere else.

``return_lse`` is none of these fields: it says what a call returns, not how it computes, and a
plan serves calls with and without it.
"""
from typing import List, NamedTuple, Optional

import torch


class AttentionArgs(NamedTuple):
    """``intfa.attention``'s and ``intfa.attention_varlen``'s arguments, checked and defaulted
    (intfa._checks.option: None, and only None, is the C++ default)."""

    is_causal: bool
    sm_scale: float  # 0.0: 1/sqrt(head_dim), as in the C API
    # The tensors' layout; packed sequences (attention_varlen) are seen as one batch of NHD rows.
    layout: str
    variant: str
    v_granularity: str
    smooth_k: bool
    p_encoding: str
    p_scale: str
    rotate: bool
    k_granularity: str  # attention_varlen: the default ("token"), its only one


class Int8AttentionArgs(NamedTuple):
    """``intfa.attention_int8``'s arguments after its tensors, checked and defaulted. Its variant
    and V's granularity are read from the tensors (INT8 V and the shape of its scales)."""

    is_causal: bool
    sm_scale: float  # 0.0: 1/sqrt(head_dim), as in the C API
    layout: str
    out_dtype: torch.dtype
    p_encoding: str
    p_scale: str
    # (block_m, block_n, warps, stages) overriding the tuned or heuristic tile config, or None.
    config: Optional[List[int]]
