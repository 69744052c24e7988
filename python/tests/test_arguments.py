"""Argument checks of the torch functions: each bad argument raises the documented error, naming
it, before anything is launched. CPU tensors reach every check but the device one, which comes
last; so these run without a GPU."""
import math
import unittest

import intfa
from intfa import _checks

from support import needs_torch, torch


def halves(*shape, dtype=None):
    return torch.randn(*shape, dtype=dtype or torch.float16)


class ArgumentsCase(unittest.TestCase):
    def assert_invalid(self, field, call, *args, **kwargs):
        """`call` raises InvalidArgument naming `field`, worded as the C++ errors are."""
        with self.assertRaises(intfa.InvalidArgument) as caught:
            call(*args, **kwargs)
        self.assertEqual(caught.exception.field, field, str(caught.exception))
        self.assertIn(f"invalid {field} = ", str(caught.exception))
        return caught.exception


def strict_attention(*arguments, **options):
    """intfa.attention with fallback "error": what would run SDPA raises its typed error."""
    return intfa.attention(*arguments, fallback="error", **options)


@needs_torch
class AttentionArgumentsTest(ArgumentsCase):
    def test_valid_arguments_on_cpu_stop_at_the_device(self):
        q = halves(1, 4, 16, 64)
        error = self.assert_invalid("q.device", strict_attention, q, q, q)
        self.assertIn("expected a CUDA tensor", str(error))

    def test_rejects_a_non_tensor(self):
        self.assert_invalid("q", strict_attention, [[1.0]], halves(1, 1, 1, 64),
                            halves(1, 1, 1, 64))

    def test_rejects_float32(self):
        q = torch.randn(1, 2, 16, 64)
        self.assert_invalid("q.dtype", strict_attention, q, q, q)

    def test_rejects_mixed_dtypes(self):
        q = halves(1, 2, 16, 64)
        self.assert_invalid("k.dtype", strict_attention, q, q.bfloat16(), q)

    def test_rejects_three_dimensions(self):
        q = halves(2, 16, 64)
        self.assert_invalid("q.shape", strict_attention, q, q, q)

    def test_rejects_a_strided_head_dim(self):
        q = halves(1, 2, 64, 16).transpose(2, 3)
        self.assert_invalid("q.stride", strict_attention, q, halves(1, 2, 16, 64),
                            halves(1, 2, 16, 64))

    def test_rejects_batch_mismatch(self):
        self.assert_invalid("k.shape", strict_attention, halves(2, 2, 16, 64), halves(1, 2, 16, 64),
                            halves(1, 2, 16, 64))

    def test_rejects_v_unlike_k(self):
        self.assert_invalid("v.shape", strict_attention, halves(1, 2, 16, 64), halves(1, 2, 16, 64),
                            halves(1, 2, 17, 64))

    def test_head_dims_that_are_no_multiple_of_8_up_to_256_are_refused_naming_q(self):
        for head_dim in (36, 100, 264):
            q = halves(1, 2, 16, head_dim)
            error = self.assert_invalid("q.shape", strict_attention, q, q, q)
            self.assertIn("multiples of 8 up to 256", str(error))
            self.assertIn("head dim of q", str(error))

    def test_other_multiples_of_8_up_to_256_pass_the_checks(self):
        for head_dim in (8, 40, 72, 80, 96, 160, 248):
            q = halves(1, 2, 16, head_dim)
            self.assert_invalid("q.device", strict_attention, q, q, q)

    def test_a_strided_head_dim_is_refused_between_the_kernels_too(self):
        # The kernels read the caller's rows at every head dim (nothing is copied), so the
        # stride-1 rule holds for all of them.
        q = halves(1, 2, 80, 16).transpose(2, 3)
        self.assert_invalid("q.stride", strict_attention, q, halves(1, 2, 16, 80),
                            halves(1, 2, 16, 80))

    def test_v_with_another_head_dim_than_k_names_v(self):
        error = self.assert_invalid("v.shape", strict_attention, halves(1, 2, 16, 64),
                                    halves(1, 2, 16, 64), halves(1, 2, 16, 128))
        self.assertIn("K's head dim", str(error))

    def test_heads_q_must_be_a_multiple_of_heads_kv(self):
        self.assert_invalid("q.shape", strict_attention, halves(1, 3, 16, 64),
                            halves(1, 2, 16, 64), halves(1, 2, 16, 64))

    def test_nhd_layout_reads_heads_from_dimension_two(self):
        # [B, N, H, D]: 4 query heads over 2 KV heads is valid GQA (only the device is wrong);
        # read as HND the same tensors would be 16 heads over 32.
        q, kv = halves(1, 16, 4, 64), halves(1, 32, 2, 64)
        self.assert_invalid("q.device", strict_attention, q, kv, kv, layout="NHD")
        self.assert_invalid("q.shape", strict_attention, q, kv, kv, layout="HND")

    def test_rejects_unknown_layout_variant_and_numerics(self):
        q = halves(1, 2, 16, 64)
        self.assert_invalid("layout", strict_attention, q, q, q, layout="BHND")
        self.assert_invalid("variant", strict_attention, q, q, q, variant="int4")
        self.assert_invalid("v_granularity", strict_attention, q, q, q, v_granularity="row")
        self.assert_invalid("p_encoding", strict_attention, q, q, q, p_encoding="u7")
        self.assert_invalid("p_scale", strict_attention, q, q, q, p_scale="global")

    def test_k_granularity_is_one_of_the_option_tables_names(self):
        q = halves(1, 2, 16, 64)
        for granularity in intfa._intfa.option_values()["k_granularity"] + (None,):
            self.assert_invalid("q.device", strict_attention, q, q, q, k_granularity=granularity)
        error = self.assert_invalid("k_granularity", strict_attention, q, q, q,
                                    k_granularity="channel")
        self.assertIsInstance(error, ValueError)
        self.assertIn("expected 'token' or 'block'", str(error))
        self.assert_invalid("k_granularity", strict_attention, q, q, q, k_granularity=64)

    def test_rejects_zero_negative_and_nan_scale(self):
        q = halves(1, 2, 16, 64)
        for bad in (0.0, -0.125, math.nan, math.inf):
            self.assert_invalid("sm_scale", strict_attention, q, q, q, sm_scale=bad)
        self.assert_invalid("scale", strict_attention, q, q, q, scale=0.1, sm_scale=0.2)

    def test_scales_of_the_wrong_type_or_beyond_float32_name_the_argument(self):
        q = halves(1, 2, 16, 64)
        for bad in (True, 10**400, 1e300, 1e-320):
            self.assert_invalid("sm_scale", strict_attention, q, q, q, sm_scale=bad)
        self.assert_invalid("scale", strict_attention, q, q, q, scale=10**400)

    def test_sdpa_scale_is_accepted_like_sm_scale(self):
        q = halves(1, 2, 16, 64)
        self.assert_invalid("q.device", strict_attention, q, q, q, None, 0.0, True, 0.125)

    def test_attention_mask_and_dropout_are_unsupported(self):
        q = halves(1, 2, 16, 64)
        with self.assertRaisesRegex(intfa.Unsupported, "attn_mask"):
            strict_attention(q, q, q, attn_mask=torch.ones(16, 16, dtype=torch.bool))
        with self.assertRaisesRegex(intfa.Unsupported, "dropout_p"):
            strict_attention(q, q, q, dropout_p=0.1)


