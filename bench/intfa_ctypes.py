"""intfa's flat C API (include/intfa/intfa.h) through ctypes, for the benchmark scripts: the
structs, a loaded library, one problem's quantized tensors ready to launch, and the one-call
16-bit entry point (intfa_attention_forward_16bit)."""
import ctypes
import statistics

import torch

F16, BF16, I8, I4X2 = 0, 1, 2, 3
FULL_INT8, HALF_INT8 = 0, 1
ROTATE_OFF, ROTATE_ON, ROTATE_AUTO = 0, 1, 2  # intfa_rotation_t


class Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int), ("strides", ctypes.c_int64 * 4)]


class Shape(ctypes.Structure):
    _fields_ = [("batch", ctypes.c_int), ("heads", ctypes.c_int), ("seq", ctypes.c_int),
                ("head_dim", ctypes.c_int)]


class Problem(ctypes.Structure):
    _fields_ = [("batch", ctypes.c_int), ("heads_q", ctypes.c_int), ("heads_kv", ctypes.c_int),
                ("seq_q", ctypes.c_int), ("seq_kv", ctypes.c_int), ("head_dim", ctypes.c_int),
                ("causal", ctypes.c_int), ("variant", ctypes.c_int), ("qk_bits", ctypes.c_int)]


class AttentionTensors(ctypes.Structure):
    _fields_ = [("q", Tensor), ("k", Tensor), ("v", Tensor), ("out", Tensor),
                ("q_scale", ctypes.c_void_p), ("k_scale", ctypes.c_void_p),
                ("v_scale", ctypes.c_void_p), ("lse", ctypes.c_void_p)]


class Options(ctypes.Structure):
    _fields_ = [("softmax_scale", ctypes.c_double), ("p_encoding", ctypes.c_int),
                ("p_scale", ctypes.c_int), ("v_granularity", ctypes.c_int),
                ("block_m", ctypes.c_int), ("block_n", ctypes.c_int), ("warps", ctypes.c_int),
                ("stages", ctypes.c_int), ("k_granularity", ctypes.c_int)]


class QkTransforms(ctypes.Structure):
    """intfa_qk_transforms_t: K smoothing and the rotation of Q and K (0 or 1 each)."""
    _fields_ = [("smooth_k", ctypes.c_int), ("rotate", ctypes.c_int)]


class QuantizeOptions(ctypes.Structure):
    """intfa_quantize_options_t."""
    _fields_ = [("bits", ctypes.c_int), ("smooth_k_channel_mean", ctypes.c_void_p),
                ("k_channel_mean", ctypes.c_void_p), ("q_dot_k_mean", ctypes.c_void_p),
                ("k_channel_mean_heads", ctypes.c_int), ("rotate", ctypes.c_int),
                ("k_granularity", ctypes.c_int)]


class AttentionInputs(ctypes.Structure):
    """intfa_attention_inputs_t: 16-bit Q, K, V, the output and an optional LSE."""
    _fields_ = [("q", Tensor), ("k", Tensor), ("v", Tensor), ("out", Tensor),
                ("lse", ctypes.c_void_p)]


class Intfa:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        self.lib.intfa_last_error.restype = ctypes.c_char_p
        self.lib.intfa_v_int8_bytes.restype = ctypes.c_size_t
        self.lib.intfa_v_scale_count.restype = ctypes.c_size_t
        self.lib.intfa_k_scale_count.restype = ctypes.c_size_t
        self.lib.intfa_attention_forward_16bit.argtypes = [
            ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
            ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]

    def default_transforms(self):
        """The library's defaults for K smoothing and the rotation: (smooth_k, rotate), rotate an
        intfa_rotation_t (ROTATE_OFF, ROTATE_ON, ROTATE_AUTO)."""
        transforms = QkTransforms()
        self.lib.intfa_default_qk_transforms(ctypes.byref(transforms))
        return bool(transforms.smooth_k), transforms.rotate

    def check(self, status, what):
        if status != 0:
            raise RuntimeError(f"{what}: {self.lib.intfa_last_error().decode()}")

    @staticmethod
    def view(tensor, dtype):
        return Tensor(tensor.data_ptr(), dtype, (ctypes.c_int64 * 4)(*tensor.stride()))


def rotation(rotate, default):
    """An intfa_rotation_t from True, False, "auto" or None (`default`)."""
    if rotate is None:
        return int(default)
    return ROTATE_AUTO if rotate == "auto" else int(bool(rotate))


def time_ms(fn, repeats, warmup=5):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)


