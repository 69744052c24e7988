"""The argument checks that need no PyTorch (intfa._checks, intfa.precompile): a bad value is an
InvalidArgument (a ValueError) naming the Python argument, never a pybind11 TypeError, an
OverflowError, or a value silently read as something else."""
import ast
import os
import unittest

import intfa
from intfa import _checks

import support  # noqa: F401 (the tests' own kernel cache)


class ArgumentsCase(unittest.TestCase):
    def assert_invalid(self, field, call, *args, **kwargs):
        with self.assertRaises(intfa.InvalidArgument) as caught:
            call(*args, **kwargs)
        self.assertEqual(caught.exception.field, field, str(caught.exception))
        self.assertIn(f"invalid {field} = ", str(caught.exception))
        return caught.exception


class SoftmaxScaleTest(ArgumentsCase):
    def test_a_positive_number_is_passed_on_and_none_means_the_default(self):
        self.assertEqual(_checks.resolve_sm_scale(0.125), 0.125)
        self.assertEqual(_checks.resolve_sm_scale(2), 2.0)
        self.assertEqual(_checks.resolve_sm_scale(None), 0.0)

    def test_a_bool_is_not_a_scale(self):
        self.assert_invalid("sm_scale", _checks.resolve_sm_scale, True)

    def test_an_int_beyond_any_float_is_an_invalid_argument_not_an_overflow_error(self):
        self.assert_invalid("sm_scale", _checks.resolve_sm_scale, 10**400)

    def test_what_float32_cannot_hold_is_refused(self):
        for scale in (1e300, 1e-320, 3e38):
            error = self.assert_invalid("sm_scale", _checks.resolve_sm_scale, scale)
            self.assertIn("float32", str(error))

    def test_the_error_names_the_argument_given(self):
        self.assert_invalid("scale", _checks.resolve_sm_scale, "0.1", "scale")


def problem(**changes):
    values = dict(batch=1, heads_q=4, heads_kv=2, seq_q=16, seq_kv=16, head_dim=64,
                  causal=False, variant="full_int8")
    values.update(changes)
    return values


class ProblemTest(ArgumentsCase):
    def test_a_valid_problem_passes(self):
        _checks.validate_problem(_checks.TENSOR_PROBLEM, **problem())

    def test_the_cpp_rules_name_the_python_argument(self):
        error = self.assert_invalid("q.shape", _checks.validate_problem, _checks.TENSOR_PROBLEM,
                                    **problem(head_dim=96))
        self.assertIn("supported head dims are 64, 128 and 256", str(error))
        self.assertIn("head dim of q", str(error))
        self.assert_invalid("q.shape", _checks.validate_problem, _checks.TENSOR_PROBLEM,
                            **problem(heads_q=3))
        self.assert_invalid("max_seqlen_k", _checks.validate_problem, _checks.VARLEN_PROBLEM,
                            **problem(seq_kv=2**29))

    def test_sizes_beyond_int32_are_an_invalid_argument_not_a_type_error(self):
        self.assert_invalid("max_seqlen_q", _checks.validate_problem, _checks.VARLEN_PROBLEM,
                            **problem(seq_q=2**40))
        self.assert_invalid("k.shape", _checks.validate_problem, _checks.TENSOR_PROBLEM,
                            **problem(seq_kv=2**40))


class OptionTableTest(unittest.TestCase):
    def test_k_granularity_is_per_token_by_default_or_per_block(self):
        self.assertEqual(intfa._intfa.option_values()["k_granularity"], ("token", "block"))
        self.assertEqual(intfa._intfa.default_options()["k_granularity"], "token")


# Values that are no spelling of any option: `x or default` read the falsy ones as the default
# (issue 42, item 9). The ints include the C enums' values (0: per-tensor V, s8 P, running max).
NOT_AN_OPTION = (0, 1, 2, -1, False, True, "", " ", [], (), {}, 0.0, b"u8", ["tensor"],
                 object())