@needs_torch
class QuantizeArgumentsTest(ArgumentsCase):
    def test_valid_arguments_on_cpu_stop_at_the_device(self):
        q = halves(1, 2, 16, 64)
        self.assert_invalid("q.device", intfa.quantize, q, q, q, v_granularity="block",
                            smooth_k=True)

    def test_rejects_int8_input(self):
        q = torch.zeros(1, 2, 16, 64, dtype=torch.int8)
        self.assert_invalid("q.dtype", intfa.quantize, q, q)

    def test_rejects_v_unlike_k(self):
        q = halves(1, 2, 16, 64)
        self.assert_invalid("v.shape", intfa.quantize, q, q, halves(1, 1, 16, 64))

    def test_rejects_unknown_granularity(self):
        q = halves(1, 2, 16, 64)
        self.assert_invalid("v_granularity", intfa.quantize, q, q, q, v_granularity="token")


@needs_torch
class AttentionInt8ArgumentsTest(ArgumentsCase):
    """attention_int8 over tensors shaped as quantize makes them (B=1, H=2, N=16, D=64)."""

    def setUp(self):
        self.q8 = torch.zeros(1, 2, 16, 64, dtype=torch.int8)
        self.k8 = torch.zeros(1, 2, 16, 64, dtype=torch.int8)
        padded = intfa._intfa.v_padded_seq(16)
        self.v8 = torch.zeros(1, 2, 64, padded, dtype=torch.int8)
        self.q_scale = torch.ones(1, 2, 16)
        self.k_scale = torch.ones(1, 2, 16)
        self.v_scale = torch.ones(1, 2)

    def args(self, **replace):
        names = ("q8", "k8", "v8", "q_scale", "k_scale", "v_scale")
        return [replace.get(name, getattr(self, name)) for name in names]

    def test_valid_arguments_on_cpu_stop_at_the_device(self):
        self.assert_invalid("q.device", intfa.attention_int8, *self.args(), return_lse=True)

    def test_half_int8_takes_16_bit_v_without_scale(self):
        self.assert_invalid("q.device", intfa.attention_int8,
                            *self.args(v8=halves(1, 2, 16, 64), v_scale=None))
        self.assert_invalid("v_scale", intfa.attention_int8, *self.args(v8=halves(1, 2, 16, 64)))

    def test_rejects_16_bit_q(self):
        self.assert_invalid("q.dtype", intfa.attention_int8, *self.args(q8=halves(1, 2, 16, 64)))

    def test_rejects_v_not_in_the_int8_v_layout(self):
        v8 = torch.zeros(1, 2, 16, 64, dtype=torch.int8)  # [B, H, N, D]: not the V layout
        error = self.assert_invalid("v.shape", intfa.attention_int8, *self.args(v8=v8))
        self.assertIn("INT8 V layout", str(error))

    def test_int8_v_needs_its_scales(self):
        self.assert_invalid("v_scale", intfa.attention_int8, *self.args(v_scale=None))

    def test_v_scale_shape_must_match_a_granularity(self):
        self.assert_invalid("v_scale.shape", intfa.attention_int8,
                            *self.args(v_scale=torch.ones(1, 2, 65)))
        self.assert_invalid("v_scale.shape", intfa.attention_int8,
                            *self.args(v_scale=torch.ones(2)))

    def test_scales_must_be_contiguous_float32_per_token(self):
        self.assert_invalid("q_scale.shape", intfa.attention_int8,
                            *self.args(q_scale=torch.ones(1, 2, 15)))
        self.assert_invalid("k_scale.dtype", intfa.attention_int8,
                            *self.args(k_scale=torch.ones(1, 2, 16, dtype=torch.float16)))
        strided = torch.ones(1, 16, 2).transpose(1, 2)
        self.assert_invalid("q_scale.stride", intfa.attention_int8, *self.args(q_scale=strided))

    def test_rejects_float32_output_and_bad_config(self):
        self.assert_invalid("out_dtype", intfa.attention_int8, *self.args(),
                            out_dtype=torch.float32)
        self.assert_invalid("config", intfa.attention_int8, *self.args(), config=(128, 64, 8))

    def test_k_scales_stay_per_token(self):
        with self.assertRaisesRegex(TypeError, "k_granularity"):
            intfa.attention_int8(*self.args(), k_granularity="block")


