"""Head dims between the kernels' own (64, 128, 256): served by the next one, as if zero channels
were appended (the C++ call reads them as zeros in place; pad_head_dim and padding_bytes remain
for benchmarks that compare with padded copies).

Why this is exact: a zero channel adds 0 to every q.k, so S = Q.K^T is unchanged, and the
output's extra channels are P.0 = 0 and are dropped; per-token scales are max|row| / 127, and
appending zeros leaves a row's max unchanged; K's channel mean (smoothing) of a zero channel is 0;
V's per-channel (or per-block) scale of a zero channel is 0, and the quantize kernel writes 0 for
a zero channel rather than dividing by its scale (templates/quantize), so P.V's extra channels
are 0 * 0. Only the softmax scale would change (1/sqrt(padded)), so the caller passes
1/sqrt(original head dim) explicitly.

Padded copies would cost reading Q, K and V and writing them padded, plus writing the padded
output and copying its first channels out (``padding_bytes``); reading the missing channels as
zeros costs nothing. Functions taking tensors use only tensor methods and torch's F.pad.
"""
import math

KERNEL_HEAD_DIMS = (64, 128, 256)
# A head dim is padded when it is a multiple of this: 16-byte rows of FP16/BF16, as the kernels
# read them. Other head dims fall back.
HEAD_DIM_MULTIPLE = 8


def kernel_head_dim(head_dim):
    """The kernel head dim that serves `head_dim` (itself for 64, 128 and 256; the next of them
    for another multiple of 8 up to 256), or None when no kernel does."""
    if head_dim in KERNEL_HEAD_DIMS:
        return head_dim
    if head_dim < 1 or head_dim % HEAD_DIM_MULTIPLE or head_dim > KERNEL_HEAD_DIMS[-1]:
        return None
    return next(d for d in KERNEL_HEAD_DIMS if d >= head_dim)


def softmax_scale(sm_scale, head_dim):
    """The scale to give the padded kernel: the caller's, else 1/sqrt(the ORIGINAL head dim)."""
    return sm_scale if sm_scale else 1.0 / math.sqrt(head_dim)


def pad_head_dim(tensor, kernel_dim):
    """`tensor` with zero channels appended up to `kernel_dim` (a new contiguous tensor)."""
    import torch.nn.functional as F  # loaded with torch already; here so this module needs none
    return F.pad(tensor, (0, kernel_dim - tensor.shape[-1]))


def padding_bytes(q_elements, kv_elements, head_dim, kernel_dim, element_bytes=2):
    """Bytes the padding moves beyond an unpadded call of the same kernel: Q, K, V read once and
    written padded, the output's padded copy read and its `head_dim` channels written. (The
    kernels themselves read and write `kernel_dim / head_dim` times what they would at `head_dim`;
    that is the kernel's cost, not the copies'.) `q_elements`, `kv_elements`: elements of Q and of
    K (V has as many) at `head_dim`."""
    if kernel_dim == head_dim:
        return 0
    widened = kernel_dim / head_dim
    inputs = (q_elements + 2 * kv_elements) * (1 + widened)
    output = q_elements * (widened + 1)
    return int(round((inputs + output) * element_bytes))
