"""The accuracy check (intfa._accuracy_guard, issue 46): its sampled error against a float32
attention computed here by torch's SDPA over whole outputs, its warning (once per numerics), its
counts, and its arguments. On the CPU: the check is plain torch arithmetic on any tensors."""
import math
import os
import unittest
import warnings
from unittest import mock

import intfa

from support import needs_torch, torch

if torch is not None:
    from intfa import _accuracy_guard as guard


def attention_rows(q, k, v, causal):
    """Float32 SDPA in HND with K/V repeated over query-head groups and a bottom-right causal mask
    (intfa's alignment); rows that see no key are zero."""
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    seq_q, seq_kv = q.shape[2], k.shape[2]
    mask = torch.ones(seq_q, seq_kv, dtype=torch.bool)
    if causal:
        mask = mask.tril(diagonal=seq_kv - seq_q)
    scores = q.float() @ k.float().transpose(-1, -2) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(~mask, float("-inf"))
    out = torch.softmax(scores, dim=-1).nan_to_num(0.0) @ v.float()
    return out


def rows_error(out, reference, rows):
    difference = sum(float(((out[b, h, i].float() - reference[b, h, i]) ** 2).sum())
                     for b, h, i in rows)
    norm = sum(float((reference[b, h, i] ** 2).sum()) for b, h, i in rows)
    return math.sqrt(difference / norm)


@needs_torch
class SampledErrorTest(unittest.TestCase):
    def setUp(self):
        self.generator = torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little"))

    def inputs(self, batch, heads_q, heads_kv, seq_q, seq_kv, head_dim):
        def make(heads, seq):
            return torch.randn(batch, heads, seq, head_dim, generator=self.generator)
        return make(heads_q, seq_q), make(heads_kv, seq_kv), make(heads_kv, seq_kv)

    def test_equals_the_error_over_the_same_rows_of_a_whole_attention(self):
        for causal, seq_q, seq_kv in ((False, 37, 50), (True, 37, 50), (True, 60, 40)):
            q, k, v = self.inputs(2, 8, 2, seq_q, seq_kv, 64)  # GQA 8/2
            reference = attention_rows(q, k, v, causal)
            noisy = reference + 0.03 * torch.randn(reference.shape, generator=self.generator)
            rows = [(b, h, i) for b in range(2) for h in (0, 3, 7) for i in (0, 11, seq_q - 1)]
            # Rows that see no key (causal, seq_q > seq_kv: the first 20) are skipped by both.
            seen = [(b, h, i) for b, h, i in rows if not causal or i + seq_kv - seq_q >= 0]
            expected = rows_error(noisy, reference, seen)
            got = guard.sampled_error(q, k, v, noisy, causal, None, "HND", rows=rows)
            self.assertAlmostEqual(got, expected, delta=1e-5 * expected)
            # The exact output has no error; NHD views give the same figure.
            self.assertLess(guard.sampled_error(q, k, v, reference, causal, None, "HND",
                                                rows=rows), 1e-5)
            nhd = [t.transpose(1, 2) for t in (q, k, v, noisy)]
            self.assertAlmostEqual(guard.sampled_error(*nhd, causal, None, "NHD", rows=rows),
                                   expected, delta=1e-5 * expected)

    def test_the_scale_is_the_callers(self):
        q, k, v = self.inputs(1, 2, 2, 16, 16, 64)
        reference = attention_rows(q * 2.0, k, v, False)  # scores of scale 2 / sqrt(d)
        rows = [(0, h, i) for h in range(2) for i in range(16)]
        self.assertLess(guard.sampled_error(q, k, v, reference, False, 2.0 / 8.0, "HND",
                                            rows=rows), 1e-5)
        self.assertGreater(guard.sampled_error(q, k, v, reference, False, None, "HND",
                                               rows=rows), 0.05)

    def test_no_row_that_sees_a_key_gives_none(self):
        q, k, v = self.inputs(1, 2, 2, 30, 10, 64)
        out = torch.zeros(1, 2, 30, 64)
        self.assertIsNone(guard.sampled_error(q, k, v, out, True, None, "HND",
                                              rows=[(0, 0, 0), (0, 1, 19)]))


