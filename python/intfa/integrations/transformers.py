"""``attn_implementation="intfa"`` for transformers models.

    import intfa.integrations.transformers
    intfa.integrations.transformers.register()            # once, before the model runs
    model = AutoModelForCausalLM.from_pretrained(name, dtype=torch.bfloat16,
                                                 attn_implementation="intfa")
    # or model.set_attn_implementation("intfa")

``register`` adds an attention function to transformers' ``AttentionInterface`` (q, k, v
[B, H, N, D], returns [B, N, H, D] and None) and transformers' ``sdpa_mask`` to
``AttentionMaskInterface`` under the same name: without a mask function, transformers hands a
custom attention function no mask at all, and padding would be ignored. So the function sees
what transformers' SDPA path sees: no mask where the mask is plain causal (``module.is_causal``,
or the ``is_causal`` the model passes; not for one query) or absent, else a mask. Causal
alignment is SDPA's (top-left: the keys past the last query's position are dropped, as
transformers' own SDPA path does). Masks (padding, sliding windows, chunked prefill after cached
tokens, static caches), dropout (training), inputs that need gradients and decode steps
(``decode_seq_q``) run transformers' own ``sdpa_attention_forward`` with the call's arguments.
"""
import torch

from intfa import _torch
from intfa._errors import invalid_argument
from intfa.integrations import _client

NAME = "intfa"


def register(name=NAME, *, fallback=None, decode_seq_q=_client.DEFAULT_DECODE_SEQ_Q, **options):
    """Registers intfa as ``attn_implementation=name`` with these intfa.attention options
    (``variant``, ``smooth_k``, ...; checked now). ``fallback``: the policy for what intfa does
    not serve (None: the process-wide one); ``decode_seq_q``: calls with at most this many
    queries against a longer cache run SDPA (0: none do). Registering a name again replaces its
    functions. Returns `name`."""
    if not isinstance(name, str) or not name:
        raise invalid_argument("name", repr(name), "expected a non-empty str")
    settings = _client.Settings(fallback, decode_seq_q, **options)
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from transformers.masking_utils import sdpa_mask
    AttentionInterface.register(name, attention_function(settings, sdpa_attention_forward))
    AttentionMaskInterface.register(name, sdpa_mask)
    return name


def attention_function(settings, sdpa_attention_forward):
    """The AttentionInterface function: intfa, else transformers' `sdpa_attention_forward`."""

    def intfa_attention_forward(module, query, key, value, attention_mask, dropout=0.0,
                                scaling=None, is_causal=None, **kwargs):
        causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
        # As transformers' SDPA path: causal only without a mask, and not for one query.
        causal = bool(causal) and attention_mask is None and query.shape[2] > 1
        if kwargs.get("position_bias") is not None:  # an additive mask (T5-style models)
            served = _client.unserved("attn_mask", settings)
        elif query.shape[-1] != value.shape[-1]:
            served = _client.unserved("head_dim", settings)
        else:
            # intfa writes the [B, N, H, D] output transformers returns, through its HND view.
            batch, heads, seq_q, head_dim = query.shape
            result = torch.empty((batch, seq_q, heads, head_dim), dtype=query.dtype,
                                 device=query.device)
            served = _client.attend(settings, query, key, value, attention_mask, dropout, causal,
                                    scaling, "HND", top_left_causal=True,
                                    out=result.transpose(1, 2))
        if type(served) is not _torch.Unserved:
            return result, None
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout,
                                      scaling=scaling, is_causal=is_causal, **kwargs)

    return intfa_attention_forward
