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


def attention_args(is_causal=True, rotate="off", layout="HND", variant="full_int8",
                   smooth_k=False, **numerics):
    """intfa.attention's checked arguments (the softmax scale 0.0: 1/sqrt(head_dim), P as u8,
    K per token; the rotation and the numerics options by name as `numerics`)."""
    from intfa._op_args import AttentionArgs
    return AttentionArgs(is_causal=is_causal, sm_scale=0.0, layout=layout, variant=variant,
                         smooth_k=smooth_k, rotate=rotate, numerics=tuple(
                             dict(dict(p_encoding="u8", k_granularity="token"),
                                  **numerics).items()))


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
        from intfa import _ops
        for layout in ("HND", "NHD"):
            for granularity in ("tensor", "channel", "block"):
                with self.subTest(layout=layout, granularity=granularity):
                    q, k, v = self.tensors(layout)
                    self.assert_reaches_launch(_ops.launch_quantize_qk, q, layout, False, 0)
                    self.assert_reaches_launch(_ops.launch_quantize_qk, k, layout, True, 0)
                    self.assert_reaches_launch(_ops.launch_quantize_v, v, layout, granularity, 0)

    def int8_call(self, layout, variant, granularity="tensor", dtype=None):
        """attention_int8's plan and the addresses of its run, as the op makes them."""
        from intfa import _plans, _tensors
        from intfa._op_args import Int8AttentionArgs
        q, k, v = self.tensors(layout, dtype=dtype)
        q8, q_scale, _ = _tensors.empty_qk(q, layout, False)
        k8, k_scale, _ = _tensors.empty_qk(k, layout, False)
        v_scale = None
        if variant == "full_int8":
            v, v_scale = _tensors.empty_v(_tensors.bhnd(v, layout), granularity, v.device)
        out, lse = _tensors.empty_attention(q8, layout, q.dtype, True)
        args = Int8AttentionArgs(is_causal=True, sm_scale=0.0, layout=layout, out_dtype=q.dtype,
                                 numerics=(("p_encoding", "u8"), ("p_scale", "running")),
                                 config=None)
        plan = _plans.int8_attention_plan(q8, k8, v, v_scale, out, args)
        addresses = [q8.data_ptr(), k8.data_ptr(), v.data_ptr(), q_scale.data_ptr(),
                     k_scale.data_ptr(), v_scale.data_ptr() if v_scale is not None else 0,
                     out.data_ptr(), lse.data_ptr(), 0]
        return plan, addresses

    def test_int8_attention_views(self):
        for layout in ("HND", "NHD"):
            for variant, granularity in (("full_int8", "tensor"), ("full_int8", "block"),
                                         ("half_int8", "tensor")):
                with self.subTest(layout=layout, variant=variant, granularity=granularity):
                    plan, addresses = self.int8_call(layout, variant, granularity, torch.bfloat16)
                    self.assert_reaches_launch(plan.run, *addresses)

    def test_16bit_attention_views(self):
        # intfa.attention's one call: quantize into the workspace, then attend.
        from intfa import _plans
        for layout in ("HND", "NHD"):
            for variant in ("full_int8", "half_int8"):
                for smooth_k, rotate in ((False, "off"), (True, "off"), (True, "on"),
                                         (False, "auto"), (True, "auto")):
                    with self.subTest(layout=layout, variant=variant, smooth_k=smooth_k,
                                      rotate=rotate):
                        q, k, v = self.tensors(layout)
                        out = torch.zeros_like(q)
                        plan = _plans.attention_plan(q, k, v, out, attention_args(
                            layout=layout, variant=variant, v_granularity="channel",
                            smooth_k=smooth_k, p_scale="tile", rotate=rotate))
                        workspace = torch.zeros(plan.workspace_bytes + 256, dtype=torch.uint8)
                        aligned = (workspace.data_ptr() + 255) // 256 * 256
                        self.assert_reaches_launch(plan.run, q.data_ptr(), k.data_ptr(),
                                                   v.data_ptr(), out.data_ptr(), 0, aligned, 0)

    def test_varlen_views(self):
        # Packed [1, total, H, D] views (NHD), three sequences, as attention_varlen makes them.
        from intfa import _plans
        lengths = [5, 0, 40]
        offsets = torch.tensor([0, 5, 5, 45], dtype=torch.int32)
        q, k, v = (t[None] for t in (torch.zeros(45, 8, 64, dtype=torch.float16),
                                     torch.zeros(45, 2, 64, dtype=torch.float16),
                                     torch.zeros(45, 2, 64, dtype=torch.float16)))
        out, lse = torch.zeros_like(q), torch.zeros(8, 45)
        for variant, granularity in (("full_int8", "tensor"), ("full_int8", "channel"),
                                     ("full_int8", "block"), ("half_int8", "channel")):
            with self.subTest(variant=variant, granularity=granularity):
                args = attention_args(layout="NHD", variant=variant, v_granularity=granularity,
                                      smooth_k=False, p_scale="tile")
                plan = _plans.attention_plan(q, k, v, out, args,
                                             packing=(3, max(lengths), max(lengths)))
                workspace = torch.zeros(plan.workspace_bytes + 256, dtype=torch.uint8)
                aligned = (workspace.data_ptr() + 255) // 256 * 256
                self.assert_reaches_launch(plan.run, q.data_ptr(), k.data_ptr(), v.data_ptr(),
                                           out.data_ptr(), lse.data_ptr(), aligned, 0,
                                           offsets.data_ptr(), offsets.data_ptr())

    def test_misaligned_int8_q_is_refused_by_cpp(self):
        plan, addresses = self.int8_call("HND", "full_int8")
        addresses[0] += 1
        with self.assertRaises(intfa.InvalidArgument) as caught:
            plan.run(*addresses)
        self.assertEqual(caught.exception.field, "tensors.q.data")

    def test_a_short_workspace_is_refused_naming_it(self):
        from intfa import _plans
        q, k, v = self.tensors("HND")
        out = torch.zeros_like(q)
        plan = _plans.attention_plan(q, k, v, out, attention_args(
            is_causal=False, layout="HND", variant="full_int8", v_granularity="channel",
            smooth_k=False, p_scale="tile"))
        workspace = torch.zeros(plan.workspace_bytes + 256, dtype=torch.uint8)
        aligned = (workspace.data_ptr() + 255) // 256 * 256
        with self.assertRaises(intfa.InvalidArgument) as caught:
            plan.run(q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), 0, aligned + 16, 0)
        self.assertEqual(caught.exception.field, "workspace")