@needs_torch
class AttentionVarlenArgumentsTest(ArgumentsCase):
    """attention_varlen over three packed sequences of 5, 0 and 11 tokens (H=4/2, D=64)."""

    def setUp(self):
        self.q = halves(16, 4, 64)
        self.k = halves(16, 2, 64)
        self.v = halves(16, 2, 64)
        self.cu_q = torch.tensor([0, 5, 5, 16], dtype=torch.int32)
        self.cu_k = torch.tensor([0, 5, 5, 16], dtype=torch.int32)

    def call(self, *, max_q=11, max_k=11, **replace):
        names = ("q", "k", "v", "cu_q", "cu_k")
        tensors = [replace.pop(name, getattr(self, name)) for name in names]
        return intfa.attention_varlen(*tensors, max_q, max_k, **replace)

    def test_valid_arguments_on_cpu_stop_at_the_device(self):
        self.assert_invalid("q.device", self.call, is_causal=True, return_lse=True,
                            variant="half_int8", v_granularity="block", smooth_k=True)

    def test_rejects_dense_four_dimensional_tensors(self):
        error = self.assert_invalid("q.shape", self.call, q=halves(1, 16, 4, 64))
        self.assertIn("[total, H, D]", str(error))

    def test_rejects_mixed_dtypes_and_empty_tensors(self):
        self.assert_invalid("v.dtype", self.call, v=self.v.bfloat16())
        self.assert_invalid("k.shape", self.call, k=halves(0, 2, 64), v=halves(0, 2, 64))

    def test_k_and_v_must_match_q(self):
        self.assert_invalid("k.shape", self.call, k=halves(16, 2, 128), v=halves(16, 2, 128))
        self.assert_invalid("v.shape", self.call, v=halves(15, 2, 64))

    def test_offsets_are_int32_vectors_of_one_length(self):
        self.assert_invalid("cu_seqlens_q.dtype", self.call, cu_q=self.cu_q.long())
        self.assert_invalid("cu_seqlens_k.shape", self.call, cu_k=self.cu_k[None])
        self.assert_invalid("cu_seqlens_q.shape", self.call, cu_q=self.cu_q[:1],
                            cu_k=self.cu_k[:1])
        self.assert_invalid("cu_seqlens_k.shape", self.call, cu_k=self.cu_k[:3])
        strided = torch.zeros(8, dtype=torch.int32)[::2]
        self.assert_invalid("cu_seqlens_q.stride", self.call, cu_q=strided, cu_k=strided)

    def test_max_lengths_are_positive_ints(self):
        for bad in (0, -3, 2.5, True, None):
            self.assert_invalid("max_seqlen_q", self.call, max_q=bad)
        self.assert_invalid("max_seqlen_k", self.call, max_k=0)

    def test_problem_rules_have_the_cpp_message(self):
        # 96 runs the d=128 kernels (a head dim between the kernels'); 100 is none.
        self.assert_invalid("q.device", self.call, q=halves(16, 4, 96), k=halves(16, 2, 96),
                            v=halves(16, 2, 96))
        error = self.assert_invalid("q.shape", self.call, q=halves(16, 4, 100),
                                    k=halves(16, 2, 100), v=halves(16, 2, 100))
        self.assertIn("supported head dims are 64, 128 and 256", str(error))
        self.assert_invalid("q.shape", self.call, q=halves(16, 3, 64))

    def test_lengths_beyond_int32_are_invalid_arguments(self):
        self.assert_invalid("max_seqlen_q", self.call, max_q=2**40)
        self.assert_invalid("max_seqlen_k", self.call, max_k=2**29)

    def test_rejects_unknown_numerics_and_bad_scale(self):
        self.assert_invalid("variant", self.call, variant="int4")
        self.assert_invalid("p_scale", self.call, p_scale="global")
        self.assert_invalid("sm_scale", self.call, sm_scale=-1.0)

    def test_k_scales_stay_per_token(self):
        with self.assertRaisesRegex(TypeError, "k_granularity"):
            self.call(k_granularity="block")


