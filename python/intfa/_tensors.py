"""The torch layer's tensors: layouts as (batch, heads, seq, head_dim) views, the INT8 V layout and
its scales, the device and stream of a launch, and the outputs each op allocates (shared by the
ops' real and fake implementations, so that both give the same shapes).

Layouts: "HND" tensors are [batch, heads, seq, head_dim] (SDPA's), "NHD" ones
[batch, seq, heads, head_dim] (FlashAttention's). Only the head dim must have stride 1.
"""
import contextlib

import torch

from intfa import _intfa

LAYOUTS = ("HND", "NHD")
FLOAT_NAMES = {torch.float16: "f16", torch.bfloat16: "bf16"}
FLOAT_DTYPES = tuple(FLOAT_NAMES)
# The INT8 V layout pads the sequence to this many tokens (v_padded_seq(1) is one block); the
# fake implementations need it as arithmetic that symbolic shapes go through.
V_TOKEN_BLOCK = _intfa.v_padded_seq(1)


# --- shapes and views -----------------------------------------------------------------------

def bhnd(tensor, layout):
    """(batch, heads, seq, head_dim) of a tensor in `layout`."""
    b, x, y, d = tensor.shape
    return (b, x, y, d) if layout == "HND" else (b, y, x, d)


def bhnd_strides(tensor, layout):
    s = tensor.stride()
    return (s[0], s[1], s[2], s[3]) if layout == "HND" else (s[0], s[2], s[1], s[3])


def v_int8_strides(v8):
    # [B, H, D, N_pad] in memory; the C++ view orders strides (batch, heads, seq, head_dim).
    s = v8.stride()
    return (s[0], s[1], s[3], s[2])


def padded_seq(seq_kv):
    return (seq_kv + V_TOKEN_BLOCK - 1) // V_TOKEN_BLOCK * V_TOKEN_BLOCK


def v_scale_shape(granularity, batch, heads_kv, seq_kv, head_dim):
    if granularity == "tensor":
        return (batch, heads_kv)
    if granularity == "channel":
        return (batch, heads_kv, head_dim)
    return (batch, heads_kv, padded_seq(seq_kv) // V_TOKEN_BLOCK, head_dim)


def granularity_of(v_scale):
    return {2: "tensor", 3: "channel", 4: "block"}[v_scale.dim()]


# --- the device and stream of a launch ------------------------------------------------------

# The current stream's handle in one C call where torch has it (a private function, but the one
# torch.compile's own generated code and Triton call for this): torch.cuda.current_stream() costs
# about 2 us more per call.
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def stream(device):
    if _raw_stream is not None:
        return _raw_stream(device.index)
    return torch.cuda.current_stream(device).cuda_stream


def on(device):
    """The CUDA device context for launches on `device`: nothing to switch (and no cost) when it
    is already the current device."""
    if torch.cuda.current_device() == device.index:
        return contextlib.nullcontext()
    return torch.cuda.device(device)


# --- outputs, shared by the real and the fake implementations -------------------------------

def empty_qk(x, layout, smooth_k, k_mean=None):
    # The third output: K smoothing's channel means [B, H, D], or for Q of a smoothed K (k_mean
    # given) q . k_mean per row [B, H, N]; empty otherwise (an op cannot return None in a tuple).
    b, h, n, d = bhnd(x, layout)
    extra = (b, h, d) if smooth_k else (b, h, n) if k_mean is not None else (0,)
    return (torch.empty(x.shape, dtype=torch.int8, device=x.device),
            torch.empty((b, h, n), dtype=torch.float32, device=x.device),
            torch.empty(extra, dtype=torch.float32, device=x.device))


def empty_v(shape, granularity, device):
    """The INT8 V layout and V's scales for V of (batch, heads, seq, head_dim) `shape`."""
    b, h, n, d = shape
    return (torch.empty((b, h, d, padded_seq(n)), dtype=torch.int8, device=device),
            torch.empty(v_scale_shape(granularity, b, h, n, d), dtype=torch.float32,
                        device=device))


# Named tensors (a prototype) are gone from recent torch releases, Tensor.has_names with them.
_NAMED_TENSORS = hasattr(torch.Tensor, "has_names")


def empty_output(q, dtype):
    """A dense tensor of q's shape in `dtype` on q's device: what torch.empty(q.shape, ...)
    makes, with a third of its argument parsing (about 2 us less per call on the CPU). Named
    tensors keep the old way: empty_like would copy q's names onto the output."""
    if _NAMED_TENSORS and q.has_names():
        return torch.empty(q.shape, dtype=dtype, device=q.device)
    return torch.empty_like(q, dtype=dtype, memory_format=torch.contiguous_format)


def empty_lse(q, layout):
    """The natural-log LSE of each query, float32 [B, H_q, N_q], on q's device."""
    b, heads_q, seq_q, _ = bhnd(q, layout)
    return torch.empty((b, heads_q, seq_q), dtype=torch.float32, device=q.device)


def empty_attention(q, layout, out_dtype, return_lse):
    b, h, n, _ = bhnd(q, layout)
    out = torch.empty(q.shape, dtype=out_dtype, device=q.device)
    lse_shape = (b, h, n) if return_lse else (0,)
    return out, torch.empty(lse_shape, dtype=torch.float32, device=q.device)


def empty_varlen_attention(q, return_lse):
    # out [total_q, H_q, D]; the LSE [H_q, total_q], as FlashAttention's varlen functions.
    total, heads, _ = q.shape
    lse_shape = (heads, total) if return_lse else (0,)
    return (torch.empty(q.shape, dtype=q.dtype, device=q.device),
            torch.empty(lse_shape, dtype=torch.float32, device=q.device))


def no_lse(q):
    """The LSE output of an op called without return_lse (an op cannot return None in a
    tuple)."""
    return torch.empty((0,), dtype=torch.float32, device=q.device)
