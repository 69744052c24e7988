"""intfa.attention_int8's torch layer between the checks and the kernel, without a GPU: with the
C++ plan replaced by one that records what it is given, on CPU tensors taken as the kernel's
device. A plain eager call runs the op's implementation with the plan of its signature (made
once), hands the kernel the call's own addresses, and allocates an LSE only when it is asked
for; a call that is traced or intercepted goes through the op; ``q_dot_k_mean`` is checked
whenever its shape is new."""
import contextlib
import unittest
from unittest import mock

import intfa

from support import needs_torch, torch


class RecordingPlan:
    """Int8AttentionPlan's stand-in: the arguments it was made with and every run's addresses."""

    made = []

    def __init__(self, **arguments):
        self.arguments = arguments
        self.runs = []
        RecordingPlan.made.append(self)

    def run(self, q, k, v, q_scale, k_scale, v_scale, out, lse, stream, q_dot_k_mean):
        self.runs.append(dict(q=q, k=k, v=v, q_scale=q_scale, k_scale=k_scale, v_scale=v_scale,
                              out=out, lse=lse, q_dot_k_mean=q_dot_k_mean))


@contextlib.contextmanager
def recording_kernels():
    from intfa import _torch as layers
    RecordingPlan.made.clear()
    layers._CHECKED_INT8_CALLS.clear()
    layers._INT8_ATTENTION_PLANS.clear()
    try:
        with mock.patch.object(layers._intfa, "Int8AttentionPlan", RecordingPlan), \
                mock.patch.object(layers, "_check_device", lambda named_tensors: None), \
                mock.patch.object(layers, "_on", lambda device: contextlib.nullcontext()), \
                mock.patch.object(layers, "_stream", lambda device: 0):
            yield RecordingPlan.made
    finally:
        layers._CHECKED_INT8_CALLS.clear()
        layers._INT8_ATTENTION_PLANS.clear()


def quantized(batch=1, heads_q=4, heads_kv=2, seq_q=16, seq_kv=48, head_dim=64):
    """Full-INT8 inputs as intfa.quantize lays them out (HND, V per channel), on the CPU."""
    from intfa import _torch as layers
    q = torch.zeros(batch, heads_q, seq_q, head_dim, dtype=torch.int8)
    k = torch.zeros(batch, heads_kv, seq_kv, head_dim, dtype=torch.int8)
    v, v_scale = layers._empty_v((batch, heads_kv, seq_kv, head_dim), "channel", q.device)
    q_scale = torch.ones(batch, heads_q, seq_q)
    k_scale = torch.ones(batch, heads_kv, seq_kv)
    return q, k, v, q_scale, k_scale, v_scale


@needs_torch
class Int8LayerTest(unittest.TestCase):
    def test_one_plan_per_signature_run_with_each_calls_addresses(self):
        with recording_kernels() as plans:
            calls = [quantized() for _ in range(3)]
            outputs = [intfa.attention_int8(*tensors) for tensors in calls]
            intfa.attention_int8(*calls[0], is_causal=True)
        self.assertEqual([len(plan.runs) for plan in plans], [3, 1])
        for tensors, out, run in zip(calls, outputs, plans[0].runs):
            names = ("q", "k", "v", "q_scale", "k_scale", "v_scale")
            self.assertEqual([run[name] for name in names], [x.data_ptr() for x in tensors])
            self.assertEqual(run["out"], out.data_ptr())
            self.assertEqual((out.shape, out.dtype), (tensors[0].shape, torch.float16))
            self.assertEqual((run["lse"], run["q_dot_k_mean"]), (0, 0))
        self.assertEqual(len({out.data_ptr() for out in outputs}), 3)  # a fresh output each call

    def test_the_lse_is_allocated_and_passed_only_when_asked_for(self):
        with recording_kernels() as plans:
            tensors = quantized()
            out, lse = intfa.attention_int8(*tensors, return_lse=True, out_dtype=torch.bfloat16)
        run = plans[0].runs[0]
        self.assertEqual(out.dtype, torch.bfloat16)
        self.assertEqual((tuple(lse.shape), lse.dtype), ((1, 4, 16), torch.float32))
        self.assertEqual(run["lse"], lse.data_ptr())

    def test_q_dot_k_mean_is_passed_and_checked_whenever_its_shape_is_new(self):
        with recording_kernels() as plans:
            tensors = quantized()
            term = torch.zeros(1, 4, 16)
            intfa.attention_int8(*tensors, return_lse=True, q_dot_k_mean=term)
            self.assertEqual(plans[0].runs[-1]["q_dot_k_mean"], term.data_ptr())
            with self.assertRaises(intfa.InvalidArgument) as raised:
                intfa.attention_int8(*tensors, return_lse=True, q_dot_k_mean=torch.zeros(1, 4, 8))
            self.assertIn("q_dot_k_mean", str(raised.exception))
            with self.assertRaises(intfa.InvalidArgument):  # the same shape, another dtype
                intfa.attention_int8(*tensors, return_lse=True,
                                     q_dot_k_mean=torch.zeros(1, 4, 16, dtype=torch.float64))

    def test_an_intercepted_call_goes_through_the_op(self):
        from intfa import _torch as layers

        class Watching(torch.overrides.TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                return func(*args, **(kwargs or {}))

        through_op = []

        def op(*arguments):
            through_op.append(arguments)
            tensors = arguments[:6]
            return torch.empty(tensors[0].shape, dtype=torch.float16), torch.empty(0)

        with recording_kernels() as plans, mock.patch.object(layers, "_attention_int8_op", op):
            tensors = quantized()
            intfa.attention_int8(*tensors)
            self.assertEqual((len(through_op), len(plans)), (0, 1))
            with Watching():
                intfa.attention_int8(*tensors)
            self.assertEqual(len(through_op), 1)
            self.assertEqual(len(plans[0].runs), 1)  # the op, not the plan, ran the second call


if __name__ == "__main__":
    unittest.main()
