"""An optional check of a call's accuracy (issue 46): a few sampled query rows of intfa's output
against a float32 attention of the caller's own 16-bit inputs, with a warning when the sampled
error is far above what the call's numerics give on well-behaved inputs.

Quantization error depends on the inputs: on N(0,1) the default full INT8 is at most 1.6%
relative L2 against float64, while queries and keys with a few large channels can take it to
3-5% (docs/python.md, "Accuracy check"). A model whose activations are of that kind gets no
error from intfa, only a worse answer; this check makes it visible. It costs a float32 attention
of two sampled heads' rows and one read on the host (a sync), so it is off by default: ``intfa.attention(..., check=True)``, or INTFA_CHECK=1 for every call of
``intfa.attention`` and of the clients (transformers, diffusers, ``patch_sdpa``). It does nothing
inside a torch.compile'd graph or a CUDA graph capture (it reads the error on the host).
"""
import math
import os
import random
import threading
import warnings

import torch

from intfa import _checks, _tensors
from intfa._errors import invalid_argument

ENVIRONMENT_VARIABLE = "INTFA_CHECK"
# Relative L2 against float64 of the original inputs on N(0,1) inputs, d = 64..256, N = 1k..16k,
# causal off and on (bench/RESULTS.md; H100 and H200): the highest value measured, rounded up.
NORMAL_INPUT_BOUNDS = {
    ("full_int8", "token"): 0.016,
    ("full_int8", "block"): 0.017,
    ("half_int8", "token"): 0.010,
    ("half_int8", "block"): 0.012,
}
# "Far above": a sampled error this many times the bound warns. N(0,1) inputs stay below the bound
# itself; 4 channels of Q and K 10x larger give 2.9-3.6% with the default numerics (RESULTS.md,
# "Accuracy on the inputs real models produce"), above 1.75 x 1.6%.
FAR_ABOVE = 1.75
# Two random (batch, head) pairs, every query row of each unless their scores would pass this many
# values (then a random subset of rows): at most 64 MB of FP32 scores per head.
SAMPLED_HEADS = 2
SCORES_PER_HEAD = 1 << 24

_random = random.Random()  # its own: a check does not move the caller's random state
_lock = threading.Lock()
_stats = {"checked": 0, "warned": 0, "worst": 0.0, "last": None}
_warned = set()


class AccuracyWarning(UserWarning):
    """intfa's output on these inputs is far less accurate than its numerics are on N(0,1)
    (given once per numerics and process; ``intfa.accuracy_check_stats()`` has the figures)."""


AccuracyWarning.__module__ = "intfa"


def check_argument(check):
    """A `check` argument, refused before the call runs unless None or a bool."""
    if check is not None and not isinstance(check, bool):
        raise invalid_argument("check", repr(check), "expected True, False or None")


def requested(check):
    """Whether a call checks: its `check` argument when given (a bool), else INTFA_CHECK."""
    if check is None:
        value = os.environ.get(ENVIRONMENT_VARIABLE, "").strip().lower()
        if value in ("", "0", "false", "off", "no"):
            return False
        if value in ("1", "true", "on", "yes"):
            return True
        raise invalid_argument(ENVIRONMENT_VARIABLE, value, "expected 1 or 0")
    check_argument(check)
    return check


def possible():
    """False where the check cannot read a value on the host: while torch.compile traces and
    while a CUDA graph is being captured."""
    if torch.compiler.is_compiling():
        return False
    return not (torch.cuda.is_available() and torch.cuda.is_current_stream_capturing())


def bound(variant, k_granularity):
    return NORMAL_INPUT_BOUNDS[(variant, _checks.option("k_granularity", k_granularity))]


