"""What ``intfa.attention`` computes, by torch's SDPA: its fallback for calls intfa does not serve.

The same contract as intfa's kernels: layout HND or NHD, GQA whatever enable_gqa says, causal
masks bottom-right aligned with zeros (and LSE -inf) for a query that sees no key, the LSE float32
[B, H_q, N_q], ``out`` written in place. Exact, in the inputs' dtype: SDPA runs it, and the LSE is
computed from the scores in float32, a block of query rows at a time.
"""
import math

import torch

# torch's own SDPA, never a patched one: intfa.patch_sdpa replaces the name in
# torch.nn.functional, and this builtin is the function behind that name.
builtin_sdpa = torch._C._nn.scaled_dot_product_attention

# The LSE's scores are materialised a block of query rows at a time: at most this many floats.
_LSE_BLOCK_FLOATS = 1 << 26


def attention(q, k, v, attn_mask, dropout_p, is_causal, scale, layout, return_lse, out,
              top_left=False):
    """intfa.attention's result for these arguments (`scale` None: 1/sqrt(D)); with `top_left`,
    a causal mask aligned as SDPA's (query i sees keys j <= i) for the integrations' fallback."""
    # torch's fused SDPA kernels assume 16-byte aligned data but do not check views at a storage
    # offset (pytorch/pytorch#183484): such inputs, which intfa refuses at launch, come here, and
    # SDPA would read them wrongly. A copy starts where the allocator puts it: aligned.
    if not torch.compiler.is_compiling():  # (a traced tensor has no address)
        q, k, v = (x.clone() if isinstance(x, torch.Tensor) and x.data_ptr() % 16 else x
                   for x in (q, k, v))
    if layout == "NHD":
        q, k, v = (x.transpose(1, 2) for x in (q, k, v))
    heads_q, heads_kv = q.shape[1], k.shape[1]
    if heads_q != heads_kv and heads_kv > 0 and heads_q % heads_kv == 0:
        group = heads_q // heads_kv
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    seq_q, seq_kv = q.shape[2], k.shape[2]
    mask = attn_mask
    hidden_rows = 0  # leading queries that see no key (bottom-right causal, seq_q > seq_kv)
    if is_causal:
        visible = torch.ones(seq_q, seq_kv, dtype=torch.bool, device=q.device)
        visible = visible.tril(diagonal=0 if top_left else seq_kv - seq_q)
        mask = visible if attn_mask is None else _and_mask(attn_mask, visible)
        if not top_left:
            hidden_rows = min(max(seq_q - seq_kv, 0), seq_q)
    if is_causal and attn_mask is None and (seq_q == seq_kv or seq_q > seq_kv and not top_left):
        # The rows that see keys form a square causal problem: SDPA's own causal path.
        result = q.new_zeros(q.shape[:3] + (v.shape[-1],))
        result[:, :, hidden_rows:] = builtin_sdpa(q[:, :, hidden_rows:], k, v,
                                                  dropout_p=dropout_p, is_causal=True,
                                                  scale=scale)
    else:
        result = builtin_sdpa(q, k, v, attn_mask=mask, dropout_p=dropout_p, scale=scale)
        if hidden_rows:
            result[:, :, :hidden_rows] = 0
    lse = _log_sum_exp(q, k, mask, scale) if return_lse else None
    if layout == "NHD":
        result = result.transpose(1, 2)
    if out is not None:
        result = out.copy_(result)
    elif not result.is_contiguous():
        result = result.contiguous()
    return (result, lse) if return_lse else result


def _and_mask(attn_mask, visible):
    """SDPA's `attn_mask` (bool: True takes part; else added to the scores) restricted to
    `visible`."""
    if attn_mask.dtype == torch.bool:
        return attn_mask & visible
    return attn_mask.masked_fill(~visible, -math.inf)


def _log_sum_exp(q, k, mask, scale):
    """log(sum_j exp(scale * q_i . k_j + mask_ij)) over the keys, float32 [B, H, N_q], HND
    inputs with K already repeated over the query heads; -inf where no key takes part."""
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    batch, heads, seq_q, _ = q.shape
    seq_kv = k.shape[2]
    rows = max(1, _LSE_BLOCK_FLOATS // max(1, batch * heads * seq_kv))
    keys = k.float().transpose(-1, -2)
    blocks = []
    for first in range(0, seq_q, rows):
        scores = torch.matmul(q[:, :, first:first + rows].float(), keys) * scale
        if mask is not None:
            block_mask = mask
            if mask.dim() >= 2 and mask.shape[-2] != 1:
                block_mask = mask[..., first:first + rows, :]
            if block_mask.dtype == torch.bool:
                scores = scores.masked_fill(~block_mask, -math.inf)
            else:
                scores = scores + block_mask.float()
        blocks.append(torch.logsumexp(scores, dim=-1))
    if not blocks:
        return q.new_empty((batch, heads, 0), dtype=torch.float32)
    return torch.cat(blocks, dim=2)