class IntfaAttention:
    """Quantized inputs and output buffers of one problem, ready to time. Q and K are quantized as
    intfa_attention_forward_16bit would (`smooth_k`, `rotate`; None: the library's defaults),
    except that automatic rotation (ROTATE_AUTO, the default), which the C steps do not take,
    rotates nothing here: the same on inputs without outlier channels in K; the one call
    (attention_16bit) rotates the heads that have them."""

    def __init__(self, lib, q, k, v, causal, variant, options, smooth_k=None, rotate=None):
        self.lib, self.causal, self.variant, self.options = lib, causal, variant, options
        default_smooth_k, default_rotate = lib.default_transforms()
        self.smooth_k = default_smooth_k if smooth_k is None else smooth_k
        self.rotate = rotation(rotate, default_rotate)
        if self.rotate == ROTATE_AUTO:
            self.rotate = ROTATE_OFF
        b, h, n, d = q.shape
        self.shape = (b, h, n, d)
        self.q, self.k, self.v = q, k, v
        dev = q.device
        self.q8 = torch.empty((b, h, n, d), dtype=torch.int8, device=dev)
        self.k8 = torch.empty((b, h, n, d), dtype=torch.int8, device=dev)
        self.qs = torch.empty((b, h, n), dtype=torch.float32, device=dev)
        # [B, H, N] per token, [B, H, ceil(N / 64)] per block (options.k_granularity).
        self.ks = torch.empty(lib.lib.intfa_k_scale_count(options.k_granularity, b, h, n),
                              dtype=torch.float32, device=dev)
        self.v8 = torch.empty(lib.lib.intfa_v_int8_bytes(b, h, n, d), dtype=torch.int8, device=dev)
        count = lib.lib.intfa_v_scale_count(options.v_granularity, b, h, n, d)
        self.vs = torch.empty(count, dtype=torch.float32, device=dev)
        self.out = torch.empty_like(q)
        # K smoothing's channel means and Q's LSE term (q . mean per row).
        self.k_mean = torch.empty((b, h, d), dtype=torch.float32, device=dev)
        self.q_dot_k_mean = torch.empty((b, h, n), dtype=torch.float32, device=dev)
        self.stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        self.problem = Problem(b, h, h, n, n, d, int(causal), variant, 8)
        v_view = Tensor()
        lib.lib.intfa_v_int8_view(ctypes.c_void_p(self.v8.data_ptr()), b, h, n, d,
                                  ctypes.byref(v_view))
        self.tensors = AttentionTensors(
            Intfa.view(self.q8, I8), Intfa.view(self.k8, I8),
            v_view if variant == FULL_INT8 else Intfa.view(v, F16), Intfa.view(self.out, F16),
            self.qs.data_ptr(), self.ks.data_ptr(), self.vs.data_ptr(), None)
        self.quantize()

    def quantize(self):
        b, h, n, d = self.shape
        shape = Shape(b, h, n, d)
        # K first: with smoothing, Q's pass reads K's means for the LSE term.
        k_options = QuantizeOptions(8, self.k_mean.data_ptr() if self.smooth_k else None, None,
                                    None, 0, int(self.rotate), self.options.k_granularity)
        q_options = QuantizeOptions(8, None, self.k_mean.data_ptr() if self.smooth_k else None,
                                    self.q_dot_k_mean.data_ptr() if self.smooth_k else None, h,
                                    int(self.rotate))
        for src, dst, scale, quantize_options in ((self.k, self.k8, self.ks, k_options),
                                                  (self.q, self.q8, self.qs, q_options)):
            self.lib.check(self.lib.lib.intfa_quantize_qk_with_options(
                ctypes.byref(shape), ctypes.byref(Intfa.view(src, F16)),
                ctypes.byref(Intfa.view(dst, I8)), ctypes.c_void_p(scale.data_ptr()),
                ctypes.byref(quantize_options), self.stream), "quantize_qk")
        if self.variant == FULL_INT8:
            self.lib.check(self.lib.lib.intfa_quantize_v(
                ctypes.byref(shape), ctypes.byref(Intfa.view(self.v, F16)),
                ctypes.c_void_p(self.v8.data_ptr()), ctypes.c_void_p(self.vs.data_ptr()),
                self.options.v_granularity, self.stream), "quantize_v")

    def attend(self):
        if self.smooth_k:
            self.lib.check(self.lib.lib.intfa_attention_forward_smoothed_k(
                ctypes.byref(self.problem), ctypes.byref(self.tensors),
                ctypes.c_void_p(self.q_dot_k_mean.data_ptr()), None, self.stream,
                ctypes.byref(self.options)), "attention_forward_smoothed_k")
            return
        self.lib.check(self.lib.lib.intfa_attention_forward(
            ctypes.byref(self.problem), ctypes.byref(self.tensors), self.stream,
            ctypes.byref(self.options)), "attention_forward")


def attention_16bit(lib, q, k, v, causal, variant, options, smooth_k=None, rotate=None,
                    lse=None):
    """intfa_attention_forward_16bit (what intfa.attention runs) on FP16 [B, H, N, D] q, k, v:
    the output (and `lse`, a float32 [B, H, N] tensor, when given). `smooth_k`, `rotate`: None
    for the library's defaults."""
    b, h, n, d = q.shape
    _, h_kv, n_kv, _ = k.shape
    problem = Problem(b, h, h_kv, n, n_kv, d, int(causal), variant, 8)
    default_smooth_k, default_rotate = lib.default_transforms()
    transforms = QkTransforms(int(default_smooth_k if smooth_k is None else smooth_k),
                              rotation(rotate, default_rotate))
    size = ctypes.c_size_t()
    lib.check(lib.lib.intfa_attention_workspace_bytes(ctypes.byref(problem), None,
                                                      ctypes.byref(size)), "workspace_bytes")
    workspace = torch.empty(size.value + 256, dtype=torch.uint8, device=q.device)
    aligned = (workspace.data_ptr() + 255) // 256 * 256
    out = torch.empty_like(q)
    inputs = AttentionInputs(Intfa.view(q, F16), Intfa.view(k, F16), Intfa.view(v, F16),
                             Intfa.view(out, F16), lse.data_ptr() if lse is not None else None)
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    lib.check(lib.lib.intfa_attention_forward_16bit(
        ctypes.byref(problem), ctypes.byref(inputs), None, ctypes.c_void_p(aligned), size.value,
        stream, ctypes.byref(options), ctypes.byref(transforms)), "attention_forward_16bit")
    return out