class OptionTest(ArgumentsCase):
    """_checks.option, the one check of the numerics options of every entry point (precompile,
    attention, attention_int8, attention_varlen, quantize, the integrations, distributed)."""

    def test_none_and_only_none_is_the_cpp_default(self):
        # The variant's default is the per-call table's ("auto": resolve_variant).
        cpp = dict(intfa._intfa.default_options(), variant="auto")
        self.assertEqual(set(_checks.DEFAULTS), set(cpp))
        for name, default in cpp.items():
            self.assertEqual(_checks.option(name, None), default, name)

    def test_auto_resolves_to_the_tables_variant_on_a_gpu_and_to_full_int8_elsewhere(self):
        import types
        from unittest import mock
        cpu = types.SimpleNamespace(type="cpu", index=None)
        gpu = types.SimpleNamespace(type="cuda", index=3)
        self.assertEqual(_checks.resolve_variant("auto", cpu, 64, 100, 100, False), "full_int8")
        self.assertEqual(_checks.resolve_variant("half_int8", gpu, 64, 100, 100, False),
                         "half_int8")
        with mock.patch.object(_checks._intfa, "auto_variant",
                               return_value=("half_int8", "the table's row")) as table:
            self.assertEqual(_checks.resolve_variant("auto", gpu, 128, 300, 500, True),
                             "half_int8")
        table.assert_called_once_with(device_index=3, head_dim=128, seq_q=300, seq_kv=500,
                                      causal=True)

    def test_each_name_of_the_option_table_is_itself(self):
        for name, names in intfa._intfa.option_values().items():
            for value in names:
                self.assertEqual(_checks.option(name, value), value)
        self.assertIs(_checks.option("smooth_k", True), True)
        self.assertIs(_checks.option("smooth_k", False), False)
        # The rotation takes True and False for its names "on" and "off" (auto: the default).
        self.assertEqual(_checks.option("rotate", True), "on")
        self.assertEqual(_checks.option("rotate", False), "off")
        self.assertEqual(_checks.option("rotate", None), "auto")

    def test_anything_else_is_refused_naming_the_option(self):
        for name, names in intfa._intfa.option_values().items():
            for value in NOT_AN_OPTION + (names[0].upper(), names[0] + " ", "default", "None"):
                if name == "rotate" and isinstance(value, bool):
                    continue  # "on" and "off"
                with self.subTest(name=name, value=value):
                    error = self.assert_invalid(name, _checks.option, name, value)
                    self.assertIn(" or ".join(map(repr, names)), str(error))
        for name in ("smooth_k",):
            for value in NOT_AN_OPTION + ("True", "no"):
                if isinstance(value, bool):
                    continue
                with self.subTest(name=name, value=value):
                    self.assert_invalid(name, _checks.option, name, value)

    def test_the_message_shows_an_empty_string_as_one(self):
        error = self.assert_invalid("k_granularity", _checks.option, "k_granularity", "")
        self.assertIn("invalid k_granularity = '': ", str(error))

    def test_no_entry_point_defaults_an_option_with_or(self):
        # `option or default` reads 0, "", False and [] as the default. The torch layer's entry
        # points cannot run without torch: their source is read instead (the installed package's,
        # the one these tests import).
        options = set(intfa._intfa.default_options()) | {"variant"}
        package = os.path.dirname(intfa.__file__)
        found = []
        for folder, _, files in os.walk(package, followlinks=True):
            for file in (f for f in files if f.endswith(".py")):
                path = os.path.join(folder, file)
                with open(path, encoding="utf-8") as stream:
                    tree = ast.parse(stream.read(), path)
                for node in ast.walk(tree):
                    if (isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or)
                            and any(isinstance(value, ast.Name) and value.id in options
                                    for value in node.values)):
                        found.append(f"{os.path.relpath(path, package)}:{node.lineno}: "
                                     f"{ast.unparse(node)}")
        self.assertEqual(found, [], "use _checks.option (only None is the default)")


class PrecompileArgumentsTest(ArgumentsCase):
    """Each is refused before anything is compiled (the C++ side would raise TypeError or read a
    wrong value)."""

    def test_ints_beyond_what_the_call_takes(self):
        self.assert_invalid("head_dims", intfa.precompile, head_dims=2**40, arch="sm_80")
        self.assert_invalid("jobs", intfa.precompile, head_dims=64, jobs=2**40, arch="sm_80")
        self.assert_invalid("jobs", intfa.precompile, head_dims=64, jobs=True, arch="sm_80")

    def test_strings_of_the_wrong_type(self):
        self.assert_invalid("arch", intfa.precompile, head_dims=64, arch=80)
        self.assert_invalid("p_scale", intfa.precompile, head_dims=64, arch="sm_80", p_scale=5)
        self.assert_invalid("p_encoding", intfa.precompile, head_dims=64, arch="sm_80",
                            p_encoding="u7")
        self.assert_invalid("variants", intfa.precompile, variants="int4", arch="sm_80")
        self.assert_invalid("smooth_k", intfa.precompile, head_dims=64, arch="sm_80",
                            smooth_k="no")
        self.assert_invalid("rotate", intfa.precompile, head_dims=64, arch="sm_80", rotate=1)

    def test_k_granularity_is_one_of_the_option_tables_names(self):
        error = self.assert_invalid("k_granularity", intfa.precompile, head_dims=64, arch="sm_80",
                                    k_granularity="channel")
        self.assertIn("expected 'token' or 'block'", str(error))

    def test_a_falsy_option_is_refused_not_read_as_the_default(self):
        # Issue 42, item 9: each of these compiled the default kernels. 0 is per-tensor V to C.
        minimal = dict(head_dims=64, variants="half_int8", causal=False, arch="sm_80")
        for name, value in (("v_granularity", 0), ("p_encoding", 0), ("p_scale", False),
                            ("k_granularity", ""), ("v_granularity", []), ("p_scale", ""),
                            ("k_granularity", 0), ("smooth_k", 0), ("rotate", [])):
            with self.subTest(name=name, value=value):
                self.assert_invalid(name, intfa.precompile, **minimal, **{name: value})

    def test_a_generator_is_read_once(self):
        report = intfa.precompile(head_dims=(d for d in [64]), variants="half_int8",
                                  causal=(c for c in [False]), arch="sm_80")
        # K smoothing's mean pass, K's and Q's rows, attention.
        self.assertEqual(report["kernels"], 4, report["specs"])
        self.assertTrue(all(" d64 " in spec for spec in report["specs"]), report["specs"])


if __name__ == "__main__":
    unittest.main()
