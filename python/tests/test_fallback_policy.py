"""The fallback policy, its warnings and counters (intfa._fallback) and the head dims served by
padding (intfa._padding): what needs no PyTorch."""
import math
import os
import unittest
import warnings
from unittest import mock

import intfa
from intfa import _fallback, _padding

import support  # noqa: F401 (the tests' own kernel cache)


class PolicyTest(unittest.TestCase):
    def setUp(self):
        self.addCleanup(intfa.set_fallback, intfa.set_fallback(None))
        environment = mock.patch.dict(os.environ)
        environment.start()
        self.addCleanup(environment.stop)
        os.environ.pop("INTFA_FALLBACK", None)

    def test_the_default_is_sdpa(self):
        self.assertEqual(intfa.get_fallback(), "sdpa")
        self.assertEqual(_fallback.resolve(None), "sdpa")

    def test_the_environment_variable_sets_the_process_default(self):
        os.environ["INTFA_FALLBACK"] = "error"
        self.assertEqual(intfa.get_fallback(), "error")
        self.assertEqual(_fallback.resolve(None), "error")

    def test_set_fallback_overrides_the_environment_and_returns_the_previous_setting(self):
        os.environ["INTFA_FALLBACK"] = "error"
        self.assertIsNone(intfa.set_fallback("sdpa"))
        self.assertEqual(intfa.get_fallback(), "sdpa")
        self.assertEqual(intfa.set_fallback(None), "sdpa")
        self.assertEqual(intfa.get_fallback(), "error")

    def test_a_call_argument_overrides_the_process_default(self):
        intfa.set_fallback("error")
        self.assertEqual(_fallback.resolve("sdpa"), "sdpa")

    def test_bad_policies_are_refused_naming_where_they_came_from(self):
        for call, field in ((lambda: intfa.set_fallback("sdp"), "policy"),
                            (lambda: _fallback.resolve("raise"), "fallback"),
                            (lambda: _fallback.check_argument(True), "fallback")):
            with self.assertRaises(intfa.InvalidArgument) as caught:
                call()
            self.assertEqual(caught.exception.field, field)
            self.assertIn("'sdpa' or 'error'", str(caught.exception))
        os.environ["INTFA_FALLBACK"] = "maybe"
        with self.assertRaises(intfa.InvalidArgument) as caught:
            intfa.get_fallback()
        self.assertEqual(caught.exception.field, "INTFA_FALLBACK")


class StatsTest(unittest.TestCase):
    def setUp(self):
        intfa.reset_fallback_stats()
        self.addCleanup(intfa.reset_fallback_stats)

    def record(self, reason, times):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(times):
                _fallback.record(reason, "detail text")
        return [w for w in caught if issubclass(w.category, intfa.FallbackWarning)]

    def test_each_reason_warns_once_and_counts_every_time(self):
        first = self.record("attn_mask", 3)
        self.assertEqual(len(first), 1)
        self.assertIn("attention mask", str(first[0].message))
        self.assertIn("detail text", str(first[0].message))
        self.assertIn("fallback_stats", str(first[0].message))
        self.assertEqual(len(self.record("head_dim", 2)), 1)
        self.assertEqual(self.record("attn_mask", 1), [])
        self.assertEqual(intfa.fallback_stats(), {"attn_mask": 4, "head_dim": 2})

    def test_stats_are_a_copy(self):
        self.record("dtype", 1)
        intfa.fallback_stats()["dtype"] = 100
        self.assertEqual(intfa.fallback_stats(), {"dtype": 1})

    def test_reset_clears_the_counts_and_lets_each_reason_warn_again(self):
        self.record("dropout", 2)
        intfa.reset_fallback_stats()
        self.assertEqual(intfa.fallback_stats(), {})
        self.assertEqual(len(self.record("dropout", 1)), 1)

    def test_policy_error_raises_unsupported_naming_the_reason(self):
        error = _fallback.unsupported("causal_alignment")
        self.assertIsInstance(error, intfa.Unsupported)
        self.assertEqual(error.field, "causal_alignment")
        self.assertIn("top-left", str(error))


class PaddingTest(unittest.TestCase):
    def test_kernel_head_dims_run_as_they_are_and_other_multiples_of_8_pad_up(self):
        expected = {8: 64, 40: 64, 64: 64, 72: 128, 80: 128, 96: 128, 120: 128, 128: 128,
                    136: 256, 160: 256, 248: 256, 256: 256}
        for head_dim, kernel_dim in expected.items():
            self.assertEqual(_padding.kernel_head_dim(head_dim), kernel_dim, head_dim)

    def test_no_kernel_for_other_head_dims(self):
        for head_dim in (0, 4, 36, 100, 255, 264, 512):
            self.assertIsNone(_padding.kernel_head_dim(head_dim), head_dim)

    def test_the_default_scale_is_that_of_the_original_head_dim(self):
        self.assertEqual(_padding.softmax_scale(0.0, 80), 1 / math.sqrt(80))
        self.assertEqual(_padding.softmax_scale(None, 80), 1 / math.sqrt(80))
        self.assertEqual(_padding.softmax_scale(0.2, 80), 0.2)

    def test_padding_bytes_count_the_copies(self):
        self.assertEqual(_padding.padding_bytes(1000, 1000, 128, 128), 0)
        # d=64 -> 128 on 1000 elements each: Q, K, V read (3000) and written twice as wide
        # (6000), the output read twice as wide (2000) and written (1000), two bytes each.
        self.assertEqual(_padding.padding_bytes(1000, 1000, 64, 128), 2 * (3000 + 6000 + 3000))


if __name__ == "__main__":
    unittest.main()