def sample_rows(batch, heads_q, seq_q, seq_kv):
    """The rows a check compares: every query row of SAMPLED_HEADS random (batch, head) pairs, or
    a random subset of them where a head's scores would exceed SCORES_PER_HEAD values. Whole heads
    rather than scattered rows: on the inputs the check is for, a few rows (near-ties in a sharp
    softmax) carry most of the error, and a small scattered sample misses them."""
    pairs = {(_random.randrange(batch), _random.randrange(heads_q)) for _ in range(SAMPLED_HEADS)}
    per_head = max(16, min(seq_q, SCORES_PER_HEAD // max(seq_kv, 1)))
    rows = []
    for b, h in sorted(pairs):
        chosen = range(seq_q) if per_head >= seq_q else sorted(_random.sample(range(seq_q),
                                                                              per_head))
        rows.extend((b, h, i) for i in chosen)
    return rows


def sampled_error(q, k, v, out, is_causal, sm_scale, layout, rows=None):
    """Relative L2 of `out` against a float32 attention of q, k and v over query rows `rows` (a
    list of (batch, head, row); None: sample_rows). Causal masks are bottom-right aligned, as
    intfa's; GQA maps query head h to key head h // (H_q / H_kv); rows that see no key are
    skipped. One batched attention per (batch, head) and one read on the host. None when no
    sampled row sees a key."""
    if layout == "NHD":
        q, k, v, out = (t.transpose(1, 2) for t in (q, k, v, out))
    batch, heads_q, seq_q, head_dim = q.shape
    heads_kv, seq_kv = k.shape[1], k.shape[2]
    scale = sm_scale if sm_scale is not None else 1.0 / math.sqrt(head_dim)
    if rows is None:
        rows = sample_rows(batch, heads_q, seq_q, seq_kv)
    by_head = {}
    for b, h, i in rows:
        by_head.setdefault((b, h), []).append(i)
    sums = []
    for (b, h), indices in by_head.items():
        index = torch.tensor(indices, device=q.device)
        kv_head = h // (heads_q // heads_kv)
        scores = (q[b, h].index_select(0, index).float()
                  @ k[b, kv_head].float().transpose(0, 1)) * scale
        if is_causal:
            keys = torch.arange(seq_kv, device=q.device)
            scores = scores.masked_fill(keys[None, :] > index[:, None] + (seq_kv - seq_q),
                                        float("-inf"))
        seen = torch.isfinite(scores).any(dim=1)
        reference = torch.softmax(scores, dim=1).nan_to_num(0.0) @ v[b, kv_head].float()
        got = out[b, h].index_select(0, index).float()
        sums.append(torch.stack([((got - reference) ** 2)[seen].sum(),
                                 (reference ** 2)[seen].sum()]))
    difference, reference_norm = torch.stack(sums).sum(dim=0).tolist()
    if reference_norm == 0.0:
        return None
    return math.sqrt(difference / reference_norm)


def check(q, k, v, out, *, is_causal, sm_scale, layout, variant, k_granularity, rotate,
          stacklevel):
    """Samples the call's error, counts it, and warns once per numerics when it is far above the
    numerics' bound on N(0,1). Returns the sampled error (None when no sampled row sees a key)."""
    batch, heads_q, seq_q, _ = _tensors.bhnd(q, layout)
    rows = sample_rows(batch, heads_q, seq_q, _tensors.bhnd(k, layout)[2])
    error = sampled_error(q, k, v, out, is_causal, sm_scale, layout, rows=rows)
    if error is None:
        return None
    granularity = _checks.option("k_granularity", k_granularity)  # None: the default
    limit = bound(variant, granularity)
    key = (variant, k_granularity, rotate)
    with _lock:
        _stats["checked"] += 1
        _stats["last"] = error
        _stats["worst"] = max(_stats["worst"], error)
        far_above = error > FAR_ABOVE * limit
        first = far_above and key not in _warned
        if far_above:
            _stats["warned"] += 1
            _warned.add(key)
    if first:
        # rotate is "off", "on" or "auto" (args.rotate); "auto" leaves a head whose outlier
        # channels are in Q alone unrotated.
        hint = "" if rotate == "on" else " rotate=True (outlier channels in Q or K) or"
        heads = len({(b, h) for b, h, _ in rows})
        warnings.warn(
            f"intfa: the sampled relative L2 error of this call ({100 * error:.2f}%, {len(rows)} "
            f"query rows of {heads} head(s) against float32 attention of the same inputs) is "
            f"{error / limit:.1f}x what {variant} with K per {granularity} gives on "
            f"N(0,1) inputs ({100 * limit:.1f}%): these inputs quantize badly. Try{hint} "
            "variant='half_int8', or SDPA for this layer. Warned once per numerics and "
            "process; intfa.accuracy_check_stats() counts the checks.",
            AccuracyWarning, stacklevel=stacklevel + 1)
    return error


def accuracy_check_stats():
    """The accuracy checks of this process (``check=True`` or INTFA_CHECK=1): how many calls were
    checked, how many of them were far above their numerics' bound on N(0,1) (each warned the
    first time), and the worst and the last sampled relative L2 error (a copy)."""
    with _lock:
        return dict(_stats)


def reset_accuracy_check_stats():
    """Clears the counts and lets each warning be given again."""
    with _lock:
        _stats.update(checked=0, warned=0, worst=0.0, last=None)
        _warned.clear()
