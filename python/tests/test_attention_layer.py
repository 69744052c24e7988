"""intfa.attention's torch layer between the checks and the kernel, without a GPU: with the C++
plan replaced by a float64 stand-in (stand_in.py), padded head dims, ``out=``, ``return_lse``
(with K smoothing), the plan per signature and a runtime error's fallback; and, on CPU tensors
(which intfa's kernels do not take), the SDPA fallback of every reason with its warning, its
count and what policy "error" raises instead."""
import math
import unittest
import warnings

import intfa

from stand_in import StandInPlan, reference, stand_in_kernels
from support import needs_torch, torch


def halves(*shape, dtype=None, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator).to(dtype or torch.float16)


def max_error(actual, expected):
    return (actual.double() - expected.double()).abs().max().item()


class FallbackCase(unittest.TestCase):
    def setUp(self):
        intfa.reset_fallback_stats()
        self.addCleanup(intfa.reset_fallback_stats)
        quiet = warnings.catch_warnings()  # the warnings a test does not read stay off the log
        quiet.__enter__()
        self.addCleanup(quiet.__exit__, None, None, None)
        warnings.simplefilter("ignore", intfa.FallbackWarning)

    def fallback_warnings(self, call):
        """`call()`'s result and the FallbackWarnings it gave."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = call()
        return result, [w for w in caught if issubclass(w.category, intfa.FallbackWarning)]


@needs_torch
class KernelPathTest(FallbackCase):
    def test_native_head_dim_gqa_causal_output_and_lse(self):
        q, k, v = halves(2, 4, 37, 64), halves(2, 2, 50, 64, seed=1), halves(2, 2, 50, 64, seed=2)
        with stand_in_kernels() as plans:
            out, lse = intfa.attention(q, k, v, is_causal=True, return_lse=True)
        expected, expected_lse = reference(q, k, v, is_causal=True)
        self.assertEqual((out.shape, out.dtype, tuple(lse.shape), lse.dtype),
                         (q.shape, q.dtype, (2, 4, 37), torch.float32))
        self.assertLess(max_error(out, expected), 2e-3)
        self.assertLess(max_error(lse, expected_lse), 1e-5)
        self.assertEqual(plans[-1].head_dim, 64)
        self.assertEqual(intfa.fallback_stats(), {})

    def test_k_granularity_reaches_the_plan(self):
        q, k, v = (halves(1, 2, 70, 64, seed=seed) for seed in range(3))
        with stand_in_kernels() as plans:
            intfa.attention(q, k, v)
            out = intfa.attention(q, k, v, k_granularity="block")
            intfa.attention(q, k, v, k_granularity="token")
        self.assertEqual([plan.numerics["k_granularity"] for plan in plans],
                         ["token", "block", "token"])
        self.assertLess(max_error(out, reference(q, k, v)[0]), 2e-3)

    def test_a_head_dim_between_the_kernels_reaches_the_plan_unpadded(self):
        # The C++ call serves it with the next kernel (no copies here); the plan sees the
        # caller's tensors and head dim, and the default scale is that head dim's.
        for head_dim in (40, 80, 96, 160):
            q, k, v = (halves(1, 2, 33, head_dim, seed=seed) for seed in range(3))
            with stand_in_kernels() as plans:
                out, lse = intfa.attention(q, k, v, return_lse=True)
            self.assertEqual(plans[-1].head_dim, head_dim)
            self.assertEqual(plans[-1].views[0][0], tuple(q.shape))
            expected, expected_lse = reference(q, k, v)
            self.assertEqual(out.shape, q.shape)
            self.assertTrue(out.is_contiguous())
            self.assertLess(max_error(out, expected), 2e-3, head_dim)
            self.assertLess(max_error(lse, expected_lse), 1e-5, head_dim)

    def test_a_padded_head_dim_keeps_the_callers_scale(self):
        q, k, v = (halves(1, 2, 20, 72, seed=seed) for seed in range(3))
        with stand_in_kernels():
            out = intfa.attention(q, k, v, scale=0.3)
        self.assertLess(max_error(out, reference(q, k, v, scale=0.3)[0]), 2e-3)

    def test_nhd_layout_with_padding_and_bottom_right_causal(self):
        q, k, v = halves(1, 30, 4, 80), halves(1, 45, 2, 80, seed=1), halves(1, 45, 2, 80, seed=2)
        with stand_in_kernels():
            out, lse = intfa.attention(q, k, v, is_causal=True, layout="NHD", return_lse=True)
        expected, expected_lse = reference(q, k, v, is_causal=True, layout="NHD")
        self.assertLess(max_error(out, expected), 2e-3)
        self.assertLess(max_error(lse, expected_lse), 1e-5)

    def test_out_is_written_in_place_and_returned(self):
        for head_dim in (64, 80):
            q, k, v = (halves(2, 4, 24, head_dim, seed=seed) for seed in range(3))
            # A [B, N, H, D] buffer seen as HND: the layout transformers returns.
            buffer = torch.full((2, 24, 4, head_dim), math.nan, dtype=torch.float16)
            out = buffer.transpose(1, 2)
            with stand_in_kernels() as plans:
                result, lse = intfa.attention(q, k, v, out=out, return_lse=True)
            self.assertIs(result, out)
            self.assertLess(max_error(buffer.transpose(1, 2), reference(q, k, v)[0]), 2e-3)
            if head_dim == 64:  # the kernel writes into `out` itself: its strides in the plan
                self.assertEqual(plans[-1].views[3][1], out.stride())

    def test_lse_of_smoothed_keys_is_that_of_the_original_scores(self):
        # K with a channel offset: the kernel's LSE is of q.(k - mean); the layer adds the shift.
        q, k, v = halves(1, 4, 40, 64), halves(1, 2, 60, 64, seed=1), halves(1, 2, 60, 64, seed=2)
        k = (k.float() + 3 * halves(1, 2, 1, 64, seed=3).float()).half()
        with stand_in_kernels():
            out, lse = intfa.attention(q, k, v, is_causal=True, smooth_k=True, return_lse=True)
        expected, expected_lse = reference(q, k, v, is_causal=True)
        self.assertLess(max_error(out, expected), 2e-3)
        self.assertLess(max_error(lse, expected_lse), 1e-4)

    def test_one_plan_per_signature(self):
        q = halves(1, 2, 16, 64)
        with stand_in_kernels() as plans:
            for seed in range(3):
                intfa.attention(q, halves(1, 2, 16, 64, seed=seed), q)
            intfa.attention(q, q, q, is_causal=True)
        self.assertEqual([plan.runs for plan in plans], [3, 1])

    def test_a_misaligned_out_is_refused_naming_it(self):
        q = halves(1, 2, 16, 64)
        storage = torch.empty(q.numel() + 1, dtype=torch.float16)
        out = storage[1:].view(q.shape)  # 2 bytes past an aligned address
        with stand_in_kernels():
            with self.assertRaises(intfa.InvalidArgument) as caught:
                intfa.attention(q, q, q, out=out)
        self.assertEqual(caught.exception.field, "out.data_ptr")

    def test_a_runtime_error_at_launch_falls_back_or_raises(self):
        q, k, v = (halves(1, 2, 16, 64, seed=seed) for seed in range(3))
        with stand_in_kernels():
            intfa.attention(q, k, v)
            StandInPlan.error = intfa.Unsupported("the runtime refused it", field="tensors.q")
            out, caught = self.fallback_warnings(lambda: intfa.attention(q, k, v))
            with self.assertRaisesRegex(intfa.Unsupported, "the runtime refused it"):
                intfa.attention(q, k, v, fallback="error")
        self.assertLess(max_error(out, reference(q, k, v)[0]), 2e-3)
        self.assertEqual(len(caught), 1)
        self.assertIn("the runtime refused it", str(caught[0].message))
        self.assertEqual(intfa.fallback_stats(), {"intfa_error": 1})

    def test_inputs_that_need_gradients_run_sdpa_which_has_a_backward(self):
        q, k, v = (halves(1, 2, 16, 64, seed=seed).float().requires_grad_() for seed in range(3))
        q16, k16, v16 = (x.half() for x in (q, k, v))
        with stand_in_kernels() as plans:
            out, caught = self.fallback_warnings(lambda: intfa.attention(q16, k16, v16))
            out.float().sum().backward()
            with torch.no_grad():
                intfa.attention(q16, k16, v16)
            with self.assertRaises(intfa.Unsupported):
                intfa.attention(q16, k16, v16, fallback="error")
        self.assertIsNotNone(q.grad)
        self.assertEqual(intfa.fallback_stats(), {"autograd": 1})
        self.assertIn("torch.no_grad()", str(caught[0].message))
        self.assertEqual(plans[-1].runs, 1)  # the no_grad call

    def test_a_gpu_below_sm_80_falls_back(self):
        from intfa import _attention_checks
        _attention_checks.CAPABILITIES[77] = (7, 5)
        self.addCleanup(_attention_checks.CAPABILITIES.pop, 77)
        with self.assertRaises(intfa.Unsupported) as caught:
            _attention_checks.check_arch(77)
        self.assertEqual(caught.exception.fallback_reason, "arch")
        self.assertIn("7.5", str(caught.exception))


@needs_torch
class FallbackTest(FallbackCase):
    """CPU tensors: intfa's kernels do not take them, so each call runs SDPA. The result is what
    intfa.attention computes (its causal alignment, GQA, layout, LSE, out)."""

    def check(self, q, k, v, is_causal=False, layout="HND", **options):
        out, lse = intfa.attention(q, k, v, is_causal=is_causal, layout=layout,
                                   return_lse=True, **options)
        expected, expected_lse = reference(q, k, v, is_causal=is_causal, layout=layout)
        self.assertEqual((out.shape, out.dtype), (q.shape, q.dtype))
        self.assertLess(max_error(out, expected), 2e-3 if q.dtype == torch.float16 else 1e-5)
        finite = torch.isfinite(expected_lse)
        self.assertTrue(torch.equal(torch.isfinite(lse), finite))
        self.assertLess(max_error(lse[finite], expected_lse[finite]), 1e-4)
        return out, lse

    def test_bottom_right_causal_gqa_and_nhd_as_intfa(self):
        self.check(halves(1, 4, 10, 64), halves(1, 2, 25, 64, seed=1), halves(1, 2, 25, 64, seed=2),
                   is_causal=True)
        self.check(halves(1, 12, 4, 80), halves(1, 5, 2, 80, seed=1), halves(1, 5, 2, 80, seed=2),
                   is_causal=True, layout="NHD")

    def test_queries_that_see_no_key_are_zero_with_lse_minus_infinity(self):
        out, lse = self.check(halves(1, 2, 9, 64), halves(1, 2, 4, 64, seed=1),
                              halves(1, 2, 4, 64, seed=2), is_causal=True)
        self.assertTrue(torch.equal(out[:, :, :5], torch.zeros_like(out[:, :, :5])))
        self.assertTrue(torch.isneginf(lse[:, :, :5]).all())

    def test_float32_and_float64_inputs(self):
        for dtype in (torch.float32, torch.float64):
            self.check(*(halves(1, 2, 16, 64, dtype=dtype, seed=seed) for seed in range(3)),
                       is_causal=True)

    def test_a_mask_with_the_lse_and_out(self):
        q, k, v = (halves(2, 2, 8, 64, seed=seed) for seed in range(3))
        mask = torch.rand(2, 1, 8, 8, generator=torch.Generator().manual_seed(4)) > 0.3
        mask[..., 0] = True
        out = torch.empty_like(q)
        result, lse = intfa.attention(q, k, v, attn_mask=mask, return_lse=True, out=out)
        self.assertIs(result, out)
        scores = (q.double() @ k.double().transpose(-1, -2) / 8).masked_fill(~mask, -math.inf)
        self.assertLess(max_error(lse, torch.logsumexp(scores, dim=-1)), 1e-4)
        self.assertLess(max_error(out, torch.softmax(scores, dim=-1) @ v.double()), 2e-3)

    def test_each_reason_warns_once_counts_each_call_and_raises_under_policy_error(self):
        q = halves(1, 2, 16, 64)
        cases = {
            "attn_mask": ((q, q, q), dict(attn_mask=torch.ones(16, 16, dtype=torch.bool)),
                          intfa.Unsupported, "attn_mask"),
            "dropout": ((q, q, q), dict(dropout_p=0.1), intfa.Unsupported, "dropout_p"),
            "dtype": ((q.float(), q.float(), q.float()), {}, intfa.InvalidArgument, "q.dtype"),
            "head_dim": ((halves(1, 2, 16, 36),) * 3, {}, intfa.InvalidArgument, "q.shape"),
            "strides": ((halves(1, 2, 64, 16).transpose(2, 3),) * 3, {},
                        intfa.InvalidArgument, "q.stride"),
            "shape": ((halves(1, 2, 0, 64),) * 3, {}, intfa.InvalidArgument, "q.shape"),
            "device": ((q, q, q), {}, intfa.InvalidArgument, "q.device"),
        }
        for reason, (tensors, options, error, field) in cases.items():
            with self.subTest(reason=reason):
                intfa.reset_fallback_stats()
                _, first = self.fallback_warnings(lambda: intfa.attention(*tensors, **options))
                _, second = self.fallback_warnings(lambda: intfa.attention(*tensors, **options))
                self.assertEqual(len(first), 1)
                self.assertEqual(second, [])
                self.assertEqual(intfa.fallback_stats(), {reason: 2})
                with self.assertRaises(error) as caught:
                    intfa.attention(*tensors, fallback="error", **options)
                self.assertEqual(caught.exception.field, field)

    def test_the_process_default_applies_without_an_argument(self):
        self.addCleanup(intfa.set_fallback, intfa.set_fallback("error"))
        with self.assertRaises(intfa.InvalidArgument):
            intfa.attention(*(halves(1, 2, 16, 64),) * 3)
        self.assertIsNotNone(intfa.attention(*(halves(1, 2, 16, 64),) * 3, fallback="sdpa"))

    def test_callers_mistakes_raise_whatever_the_policy(self):
        q = halves(1, 2, 16, 64)
        for call, field in ((lambda: intfa.attention(q, q.int(), q), "k.dtype"),
                            (lambda: intfa.attention(q, q, q, layout="BHND"), "layout"),
                            (lambda: intfa.attention(q, q, q, fallback="sdp"), "fallback"),
                            (lambda: intfa.attention(halves(1, 3, 16, 64), q, q), "q.shape"),
                            (lambda: intfa.attention(q, q, q, out=q[0]), "out.shape")):
            with self.assertRaises(intfa.InvalidArgument) as caught:
                call()
            self.assertEqual(caught.exception.field, field)
        self.assertEqual(intfa.fallback_stats(), {})


@needs_torch
class OutArgumentTest(FallbackCase):
    def assert_invalid_out(self, field, out, q=None):
        q = q if q is not None else halves(1, 2, 16, 64)
        with self.assertRaises(intfa.InvalidArgument) as caught:
            intfa.attention(q, q, q, out=out, fallback="error")
        self.assertEqual(caught.exception.field, field, str(caught.exception))
        self.assertIn(f"invalid {field} = ", str(caught.exception))

    def test_out_must_be_a_tensor_like_q(self):
        self.assert_invalid_out("out", [[0.0]])
        self.assert_invalid_out("out.dtype", torch.empty(1, 2, 16, 64))
        self.assert_invalid_out("out.shape", torch.empty(1, 2, 16, 128, dtype=torch.float16))

    def test_out_must_be_writable_by_the_kernel(self):
        self.assert_invalid_out("out.stride",
                                torch.empty(1, 2, 64, 16, dtype=torch.float16).transpose(2, 3))
        odd_rows = torch.empty(2 * 16 * 65, dtype=torch.float16).as_strided(
            (1, 2, 16, 64), (2 * 16 * 65, 16 * 65, 65, 1))  # rows 130 bytes apart
        self.assert_invalid_out("out.stride", odd_rows)
        overlapping = torch.empty(4096, dtype=torch.float16).as_strided((1, 2, 16, 64),
                                                                        (0, 64, 2, 1))
        self.assert_invalid_out("out.stride", overlapping)

    def test_a_valid_out_passes_the_checks(self):
        # Valid everywhere but the device, which is checked last.
        out = torch.empty(1, 16, 2, 64, dtype=torch.float16).transpose(1, 2)
        self.assert_invalid_out("q.device", out)


if __name__ == "__main__":
    unittest.main()
