"""The checked arguments of one attention call, after its tensors, as named values: what the checks
(intfa._attention_checks) return, what a checked call keeps per signature, and what the plans and
the ops' implementations read, each field by its name.

The numerics options are one field, ``numerics``: ((name, value), ...) in the list's order
(intfa._checks.check_numerics), the options the entry point takes, checked and defaulted. The
plans hand it to C++ as a dict; the custom ops' schemas carry it as one ``str numerics``
(numerics_text, parsed back by numerics_of_text), so that a new option changes no schema.

The custom ops' schemas spell the other values as positional primitives (torch.library takes no
other kind). intfa._ops converts between the two at the ops themselves and nowhere else.

``return_lse`` is none of these fields: it says what a call returns, not how it computes, and a
plan serves calls with and without it.
"""
from typing import List, NamedTuple, Optional, Tuple

import torch

from intfa._errors import invalid_argument


class AttentionArgs(NamedTuple):
    """``intfa.attention``'s and ``intfa.attention_varlen``'s arguments, checked and defaulted
    (intfa._checks.option: None, and only None, is the C++ default)."""

    is_causal: bool
    sm_scale: float  # 0.0: 1/sqrt(head_dim), as in the C API
    # The tensors' layout; packed sequences (attention_varlen) are seen as one batch of NHD rows.
    layout: str
    variant: str
    smooth_k: bool
    rotate: str  # "off", "on" or "auto"
    # ((name, value), ...) in the list's order; attention_varlen has no k_granularity (its K
    # stays per token, the default).
    numerics: Tuple[Tuple[str, str], ...]


class Int8AttentionArgs(NamedTuple):
    """``intfa.attention_int8``'s arguments after its tensors, checked and defaulted. Its variant
    and V's granularity are read from the tensors (INT8 V and the shape of its scales)."""

    is_causal: bool
    sm_scale: float  # 0.0: 1/sqrt(head_dim), as in the C API
    layout: str
    out_dtype: torch.dtype
    # ((name, value), ...): the options attention_int8 takes (P's), in the list's order.
    numerics: Tuple[Tuple[str, str], ...]
    # (block_m, block_n, warps, stages) overriding the tuned or heuristic tile config, or None.
    config: Optional[List[int]]


def numerics_text(numerics):
    """`numerics` ((name, value), ...) as the ops' schemas carry it: "p_encoding=u8,p_scale=tile"
    ("" for none: every option at its default)."""
    return ",".join(f"{name}={value}" for name, value in numerics)


def numerics_of_text(text):
    """numerics_text's `text` as ((name, value), ...) again. The names and values are checked by
    C++ (_intfa.numerics_from_dict) when the plan is made."""
    numerics = tuple(tuple(item.split("=", 1)) for item in text.split(",")) if text else ()
    if not all(len(item) == 2 for item in numerics):
        raise invalid_argument("numerics", repr(text), "expected name=value items joined by ','")
    return numerics
