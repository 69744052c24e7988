"""The fallback policy: what happens to a call intfa's kernels cannot serve. Needs no PyTorch.

"sdpa" runs torch's scaled_dot_product_attention instead, "error" raises the typed error (the
checks' InvalidArgument naming the argument, or Unsupported). The policy of a call is its
``fallback`` argument, else the process-wide default: ``set_fallback``, else the environment
variable INTFA_FALLBACK, else "sdpa". A fallback is never silent: each reason warns once per
process (FallbackWarning) and is counted (``fallback_stats``), so a benchmark can check that it
timed intfa.
"""
import os
import warnings

from intfa._errors import Unsupported, invalid_argument

POLICIES = ("sdpa", "error")
ENVIRONMENT_VARIABLE = "INTFA_FALLBACK"
_DEFAULT_POLICY = "sdpa"

# Why a call went to SDPA: the keys of fallback_stats() and what each warning says.
REASONS = {
    "attn_mask": "an attention mask (intfa masks only causally)",
    "dropout": "dropout_p > 0 (intfa has no dropout)",
    "dtype": "inputs that are not float16 or bfloat16",
    "head_dim": "a head dim that is not a multiple of 8 up to 256, or V's head dim differs from "
                "K's",
    "device": "tensors that are not on a CUDA device",
    "arch": "a GPU below compute capability 8.0 (intfa has kernels for sm_80 and newer)",
    "shape": "sizes intfa's kernels do not take (an empty sequence, beyond the grid's limits, "
             "broadcast batch or heads, not 3 or 4 dimensions)",
    "strides": "a head dim whose stride is not 1",
    "autograd": "inputs that need gradients (intfa is forward-only: run inference under "
                "torch.no_grad() or torch.inference_mode())",
    "causal_alignment": "SDPA's top-left causal mask with more queries than keys (intfa aligns "
                        "causal masks bottom-right)",
    "decode": "a decode-shaped call (few queries against a longer K/V), which SDPA serves faster "
              "until intfa's paged KV-cache kernels take it",
    "context_parallel": "a context-parallel call (diffusers' _parallel_config)",
    "intfa_error": "an error from intfa's runtime at launch",
}

_process_policy = None  # set_fallback's value; None: INTFA_FALLBACK, else "sdpa"
_counts = {}
_warned = set()


class FallbackWarning(UserWarning):
    """A call ran on torch's SDPA instead of intfa (given once per reason and process)."""


FallbackWarning.__module__ = "intfa"


def _check_policy(name, policy):
    if not isinstance(policy, str) or policy not in POLICIES:
        shown = policy if isinstance(policy, str) else repr(policy)
        raise invalid_argument(name, shown, "expected " + " or ".join(map(repr, POLICIES)))
    return policy


def set_fallback(policy):
    """Sets the process-wide fallback policy: "sdpa" or "error"; None goes back to INTFA_FALLBACK
    (else "sdpa"). Returns the previous setting (None where none was set), so that
    ``set_fallback(set_fallback("error"))`` restores it."""
    global _process_policy
    previous = _process_policy
    _process_policy = None if policy is None else _check_policy("policy", policy)
    return previous


def get_fallback():
    """The process-wide fallback policy now in force."""
    if _process_policy is not None:
        return _process_policy
    value = os.environ.get(ENVIRONMENT_VARIABLE, "")
    return _check_policy(ENVIRONMENT_VARIABLE, value) if value else _DEFAULT_POLICY


def resolve(policy):
    """A call's policy: its `fallback` argument when given, else the process-wide one."""
    return get_fallback() if policy is None else _check_policy("fallback", policy)


def check_argument(policy):
    """A `fallback` argument (None or a policy), checked where it is given, not where it is used."""
    return None if policy is None else _check_policy("fallback", policy)


def record(reason, detail="", stacklevel=5):
    """Counts one fallback for `reason` (a key of REASONS) and warns the first time it happens in
    this process (or since reset_fallback_stats); `stacklevel` as warnings.warn's, counted from
    here (5: the caller of intfa.attention). Inside a torch.compile'd graph the count is kept
    on each run of the graph; the warning is given where dynamo can run it after the graph
    (see warn), else only by eager calls."""
    _counts[reason] = _counts.get(reason, 0) + 1
    if reason not in _warned:
        _warned.add(reason)
        text = f"intfa: {REASONS[reason]}{': ' + detail if detail else ''}; torch's SDPA ran " \
               "instead. Warned once per reason and process; intfa.fallback_stats() counts " \
               "fallbacks; fallback='error' or INTFA_FALLBACK=error raises instead."
        warn(text, stacklevel)


def warn(text, stacklevel):
    """A FallbackWarning. Its own function so that torch.compile may run it after the graph
    rather than break the graph for it (intfa._torch lists it in dynamo's
    reorderable_logging_functions)."""
    warnings.warn(text, FallbackWarning, stacklevel=stacklevel + 1)


def unsupported(reason, detail=""):
    """The Unsupported error that policy "error" raises for `reason` where the checks have no
    more specific one."""
    return Unsupported(f"intfa: {REASONS[reason]}{': ' + detail if detail else ''} (fallback is "
                       "'error')", field=reason)


def fallback_stats():
    """How many calls went to SDPA in this process, by reason (a copy: {reason: count}); empty
    when intfa served every call."""
    return dict(_counts)


def reset_fallback_stats():
    """Clears the counts and lets each reason warn again."""
    _counts.clear()
    _warned.clear()
