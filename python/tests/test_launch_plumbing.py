"""The views the torch layer hands to C++ pass the C++ checks (strides, alignment, the INT8 V
layout) for both layouts and both variants. Without a GPU the C++ runtime validates everything,
then stops at the launch with NoDevice: reaching NoDevice is the pass. Host memory stands in for
device memory, so with a GPU these tests must not run (they would launch on host pointers)."""
import unittest

import intfa

from support import needs_torch, torch

NO_GPU = not intfa.cache_info()["gpu_available"]
needs_no_gpu = unittest.skipUnless(
    NO_GPU, "a GPU is present: these tests pass host memory where the C++ API expects device "
    "memory, which only a machine without a GPU refuses before launching")


@needs_torch
@needs_no_gpu
class LaunchPlumbingTest(unittest.TestCase):
    def assert_reaches_launch(self, call, *args):
        with self.assertRaises(intfa.NoDevice):
            call(*args)

    def tensors(self, layout, batch=2, heads_q=8, heads_kv=2, seq_q=33, seq_kv=70, head_dim=64,
                dtype=None):
        def make(heads, seq, element):
            shape = (batch, heads, seq, head_dim) if layout == "HND" else \
                (batch, seq, heads, head_dim)
            return torch.zeros(shape, dtype=element)
        dtype = dtype or torch.float16
        return (make(heads_q, seq_q, dtype), make(heads_kv, seq_kv, dtype),
                make(heads_kv, seq_kv, dtype))

    def test_quantize_views(self):
        from intfa import _torch
        for layout in ("HND", "NHD"):
            for granularity in ("tensor", "channel", "block"):
                with self.subTest(layout=layout, granularity=granularity):
                    q, k, v = self.tensors(layout)
                    self.assert_reaches_launch(_torch._launch_quantize_qk, q, layout, False, 0)
                    self.assert_reaches_launch(_torch._launch_quantize_qk, k, layout, True, 0)
                    self.assert_reaches_launch(_torch._launch_quantize_v, v, layout, granularity,
                                               0)

    def attention_args(self, layout, variant, granularity="tensor", dtype=None):
        from intfa import _torch
        q, k, v = self.tensors(layout, dtype=dtype)
        q8, q_scale, _ = _torch._empty_qk(q, layout, False)
        k8, k_scale, _ = _torch._empty_qk(k, layout, False)
        v_scale = None
        if variant == "full_int8":
            v, v_scale = _torch._empty_v(_torch._bhnd(v, layout), granularity, v.device)
        out, lse = _torch._empty_attention(q8, layout, q.dtype, True)
        return [q8, k8, v, q_scale, k_scale, v_scale, out, lse, True, 0.0, layout, "u8",
                "running", None, 0]

    def test_attention_views(self):
        from intfa import _torch
        for layout in ("HND", "NHD"):
            for variant, granularity in (("full_int8", "tensor"), ("full_int8", "block"),
                                         ("half_int8", "tensor")):
                with self.subTest(layout=layout, variant=variant, granularity=granularity):
                    args = self.attention_args(layout, variant, granularity, torch.bfloat16)
                    self.assert_reaches_launch(_torch._launch_attention, *args)

    def test_varlen_views(self):
        # Packed [1, total, H, D] views (NHD), three sequences, as attention_varlen makes them.
        from intfa import _torch
        lengths = [5, 0, 40]
        offsets = torch.tensor([0, 5, 5, 45], dtype=torch.int32)
        packing = _torch._Packing(offsets, offsets, max(lengths), max(lengths))
        q, k, v = (t[None] for t in (torch.zeros(45, 8, 64, dtype=torch.float16),
                                     torch.zeros(45, 2, 64, dtype=torch.float16),
                                     torch.zeros(45, 2, 64, dtype=torch.float16)))
        q8, q_scale, _ = _torch._empty_qk(q, "NHD", False)
        k8, k_scale, _ = _torch._empty_qk(k, "NHD", False)
        out, lse = torch.zeros_like(q), torch.zeros(8, 45)
        for granularity in ("tensor", "channel", "block"):
            with self.subTest(granularity=granularity):
                self.assert_reaches_launch(_torch._launch_quantize_v_varlen, v, packing,
                                           granularity, 0)
                v8, v_scale = _torch._empty_v((3, 2, max(lengths), 64), granularity, v.device)
                self.assert_reaches_launch(_torch._launch_attention, q8, k8, v8, q_scale, k_scale,
                                           v_scale, out, lse, True, 0.0, "NHD", "u8", "tile",
                                           None, 0, packing)
        with self.subTest(variant="half_int8"):
            self.assert_reaches_launch(_torch._launch_attention, q8, k8, v, q_scale, k_scale, None,
                                       out, lse, True, 0.0, "NHD", "u8", "tile", None, 0, packing)

    def test_misaligned_int8_q_is_refused_by_cpp(self):
        from intfa import _torch
        args = self.attention_args("HND", "full_int8")
        storage = torch.zeros(args[0].numel() + 1, dtype=torch.int8)
        args[0] = storage[1:].view(args[0].shape)
        with self.assertRaises(intfa.InvalidArgument) as caught:
            _torch._launch_attention(*args)
        self.assertEqual(caught.exception.field, "tensors.q.data")


if __name__ == "__main__":
    unittest.main()