# Falsy values that `option or default` read as the default (issue 42, item 9), and ints (the C
# enums' values: 0 is per-tensor V and s8 P to C), by option; only None is the default.
NOT_A_NAME = (0, 1, False, True, "", [])
NOT_A_FLAG = (0, 1, "", "no", [])


@needs_torch
class FalsyOptionsTest(ArgumentsCase):
    """Every entry point's numerics options: None is the default, anything but a valid value is
    refused naming the option (CPU tensors: a valid call stops at the device)."""

    def bad_values(self, name):
        return NOT_A_FLAG if name in ("smooth_k", "rotate") else NOT_A_NAME

    def check(self, call, names):
        for name in names:
            with self.subTest(name=name):
                self.assert_invalid("q.device", call, **{name: None})
            for value in self.bad_values(name):
                with self.subTest(name=name, value=value):
                    self.assert_invalid(name, call, **{name: value})

    def test_attention(self):
        q = halves(1, 2, 16, 64)
        self.check(lambda **options: strict_attention(q, q, q, **options),
                   ("variant", "v_granularity", "p_encoding", "p_scale", "k_granularity",
                    "smooth_k", "rotate"))

    def test_quantize(self):
        q = halves(1, 2, 16, 64)
        self.check(lambda **options: intfa.quantize(q, q, q, **options),
                   ("v_granularity", "smooth_k", "rotate"))

    def test_attention_int8(self):
        int8 = AttentionInt8ArgumentsTest()
        int8.setUp()
        self.check(lambda **options: intfa.attention_int8(*int8.args(), **options),
                   ("p_encoding", "p_scale"))

    def test_attention_varlen(self):
        varlen = AttentionVarlenArgumentsTest()
        varlen.setUp()
        self.check(varlen.call, ("variant", "v_granularity", "p_encoding", "p_scale",
                                 "smooth_k", "rotate"))


