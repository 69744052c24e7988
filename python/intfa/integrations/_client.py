"""What the integrations share: their settings, checked once when installed; one call's route
(intfa, or the client's own SDPA call); SDPA's causal alignment on intfa's kernels."""
import inspect

from intfa import _accuracy_guard, _checks, _fallback, _torch
from intfa._errors import invalid_argument

# The options of intfa.attention an integration forwards (variant, v_granularity, smooth_k,
# p_encoding, p_scale, check, and any numerics option added later): its keyword-only arguments
# less those the integration sets on each call.
_SET_PER_CALL = {"sm_scale", "layout", "return_lse", "out", "fallback"}
OPTION_NAMES = tuple(name for name, parameter in
                     inspect.signature(_torch.attention).parameters.items()
                     if parameter.kind is parameter.KEYWORD_ONLY and name not in _SET_PER_CALL)

# Decode-shaped calls (at most this many queries against a longer K/V) go to SDPA: intfa would
# quantize all of K and V again on every step for one query's worth of work, where SDPA reads
# them once. intfa's paged KV-cache kernels (intfa.paged_*) are to serve decode; until then SDPA
# does. 0 sends every call to intfa.
DEFAULT_DECODE_SEQ_Q = 16


class Settings:
    """One integration's options: intfa.attention's numerics `options`, the `fallback` policy
    (None: the process-wide one, read at each call) and `decode_seq_q`."""

    __slots__ = ("options", "fallback", "decode_seq_q")

    def __init__(self, fallback=None, decode_seq_q=DEFAULT_DECODE_SEQ_Q, **options):
        for name in options:
            if name not in OPTION_NAMES:
                raise invalid_argument(name, repr(options[name]),
                                       "expected one of intfa.attention's options: " +
                                       ", ".join(OPTION_NAMES))
        for name, value in options.items():
            if name in _checks.DEFAULTS:  # a numerics option (None, and only None, the default)
                _checks.option(name, value)
        _accuracy_guard.check_argument(options.get("check"))
        if not _checks.is_int(decode_seq_q) or decode_seq_q < 0:
            raise invalid_argument("decode_seq_q", repr(decode_seq_q), "expected an int >= 0")
        self.options = options
        self.fallback = _fallback.check_argument(fallback)
        self.decode_seq_q = decode_seq_q


def unserved(reason, settings):
    """The client runs its own SDPA call for `reason` (counted, warned once); policy "error"
    raises instead."""
    if _fallback.resolve(settings.fallback) == "error":
        raise _fallback.unsupported(reason)
    _fallback.record(reason)
    return _torch.Unserved(reason)


def attend(settings, q, k, v, attn_mask, dropout_p, is_causal, scale, layout, *,
           top_left_causal, return_lse=False, out=None):
    """intfa.attention on a client's call, or _torch.Unserved (counted) when the client's own
    SDPA call is to run. `top_left_causal`: the client's causal mask is SDPA's (query i sees keys
    j <= i), not intfa's bottom-right one; they differ only when seq_q != seq_kv."""
    seq_dim = 2 if layout == "HND" else 1
    seq_q, seq_kv = q.shape[seq_dim], k.shape[seq_dim]
    if attn_mask is None and dropout_p == 0.0:
        if seq_q <= settings.decode_seq_q and seq_kv > seq_q:
            # Routed, not refused: SDPA serves it whatever the policy (decode_seq_q=0 stops it).
            _fallback.record("decode", f"{seq_q} queries against {seq_kv} keys")
            return _torch.Unserved("decode")
        if is_causal and top_left_causal and seq_q != seq_kv:
            if seq_q > seq_kv:
                return unserved("causal_alignment", settings)
            # Top-left, the keys past the last query's index are seen by no query: without them
            # the mask is the square one, which both alignments agree on.
            k, v = (x[:, :, :seq_q] if layout == "HND" else x[:, :seq_q] for x in (k, v))
    return _torch._attend(q, k, v, attn_mask, dropout_p, is_causal, scale, layout=layout,
                          return_lse=return_lse, out=out, fallback=settings.fallback,
                          **settings.options)
