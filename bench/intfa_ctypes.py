"""intfa's flat C API (include/intfa/intfa.h) through ctypes, for the benchmark scripts: the
structs, a loaded library, and one problem's quantized tensors ready to launch."""
import ctypes
import statistics

import torch

F16, BF16, I8, I4X2 = 0, 1, 2, 3
FULL_INT8, HALF_INT8 = 0, 1


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
                ("stages", ctypes.c_int)]


class Intfa:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        self.lib.intfa_last_error.restype = ctypes.c_char_p
        self.lib.intfa_v_int8_bytes.restype = ctypes.c_size_t
        self.lib.intfa_v_scale_count.restype = ctypes.c_size_t

    def check(self, status, what):
        if status != 0:
            raise RuntimeError(f"{what}: {self.lib.intfa_last_error().decode()}")

    @staticmethod
    def view(tensor, dtype):
        return Tensor(tensor.data_ptr(), dtype, (ctypes.c_int64 * 4)(*tensor.stride()))


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
    """Quantized inputs and output buffers of one problem, ready to time."""

    def __init__(self, lib, q, k, v, causal, variant, options):
        self.lib, self.causal, self.variant, self.options = lib, causal, variant, options
        b, h, n, d = q.shape
        self.shape = (b, h, n, d)
        self.q, self.k, self.v = q, k, v
        dev = q.device
        self.q8 = torch.empty((b, h, n, d), dtype=torch.int8, device=dev)
        self.k8 = torch.empty((b, h, n, d), dtype=torch.int8, device=dev)
        self.qs = torch.empty((b, h, n), dtype=torch.float32, device=dev)
        self.ks = torch.empty((b, h, n), dtype=torch.float32, device=dev)
        self.v8 = torch.empty(lib.lib.intfa_v_int8_bytes(b, h, n, d), dtype=torch.int8, device=dev)
        count = lib.lib.intfa_v_scale_count(options.v_granularity, b, h, n, d)
        self.vs = torch.empty(count, dtype=torch.float32, device=dev)
        self.out = torch.empty_like(q)
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
        for src, dst, scale in ((self.q, self.q8, self.qs), (self.k, self.k8, self.ks)):
            self.lib.check(self.lib.lib.intfa_quantize_qk(
                ctypes.byref(shape), ctypes.byref(Intfa.view(src, F16)),
                ctypes.byref(Intfa.view(dst, I8)), ctypes.c_void_p(scale.data_ptr()), 8,
                self.stream), "quantize_qk")
        if self.variant == FULL_INT8:
            self.lib.check(self.lib.lib.intfa_quantize_v(
                ctypes.byref(shape), ctypes.byref(Intfa.view(self.v, F16)),
                ctypes.c_void_p(self.v8.data_ptr()), ctypes.c_void_p(self.vs.data_ptr()),
                self.options.v_granularity, self.stream), "quantize_v")

    def attend(self):
        self.lib.check(self.lib.lib.intfa_attention_forward(
            ctypes.byref(self.problem), ctypes.byref(self.tensors), self.stream,
            ctypes.byref(self.options)), "attention_forward")