@needs_torch
class FakeImplementationTest(unittest.TestCase):
    """The fake implementations torch.compile traces with give the real ops' output shapes."""

    def test_v_scale_shapes_hold_v_scale_count_floats(self):
        for seq_kv in (1, 17, 64, 65, 1000, 4097):
            for granularity in ("tensor", "channel", "block"):
                v = torch.empty(2, 3, seq_kv, 128, dtype=torch.float16, device="meta")
                v8, v_scale = torch.ops.intfa.quantize_v(v, "HND", granularity)
                self.assertEqual(v_scale.numel(), intfa._intfa.v_scale_count(
                    v_granularity=granularity, batch=2, heads_kv=3, seq_kv=seq_kv, head_dim=128))
                self.assertEqual(tuple(v8.shape),
                                 (2, 3, 128, intfa._intfa.v_padded_seq(seq_kv)))

    def test_quantize_qk_keeps_shape_and_layout(self):
        x = torch.empty(2, 100, 4, 64, dtype=torch.bfloat16, device="meta")  # NHD
        for smooth_k, mean_shape in ((False, (0,)), (True, (2, 4, 64))):
            x8, scale, mean = torch.ops.intfa.quantize_qk(x, "NHD", smooth_k)
            self.assertEqual((x8.shape, x8.dtype), (x.shape, torch.int8))
            self.assertEqual(tuple(scale.shape), (2, 4, 100))
            self.assertEqual(tuple(mean.shape), mean_shape)

    def test_attention_returns_q_shape_and_dtype(self):
        q = torch.empty(2, 8, 100, 128, dtype=torch.bfloat16, device="meta")
        kv = torch.empty(2, 2, 300, 128, dtype=torch.bfloat16, device="meta")
        for return_lse, lse_shape in ((True, (2, 8, 100)), (False, (0,))):
            out, lse = torch.ops.intfa.attention(q, kv, kv, True, 0.0, "HND", "full_int8", False,
                                                 "off", return_lse,
                                                 "v_granularity=tensor,p_scale=running")
            self.assertEqual((out.shape, out.dtype), (q.shape, q.dtype))
            self.assertEqual((tuple(lse.shape), lse.dtype), (lse_shape, torch.float32))

    def test_the_numerics_are_one_str_argument_last_defaulting_to_the_cpp_defaults(self):
        # One argument for every option of the list: a new option changes no schema.
        for op in (torch.ops.intfa.attention, torch.ops.intfa.attention_varlen,
                   torch.ops.intfa.attention_int8):
            with self.subTest(op=str(op)):
                schema = op.default._schema
                self.assertEqual((schema.arguments[-1].name, str(schema.arguments[-1].type),
                                  schema.arguments[-1].default_value), ("numerics", "str", ""))
                names = [argument.name for argument in schema.arguments]
                self.assertFalse(set(names) & set(_checks.NUMERICS), names)
        q = torch.empty(1, 4, 100, 64, dtype=torch.float16, device="meta")
        out, lse = torch.ops.intfa.attention(q, q, q, False, 0.0, "HND", "full_int8", True,
                                             "auto", True, "k_granularity=block")
        self.assertEqual((out.shape, tuple(lse.shape)), (q.shape, (1, 4, 100)))

    def test_the_numerics_text_is_built_and_read_back_in_the_lists_order(self):
        from intfa._op_args import numerics_of_text, numerics_text
        numerics = _checks.check_numerics({name: None for name in _checks.NUMERICS})
        self.assertEqual([name for name, _ in numerics], list(_checks.NUMERICS))
        self.assertEqual(numerics_of_text(numerics_text(numerics)), numerics)
        self.assertEqual(numerics_text(()), "")
        self.assertEqual(numerics_of_text(""), ())
        self.assert_invalid_text("p_encoding")

    def assert_invalid_text(self, text):
        from intfa._op_args import numerics_of_text
        with self.assertRaises(intfa.InvalidArgument) as caught:
            numerics_of_text(text)
        self.assertEqual(caught.exception.field, "numerics")

    def test_attention_of_a_padded_head_dim_returns_the_callers_head_dim(self):
        q = torch.empty(1, 77, 4, 80, dtype=torch.float16, device="meta")  # NHD, d=80
        out, lse = torch.ops.intfa.attention(q, q, q, False, 0.0, "NHD", "half_int8", False,
                                             "off", True)
        self.assertEqual((out.shape, tuple(lse.shape)), (q.shape, (1, 4, 77)))

    def test_attention_int8_lse_only_when_asked(self):
        q8 = torch.empty(1, 4, 33, 64, dtype=torch.int8, device="meta")
        v = torch.empty(1, 4, 33, 64, dtype=torch.float16, device="meta")
        scale = torch.empty(1, 4, 33, device="meta")
        for return_lse, lse_shape in ((True, (1, 4, 33)), (False, (0,))):
            out, lse = torch.ops.intfa.attention_int8(q8, q8, v, scale, scale, None, False, 0.0,
                                                      "HND", torch.bfloat16, return_lse, None,
                                                      None, "p_encoding=u8,p_scale=running")
            self.assertEqual((out.shape, out.dtype), (q8.shape, torch.bfloat16))
            self.assertEqual(tuple(lse.shape), lse_shape)

    def test_attention_varlen_is_packed_with_a_heads_by_rows_lse(self):
        q = torch.empty(300, 8, 128, dtype=torch.float16, device="meta")
        kv = torch.empty(500, 2, 128, dtype=torch.float16, device="meta")
        offsets = torch.empty(4, dtype=torch.int32, device="meta")
        for return_lse, lse_shape in ((True, (8, 300)), (False, (0,))):
            out, lse = torch.ops.intfa.attention_varlen(q, kv, kv, offsets, offsets, 200, 300,
                                                        True, 0.0, "full_int8", False, "on",
                                                        return_lse, "v_granularity=channel")
            self.assertEqual((out.shape, out.dtype), (q.shape, q.dtype))
            self.assertEqual(tuple(lse.shape), lse_shape)


