"""intfa.attention_int8's and intfa.attention_varlen's torch layers between the checks and the
kernel, without a GPU: with the C++ plan replaced by one that records what it is given, on CPU
tensors taken as the kernel's device. A plain eager call runs the op's implementation with the
plan of its signature (made once), hands the kernel the call's own addresses, and allocates an
LSE only when it is asked for; a call that is traced or intercepted goes through the op; what
the checks read (``q_dot_k_mean``, the lengths) is checked whenever it is new."""
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


class RecordingVarlenPlan:
    """AttentionPlan's stand-in (attention_varlen's plans): how it was made, every run's
    addresses."""

    made = []
    workspace_bytes = 256

    def __init__(self, q, k, v, out, args, packing=None):
        self.views = [(tuple(x.shape), x.stride()) for x in (q, k, v, out)]
        self.args = args
        self.packing = packing
        self.runs = []
        RecordingVarlenPlan.made.append(self)

    def run(self, q, k, v, out, lse, workspace, stream, cu_seqlens_q=0, cu_seqlens_kv=0):
        self.runs.append(dict(q=q, k=k, v=v, out=out, lse=lse, cu_seqlens_q=cu_seqlens_q,
                              cu_seqlens_kv=cu_seqlens_kv))


@contextlib.contextmanager
def recording_kernels():
    from intfa import _attention_checks, _intfa, _ops, _plans
    RecordingPlan.made.clear()
    RecordingVarlenPlan.made.clear()
    _plans.CHECKED_INT8_CALLS.clear()
    _plans.INT8_ATTENTION_PLANS.clear()
    _plans.CHECKED_VARLEN_CALLS.clear()
    try:
        with mock.patch.object(_intfa, "Int8AttentionPlan", RecordingPlan), \
                mock.patch.object(_plans, "attention_plan", RecordingVarlenPlan), \
                mock.patch.object(_attention_checks, "check_device", lambda named_tensors: None), \
                mock.patch.object(_ops, "on", lambda device: contextlib.nullcontext()), \
                mock.patch.object(_ops, "stream", lambda device: 0):
            yield RecordingPlan.made
    finally:
        _plans.CHECKED_INT8_CALLS.clear()
        _plans.INT8_ATTENTION_PLANS.clear()
        _plans.CHECKED_VARLEN_CALLS.clear()


