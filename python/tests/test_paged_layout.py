"""The paged cache's layout and precompile arguments, without PyTorch: shapes as
templates/decode/README.md gives them, and each bad value an InvalidArgument naming the Python
argument."""
import unittest

import intfa

import support  # noqa: F401 (the tests' own kernel cache)


class ArgumentsCase(unittest.TestCase):
    def assert_invalid(self, field, call, *args, **kwargs):
        with self.assertRaises(intfa.InvalidArgument) as caught:
            call(*args, **kwargs)
        self.assertEqual(caught.exception.field, field, str(caught.exception))
        self.assertIn(f"invalid {field} = ", str(caught.exception))
        return caught.exception


class PagedLayoutTest(ArgumentsCase):
    def test_int8_has_one_float32_scale_per_token_and_head(self):
        layout = intfa.paged_layout(10, 16, 8, 128)
        self.assertEqual(layout["k_data"], ((10, 8, 16, 128), "uint8"))
        self.assertEqual(layout["v_data"], ((10, 8, 16, 128), "uint8"))
        self.assertEqual(layout["k_scale"], ((10, 8, 16), "float32"))
        self.assertEqual(layout["k_offset"], ((8, 128), "float32"))

    def test_int4_packs_two_values_a_byte_with_a_float16_scale_per_32_channels(self):
        layout = intfa.paged_layout(3, 64, 2, 256, bits=4)
        self.assertEqual(layout["k_data"], ((3, 2, 64, 128), "uint8"))
        self.assertEqual(layout["v_scale"], ((3, 2, 64, 8), "float16"))

    def test_each_bad_size_names_its_argument(self):
        self.assert_invalid("page_size", intfa.paged_layout, 10, 24, 8, 128)
        self.assert_invalid("head_dim", intfa.paged_layout, 10, 16, 8, 96)
        self.assert_invalid("bits", intfa.paged_layout, 10, 16, 8, 128, 6)
        self.assert_invalid("num_pages", intfa.paged_layout, 0, 16, 8, 128)
        self.assert_invalid("num_kv_heads", intfa.paged_layout, 10, 16, 0, 128)

    def test_values_of_the_wrong_type_are_refused_not_converted(self):
        self.assert_invalid("num_pages", intfa.paged_layout, True, 16, 8, 128)
        self.assert_invalid("page_size", intfa.paged_layout, 10, 16.0, 8, 128)
        self.assert_invalid("num_pages", intfa.paged_layout, 2**40, 16, 8, 128)

    def test_caches_past_32_bit_row_indices_are_refused(self):
        error = self.assert_invalid("num_pages", intfa.paged_layout, 2**26, 16, 8, 128)
        self.assertIn("2^31", str(error))


class PrecompilePagedArgumentsTest(ArgumentsCase):
    def test_bad_lists_are_refused_before_compiling(self):
        self.assert_invalid("head_dims", intfa.precompile_paged, head_dims=96, arch="sm_80")
        self.assert_invalid("bits", intfa.precompile_paged, head_dims=64, bits=2, arch="sm_80")
        self.assert_invalid("dtypes", intfa.precompile_paged, head_dims=64, dtypes="float32",
                            arch="sm_80")
        self.assert_invalid("head_dims", intfa.precompile_paged, head_dims=[], arch="sm_80")
        self.assert_invalid("arch", intfa.precompile_paged, head_dims=64, arch="sm_70")
        self.assert_invalid("jobs", intfa.precompile_paged, head_dims=64, jobs=-1, arch="sm_80")


if __name__ == "__main__":
    unittest.main()