@needs_torch
class EagerFastPathTest(unittest.TestCase):
    """Which calls skip the custom op's dispatch (intfa._ops.plain_eager): plain eager ones
    only, so tracing, fake tensors, modes and autograd still see the op."""

    def plain_eager(self, *arguments):
        from intfa import _ops
        return _ops.plain_eager(arguments)

    def test_plain_tensors_and_other_arguments_take_the_fast_path(self):
        self.assertTrue(self.plain_eager(halves(1, 2, 8, 64), None, False, 0.0, "HND", [1, 2]))

    def test_a_tensor_that_needs_a_gradient_goes_through_the_op(self):
        q = halves(1, 2, 8, 64).requires_grad_()
        self.assertFalse(self.plain_eager(q, halves(1, 2, 8, 64)))
        with torch.no_grad():
            self.assertTrue(self.plain_eager(q, halves(1, 2, 8, 64)))

    def test_fake_tensors_and_dispatch_modes_go_through_the_op(self):
        from torch._subclasses.fake_tensor import FakeTensorMode
        with FakeTensorMode() as mode:
            fake = torch.empty(1, 2, 8, 64, dtype=torch.float16)
            self.assertFalse(self.plain_eager(fake))
        self.assertFalse(self.plain_eager(mode.from_tensor(halves(1, 2, 8, 64))))

    def test_a_torch_function_mode_goes_through_the_op(self):
        from torch.overrides import TorchFunctionMode

        class PassThrough(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                return func(*args, **(kwargs or {}))

        q = halves(1, 2, 8, 64)
        with PassThrough():
            self.assertFalse(self.plain_eager(q))
        self.assertTrue(self.plain_eager(q))


if __name__ == "__main__":
    unittest.main()