@needs_torch
class WarningTest(unittest.TestCase):
    def setUp(self):
        guard.reset_accuracy_check_stats()
        self.addCleanup(guard.reset_accuracy_check_stats)
        generator = torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little"))
        self.q, self.k, self.v = (torch.randn(1, 4, 64, 64, generator=generator)
                                  for _ in range(3))
        self.exact = attention_rows(self.q, self.k, self.v, False)
        self.noise = torch.randn(self.exact.shape, generator=generator)

    def call(self, relative_noise, variant="full_int8", k_granularity=None, rotate="auto"):
        out = self.exact + relative_noise * self.exact.norm() / self.noise.norm() * self.noise
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            error = guard.check(self.q, self.k, self.v, out, is_causal=False, sm_scale=None,
                                layout="HND", variant=variant, k_granularity=k_granularity,
                                rotate=rotate, stacklevel=1)
        return error, [w for w in caught if issubclass(w.category, guard.AccuracyWarning)]

    def test_warns_once_per_numerics_when_far_above_the_bound(self):
        bound, far = guard.bound("full_int8", None), guard.FAR_ABOVE
        self.assertEqual(self.call(0.8 * far * bound)[1], [])  # below "far above": quiet
        error, warned = self.call(1.5 * far * bound)
        self.assertAlmostEqual(error, 1.5 * far * bound, delta=0.1 * error)  # whole heads
        self.assertEqual(len(warned), 1)
        self.assertIn("rotate=True", str(warned[0].message))
        self.assertEqual(self.call(1.5 * far * bound)[1], [])  # once
        self.assertEqual(len(self.call(1.5 * far * bound, k_granularity="block")[1]), 1)
        # Half INT8's bound is lower: an error quiet for full INT8 warns there.
        half = 1.3 * far * guard.bound("half_int8", None)
        self.assertLess(half, 0.9 * far * bound)
        self.assertEqual(self.call(half, rotate="on")[1], [])
        warned = self.call(half, variant="half_int8", rotate="on")[1]
        self.assertEqual(len(warned), 1)
        self.assertNotIn("rotate=True", str(warned[0].message))
        stats = guard.accuracy_check_stats()
        self.assertEqual((stats["checked"], stats["warned"]), (6, 4))
        self.assertGreater(stats["worst"], 1.3 * far * bound)

    def test_reset_lets_the_warning_come_again(self):
        self.assertEqual(len(self.call(0.1)[1]), 1)
        guard.reset_accuracy_check_stats()
        self.assertEqual(guard.accuracy_check_stats()["checked"], 0)
        self.assertEqual(len(self.call(0.1)[1]), 1)

    def test_samples_whole_heads(self):
        rows = guard.sample_rows(3, 5, 100, 1000)
        heads = {(b, h) for b, h, _ in rows}
        self.assertLessEqual(len(heads), guard.SAMPLED_HEADS)
        self.assertEqual(len(rows), 100 * len(heads))
        # A head with more scores than SCORES_PER_HEAD: a subset of its rows, at least 16.
        rows = guard.sample_rows(1, 1, 5000, guard.SCORES_PER_HEAD // 100)
        self.assertEqual(len(rows), 100)
        self.assertEqual(len(set(rows)), 100)


@needs_torch
class ArgumentsTest(unittest.TestCase):
    def test_check_argument_and_environment(self):
        self.assertTrue(guard.requested(True))
        self.assertFalse(guard.requested(False))
        for value, expected in (("", False), ("0", False), ("1", True), ("on", True),
                                ("True", True), (" OFF ", False)):
            with mock.patch.dict(os.environ, {"INTFA_CHECK": value}):
                self.assertEqual(guard.requested(None), expected)
        with mock.patch.dict(os.environ, {"INTFA_CHECK": "sometimes"}):
            with self.assertRaises(intfa.InvalidArgument) as raised:
                guard.requested(None)
            self.assertEqual(raised.exception.field, "INTFA_CHECK")

    def test_a_bad_check_is_refused_before_the_call(self):
        q = torch.randn(1, 2, 8, 64)
        with mock.patch.object(intfa._torch, "_attend") as attend:
            with self.assertRaises(intfa.InvalidArgument) as raised:
                intfa.attention(q, q, q, check="yes")
            attend.assert_not_called()
        self.assertEqual(raised.exception.field, "check")


@needs_torch
class WiringTest(unittest.TestCase):
    """intfa.attention hands the guard the call's checked arguments, and does not call it when
    the check is off or while torch.compile traces. The kernels are stood in for (this runs on
    the CPU): the call's plan is made as on a GPU, and its op returns a tensor."""

    def run_attention(self, check, environment="", compiling=False, **options):
        from intfa import _op_args, _torch
        q = torch.randn(2, 8, 16, 80)
        k = v = torch.randn(2, 4, 16, 80)
        args = _op_args.AttentionArgs(is_causal=True, sm_scale=0.25, layout="HND",
                                      variant="half_int8", smooth_k=True, rotate=False,
                                      numerics=(("k_granularity", "block"),))

        class Call:
            unserved = None
            detail = ""
        Call.args = args
        result = torch.zeros_like(q)
        with mock.patch.object(_torch, "_checked_call", return_value=Call()), \
                mock.patch.object(_torch._plans, "CHECKED_ATTENTION_CALLS", {}), \
                mock.patch.object(_torch._ops, "plain_eager", return_value=False), \
                mock.patch.object(_torch._ops, "call_attention",
                                  return_value=(result, None)), \
                mock.patch.object(torch.compiler, "is_compiling", return_value=compiling), \
                mock.patch.object(guard, "check") as checked, \
                mock.patch.dict(os.environ, {"INTFA_CHECK": environment}):
            out = intfa.attention(q, k, v, is_causal=True, scale=0.25, check=check, **options)
        self.assertIs(out, result)
        return checked

    def test_the_guard_gets_the_calls_checked_arguments(self):
        checked = self.run_attention(True)
        checked.assert_called_once()
        kwargs = checked.call_args.kwargs
        self.assertEqual((kwargs["is_causal"], kwargs["sm_scale"], kwargs["layout"],
                          kwargs["variant"], kwargs["k_granularity"], kwargs["rotate"]),
                         (True, 0.25, "HND", "half_int8", "block", False))

    def test_off_env_and_compiling(self):
        self.run_attention(False, environment="1").assert_not_called()
        self.run_attention(None).assert_not_called()
        self.run_attention(None, environment="1").assert_called_once()
        self.run_attention(True, compiling=True).assert_not_called()


if __name__ == "__main__":
    unittest.main()