def watching():
    """A torch function mode that changes nothing: with it on, calls are intercepted, so intfa
    must go through its op."""

    class Watching(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    return Watching()


def quantized(batch=1, heads_q=4, heads_kv=2, seq_q=16, seq_kv=48, head_dim=64):
    """Full-INT8 inputs as intfa.quantize lays them out (HND, V per channel), on the CPU."""
    from intfa import _tensors
    q = torch.zeros(batch, heads_q, seq_q, head_dim, dtype=torch.int8)
    k = torch.zeros(batch, heads_kv, seq_kv, head_dim, dtype=torch.int8)
    v, v_scale = _tensors.empty_v((batch, heads_kv, seq_kv, head_dim), "channel", q.device)
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

    def test_the_plan_stays_with_its_signature_and_other_strides_get_their_own(self):
        from intfa import _plans
        with recording_kernels() as plans:
            tensors = quantized()
            intfa.attention_int8(*tensors)
            _plans.INT8_ATTENTION_PLANS.clear()  # the checked call keeps its own plan
            intfa.attention_int8(*tensors)
            self.assertEqual([len(plan.runs) for plan in plans], [2])
            # The same shapes with q's tokens strided: another signature, another plan.
            q, *rest = tensors
            strided_q = torch.zeros(1, 16, 4, 64, dtype=torch.int8).transpose(1, 2)
            intfa.attention_int8(strided_q, *rest)
            self.assertEqual([plan.arguments["q_strides"] for plan in plans],
                             [q.stride(), strided_q.stride()])
            # ... and a head dim that is not stride 1 is refused, whatever passed before.
            with self.assertRaises(intfa.InvalidArgument) as raised:
                intfa.attention_int8(torch.zeros(1, 4, 64, 16, dtype=torch.int8).transpose(2, 3),
                                     *rest)
            self.assertIn("q.stride", str(raised.exception))

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
        from intfa import _ops

        through_op = []

        def op(*arguments):
            through_op.append(arguments)
            tensors = arguments[:6]
            return torch.empty(tensors[0].shape, dtype=torch.float16), torch.empty(0)

        with recording_kernels() as plans, mock.patch.object(_ops, "attention_int8_op", op):
            tensors = quantized()
            intfa.attention_int8(*tensors)
            self.assertEqual((len(through_op), len(plans)), (0, 1))
            with watching():
                intfa.attention_int8(*tensors)
            self.assertEqual(len(through_op), 1)
            self.assertEqual(len(plans[0].runs), 1)  # the op, not the plan, ran the second call


def packed(total_q=40, total_kv=56, heads_q=4, heads_kv=2, head_dim=64, batch=3):
    """attention_varlen's inputs on the CPU: packed FP16 rows and int32 offsets."""
    q = torch.zeros(total_q, heads_q, head_dim, dtype=torch.float16)
    k = torch.zeros(total_kv, heads_kv, head_dim, dtype=torch.float16)
    v = torch.zeros_like(k)
    cu_q = torch.tensor([0, 10, 25, total_q], dtype=torch.int32)[:batch + 1]
    cu_kv = torch.tensor([0, 20, 30, total_kv], dtype=torch.int32)[:batch + 1]
    return q, k, v, cu_q, cu_kv


@needs_torch
class VarlenLayerTest(unittest.TestCase):
    def test_one_plan_per_signature_run_with_each_calls_addresses(self):
        with recording_kernels():
            calls = [packed() for _ in range(3)]
            outputs = [intfa.attention_varlen(*tensors, 15, 20) for tensors in calls]
            intfa.attention_varlen(*calls[0], 15, 30)  # another longest key length: a new plan
            plans = RecordingVarlenPlan.made
        self.assertEqual([len(plan.runs) for plan in plans], [3, 1])
        self.assertEqual([plan.packing for plan in plans], [(3, 15, 20), (3, 15, 30)])
        self.assertEqual(plans[0].views[0], ((1, 40, 4, 64), (10240, 256, 64, 1)))
        for tensors, out, run in zip(calls, outputs, plans[0].runs):
            q, k, v, cu_q, cu_kv = tensors
            self.assertEqual([run["q"], run["k"], run["v"], run["cu_seqlens_q"],
                              run["cu_seqlens_kv"]],
                             [x.data_ptr() for x in tensors])
            self.assertEqual((run["out"], run["lse"]), (out.data_ptr(), 0))
            self.assertEqual((out.shape, out.dtype, out.is_contiguous()),
                             (q.shape, q.dtype, True))

    def test_the_lse_is_allocated_and_passed_only_when_asked_for(self):
        with recording_kernels():
            out, lse = intfa.attention_varlen(*packed(), 15, 20, return_lse=True)
            run = RecordingVarlenPlan.made[0].runs[0]
        self.assertEqual((tuple(lse.shape), lse.dtype), ((4, 40), torch.float32))
        self.assertEqual(run["lse"], lse.data_ptr())

    def test_lengths_and_offsets_are_checked_whenever_they_are_new(self):
        with recording_kernels():
            tensors = packed()
            intfa.attention_varlen(*tensors, 15, 20)
            for bad in (0, 1.5, True, 15.0):  # 15.0 == 15, but no int
                with self.assertRaises(intfa.InvalidArgument) as raised:
                    intfa.attention_varlen(*tensors, bad, 20)
                self.assertIn("max_seqlen_q", str(raised.exception))
            q, k, v, cu_q, cu_kv = tensors
            with self.assertRaises(intfa.InvalidArgument) as raised:
                intfa.attention_varlen(q, k, v, cu_q, cu_kv.to(torch.int64), 15, 20)
            self.assertIn("cu_seqlens_k", str(raised.exception))

    def test_an_intercepted_call_goes_through_the_op(self):
        from intfa import _ops

        through_op = []

        def op(*arguments):
            through_op.append(arguments)
            return torch.empty_like(arguments[0]), torch.empty(0)

        with recording_kernels(), mock.patch.object(_ops, "attention_varlen_op", op):
            tensors = packed()
            intfa.attention_varlen(*tensors, 15, 20)
            with watching():
                intfa.attention_varlen(*tensors, 15, 20)
            self.assertEqual(len(through_op), 1)
            self.assertEqual(len(RecordingVarlenPlan.made[0].runs), 1)


if __name__ == "__main__":
    unittest.main()
