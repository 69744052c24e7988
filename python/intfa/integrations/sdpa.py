"""``patch_sdpa``: torch.nn.functional.scaled_dot_product_attention runs intfa, ComfyUI-style.

    with intfa.patch_sdpa(variant="half_int8"):
        image = pipeline(prompt)          # every F.scaled_dot_product_attention call
    patch = intfa.patch_sdpa()            # or until patch.undo()

The replacement keeps SDPA's contract: [B, H, N, D] (or [H, N, D]) tensors, a top-left causal
mask, GQA only with enable_gqa, the scale. What intfa does not serve (masks, dropout, FP32, ...)
runs the function that was there before the patch, with the call's own arguments. Code that
bound the function before (``from torch.nn.functional import scaled_dot_product_attention``) keeps
the original.
"""
import torch.nn.functional as F

from intfa import _torch
from intfa._errors import InvalidArgument
from intfa.integrations import _client


class SdpaPatch:
    """An installed patch. A context manager (undone on exit); ``undo()`` undoes it now.
    ``function`` is the replacement, ``previous`` the function it replaced."""

    def __init__(self, settings):
        self.previous = F.scaled_dot_product_attention
        self.function = _replacement(settings, self.previous)
        F.scaled_dot_product_attention = self.function
        self.active = True

    def undo(self):
        """Puts the previous function back (patches undo last-in, first-out)."""
        if not self.active:
            return
        if F.scaled_dot_product_attention is not self.function:
            raise InvalidArgument(
                "intfa.patch_sdpa: torch.nn.functional.scaled_dot_product_attention was replaced "
                "again after this patch; undo that first (patches undo last-in, first-out)",
                field="torch.nn.functional.scaled_dot_product_attention",
                value=repr(F.scaled_dot_product_attention))
        F.scaled_dot_product_attention = self.previous
        self.active = False

    def __enter__(self):
        return self

    def __exit__(self, *exception):
        self.undo()
        return False


def patch_sdpa(*, fallback=None, decode_seq_q=_client.DEFAULT_DECODE_SEQ_Q, **options):
    """Replaces torch.nn.functional.scaled_dot_product_attention by intfa.attention with these
    options (``variant``, ``smooth_k``, ...; checked now); returns the SdpaPatch (a context
    manager). ``fallback``: the policy for what intfa does not serve (None: the process-wide
    one); ``decode_seq_q``: calls with at most this many queries against a longer K/V run the
    previous function (0: none do)."""
    return SdpaPatch(_client.Settings(fallback, decode_seq_q, **options))


def _replacement(settings, previous):
    def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                     is_causal=False, scale=None, enable_gqa=False):
        result = _attend(settings, query, key, value, attn_mask, dropout_p, is_causal, scale,
                         enable_gqa)
        if type(result) is not _torch.Unserved:
            return result
        extra = {"enable_gqa": True} if enable_gqa else {}  # (torch < 2.5 has no such argument)
        return previous(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p,
                        is_causal=is_causal, scale=scale, **extra)

    scaled_dot_product_attention.__doc__ = (
        "torch.nn.functional.scaled_dot_product_attention on intfa's kernels (intfa.patch_sdpa)")
    return scaled_dot_product_attention


def _attend(settings, query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa):
    """intfa's result for one SDPA call, or _torch.Unserved for the previous function."""
    dims = getattr(query, "dim", None)
    if dims is None or any(getattr(x, "dim", None) is None for x in (key, value)):
        return _torch.Unserved("shape")  # not tensors: the previous function's error
    dims = query.dim()
    if dims not in (3, 4) or key.dim() != dims or value.dim() != dims:
        return _client.unserved("shape", settings)
    if dims == 3:  # [H, N, D]: one batch
        query, key, value = (x.unsqueeze(0) for x in (query, key, value))
    if (key.shape[0] != query.shape[0] or value.shape[:-1] != key.shape[:-1]):
        return _client.unserved("shape", settings)  # broadcast batches
    if key.shape[1] != query.shape[1] and not enable_gqa:
        return _torch.Unserved("shape")  # SDPA refuses it: the previous function says so
    result = _client.attend(settings, query, key, value, attn_mask, dropout_p, bool(is_causal),
                            scale, "HND", top_left_causal=True)
    if dims == 3 and type(result) is not _torch.Unserved:
        result = result.squeeze(0)
    return result