@needs_torch
@needs_no_gpu
class NumericsReachThePlanTest(unittest.TestCase):
    """Each numerics keyword of each entry point, at each of its values, reaches the C++ plan
    (its `numerics`, every option by name), the options it does not take at their defaults: the
    package names no option, so this covers every option of the list. CPU tensors pass the device
    checks here; the launch then stops (NoDevice: host memory, no GPU)."""

    def plans_of(self, entry_point, call):
        """Runs call(**{name: value}) per numerics keyword `entry_point` has and value of it;
        yields (name, value, the numerics of the plan made)."""
        import contextlib
        import inspect
        from unittest import mock
        from intfa import _attention_checks, _checks, _ops, _plans
        parameters = inspect.signature(entry_point).parameters
        taken = [field for field in _checks.NUMERICS_FIELDS if field["name"] in parameters]
        self.assertTrue(taken)
        made = []

        def recorded(make):
            def record(*args, **named):
                made.append(make(*args, **named))
                return made[-1]
            return record

        with mock.patch.object(_attention_checks, "check_kernel_device", lambda q, k, v: None), \
                mock.patch.object(_attention_checks, "check_device", lambda tensors: None), \
                mock.patch.object(_ops, "on", lambda device: contextlib.nullcontext()), \
                mock.patch.object(_ops, "stream", lambda device: 0), \
                mock.patch.object(_plans, "attention_plan", recorded(_plans.attention_plan)), \
                mock.patch.object(_plans, "int8_attention_plan",
                                  recorded(_plans.int8_attention_plan)):
            for field in taken:
                for value in field["values"]:
                    with self.subTest(name=field["name"], value=value):
                        made.clear()
                        _plans.CHECKED_ATTENTION_CALLS.clear()
                        with self.assertRaises(intfa.Error):  # the launch, on host memory
                            call(**{field["name"]: value})
                        self.assertEqual(len(made), 1)
                        yield field["name"], value, made[0].numerics

    def expected(self, name, value, **others):
        from intfa import _checks
        numerics = {field["name"]: field["default"] for field in _checks.NUMERICS_FIELDS}
        numerics.update(others)
        numerics[name] = value
        return numerics

    def test_attention(self):
        q = torch.zeros(1, 2, 70, 64, dtype=torch.float16)
        for name, value, numerics in self.plans_of(
                intfa.attention, lambda **numerics: intfa.attention(q, q, q, fallback="error",
                                                                     **numerics)):
            self.assertEqual(numerics, self.expected(name, value))

    def test_attention_varlen(self):
        q = torch.zeros(45, 2, 64, dtype=torch.float16)
        offsets = torch.tensor([0, 5, 45], dtype=torch.int32)
        for name, value, numerics in self.plans_of(
                intfa.attention_varlen, lambda **numerics: intfa.attention_varlen(
                    q, q, q, offsets, offsets, 40, 40, **numerics)):
            self.assertEqual(numerics, self.expected(name, value))

    def test_attention_int8(self):
        from intfa import _tensors
        q = torch.zeros(1, 2, 16, 64, dtype=torch.float16)
        q8, q_scale, _ = _tensors.empty_qk(q, "HND", False)
        v8, v_scale = _tensors.empty_v(_tensors.bhnd(q, "HND"), "tensor", q.device)
        for name, value, numerics in self.plans_of(
                intfa.attention_int8, lambda **numerics: intfa.attention_int8(
                    q8, q8, v8, q_scale, q_scale, v_scale, **numerics)):
            # V's granularity is that of its scales.
            self.assertEqual(numerics, self.expected(name, value, v_granularity="tensor"))

if __name__ == "__main__":
    unittest.main()
