"""The package builds, imports and works without a GPU (and, for these tests, without torch)."""
import os
import subprocess
import sys
import tempfile
import unittest

import intfa
from intfa import _intfa

from support import torch


class PackageTest(unittest.TestCase):
    def test_imports_the_extension_beside_the_package(self):
        package_dir = os.path.dirname(os.path.abspath(intfa.__file__))
        self.assertEqual(os.path.dirname(os.path.abspath(_intfa.__file__)), package_dir)
        expected = os.environ.get("INTFA_EXPECT_PACKAGE_DIR")
        if expected:  # set by the ctest test: the build tree's copy, not an installed one
            self.assertEqual(package_dir, os.path.abspath(expected))

    def test_version_is_the_libraries(self):
        self.assertEqual(intfa.__version__, intfa.cache_info()["version"])
        self.assertRegex(intfa.__version__, r"^\d+\.\d+\.\d+")

    def test_cache_info_describes_runtime_and_cache(self):
        info = intfa.cache_info()
        for key in ("nvrtc_version", "gpu_available", "gpu", "target_arch", "cache_directory",
                    "cache_entries", "cache_bytes", "deploy_cache", "nvrtc_compiles",
                    "disk_hits", "bundle_hits", "disk_misses", "memory_hits", "module_loads"):
            self.assertIn(key, info)
        self.assertIsInstance(info["gpu_available"], bool)
        self.assertRegex(info["nvrtc_version"], r"^\d+\.\d+$")
        if os.environ.get("INTFA_CACHE_DIR"):
            self.assertEqual(info["cache_directory"], os.environ["INTFA_CACHE_DIR"])

    def test_cache_info_says_where_nvrtc_and_the_headers_came_from(self):
        info = intfa.cache_info()
        self.assertTrue(os.path.isfile(info["nvrtc_library"]), info["nvrtc_library"])
        self.assertIn("libnvrtc", os.path.basename(info["nvrtc_library"]))
        self.assertIn(info["nvrtc_source"], ("PyPI package nvidia-cuda-nvrtc", "CUDA toolkit"))
        from intfa import _build_config
        self.assertIn(_build_config.NVRTC_SOURCE, ("toolkit", "pypi"))
        if _build_config.NVRTC_SOURCE == "pypi":
            self.assertEqual(info["nvrtc_source"], "PyPI package nvidia-cuda-nvrtc")
        if info["cuda_include_dir"] is not None:
            self.assertTrue(os.path.isfile(os.path.join(info["cuda_include_dir"], "cuda.h")))
            self.assertIn(info["cuda_headers_source"],
                          ("PyPI package nvidia-cuda-runtime", "CUDA toolkit"))

    def test_error_classes_follow_the_cpp_hierarchy(self):
        for cls in (intfa.InvalidArgument, intfa.Unsupported, intfa.CompileError,
                    intfa.DriverError, intfa.NoDevice, intfa.CacheError, intfa.InternalError):
            self.assertTrue(issubclass(cls, intfa.Error))
        self.assertTrue(issubclass(intfa.InvalidArgument, ValueError))
        self.assertTrue(issubclass(intfa.Error, RuntimeError))

    def test_import_does_not_depend_on_the_cache_variables(self):
        # The error belongs to the first call that needs the cache, and names the variable.
        code = ("import intfa\n"
                "try:\n"
                "    intfa.cache_info()\n"
                "except intfa.InvalidArgument as error:\n"
                "    print('refused', error.field)\n")
        for variable, value in (("INTFA_CACHE_DIR", "relative/cache"),
                                ("INTFA_CACHE_DISABLE", "maybe")):
            environment = dict(os.environ, **{variable: value})
            result = subprocess.run([sys.executable, "-c", code], env=environment,
                                    capture_output=True, text=True)
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertIn(f"refused {variable}", result.stdout)

    def test_the_tests_run_directly_get_a_cache_of_their_own(self):
        # Outside ctest (no INTFA_CACHE_DIR), support.py names a temporary cache before any test
        # calls intfa, and removes it at exit: the user's cache under HOME is never written.
        with tempfile.TemporaryDirectory() as home:
            environment = {name: value for name, value in os.environ.items()
                           if name not in ("INTFA_CACHE_DIR", "XDG_CACHE_HOME")}
            environment["HOME"] = home
            code = "import support, intfa; print(intfa.cache_info()['cache_directory'])"
            result = subprocess.run([sys.executable, "-c", code], env=environment,
                                    cwd=os.path.dirname(os.path.abspath(__file__)),
                                    capture_output=True, text=True)
            self.assertEqual(result.returncode, 0, result.stderr)
            directory = result.stdout.strip()
            self.assertFalse(directory.startswith(home), directory)
            self.assertTrue(os.path.basename(directory).startswith("intfa-python-tests-"),
                            directory)
            self.assertFalse(os.path.exists(directory), "removed at exit")

    def test_dir_lists_the_package_names_and_no_modules_it_used(self):
        # (issue 49: `dir(intfa)` showed `importlib` and `re`, imported for the package's own use)
        public = {name for name in dir(intfa) if not name.startswith("_")}
        self.assertFalse(public & {"importlib", "re"}, sorted(public))
        self.assertLessEqual(set(intfa.__all__), public)

    @unittest.skipIf(torch is not None, "PyTorch is installed here: the torch functions exist")
    def test_torch_functions_say_torch_is_missing(self):
        with self.assertRaisesRegex(ImportError, "needs PyTorch"):
            intfa.attention  # noqa: B018 (the attribute access is the test)


class PrecompileTest(unittest.TestCase):
    def test_compiles_then_finds_kernels_in_cache(self):
        # Full INT8 with per-block V scales, causal off and on: K smoothing's mean pass, K's and
        # Q's rows, V (no scale pass for per-block scales), and one attention kernel per causal
        # setting.
        first = intfa.precompile(head_dims=64, variants="full_int8", causal=(False, True),
                                 arch="sm_80", v_granularity="block", jobs=2)
        self.assertEqual(first["arch"], "sm_80")
        self.assertEqual(first["kernels"], 6, first["specs"])
        self.assertEqual(first["compiled_now"] + first["already_present"], 6)
        self.assertEqual(sum(spec.startswith("attention ") for spec in first["specs"]), 2)
        again = intfa.precompile(head_dims=[64], variants=["full_int8"], causal=[False, True],
                                 arch="sm_80", v_granularity="block")
        self.assertEqual((again["compiled_now"], again["already_present"]), (0, 6))

    def test_k_smoothing_is_in_the_default_set_and_rotate_adds_the_rotated_rows(self):
        # By default (as intfa.attention): the mean pass, K's smoothed rows, Q's rows with the
        # LSE term. Without smoothing, rotated: one rows kernel for Q and K.
        report = intfa.precompile(head_dims=64, variants="half_int8", causal=False, arch="sm_80")
        self.assertEqual(report["kernels"], 4, report["specs"])
        self.assertEqual(sum(spec.startswith("channel_mean") for spec in report["specs"]), 1,
                         report["specs"])
        self.assertEqual(sum("smooth_k" in spec for spec in report["specs"]), 1, report["specs"])
        self.assertEqual(sum("q_dot_k_mean" in spec for spec in report["specs"]), 1,
                         report["specs"])
        rotated = intfa.precompile(head_dims=64, variants="half_int8", causal=False, arch="sm_80",
                                   smooth_k=False, rotate=True)
        self.assertEqual(rotated["kernels"], 2, rotated["specs"])
        self.assertIn("quantize_rows sm_80 d64 f16->i8 rotate", rotated["specs"])

    def test_k_granularity_block_compiles_k_and_attention_per_block(self):
        # Without smoothing: the mean pass (automatic rotation's decisions), Q's rows, K's rows
        # with a scale per 64 rows, and the attention kernel that folds those scales into the
        # softmax.
        report = intfa.precompile(head_dims=64, variants="half_int8", causal=False, arch="sm_80",
                                  smooth_k=False, k_granularity="block")
        self.assertEqual(report["kernels"], 4, report["specs"])
        self.assertIn("channel_mean sm_80 d64 f16", report["specs"])
        per_block = [spec for spec in report["specs"] if " k-scale=block" in spec]
        self.assertEqual(len(per_block), 2, report["specs"])
        self.assertEqual(sum(spec.startswith("attention ") for spec in per_block), 1,
                         report["specs"])

    def test_accepts_torch_dtypes_by_name(self):
        report = intfa.precompile(head_dims=64, variants="half_int8", causal=False,
                                  dtypes="torch.bfloat16", arch="sm_80")
        self.assertTrue(all("bf16" in spec for spec in report["specs"]), report["specs"])

    def test_rejects_unknown_arch(self):
        with self.assertRaises(intfa.InvalidArgument) as caught:
            intfa.precompile(arch="sm_70")
        self.assertEqual(caught.exception.field, "arch")
        self.assertEqual(caught.exception.value, "sm_70")

    def test_rejects_unsupported_head_dim(self):
        with self.assertRaises(intfa.InvalidArgument) as caught:
            intfa.precompile(head_dims=(64, 96), arch="sm_80")
        self.assertEqual(caught.exception.field, "head_dims")
        self.assertIn("64, 128 and 256", str(caught.exception))

    def test_rejects_unknown_variant_and_dtype(self):
        with self.assertRaises(intfa.InvalidArgument) as caught:
            intfa.precompile(variants="int4", arch="sm_80")
        self.assertEqual(caught.exception.field, "variants")
        with self.assertRaises(intfa.InvalidArgument) as caught:
            intfa.precompile(dtypes="float32", arch="sm_80")
        self.assertEqual(caught.exception.field, "dtypes")

    @unittest.skipIf(intfa.cache_info()["target_arch"] != "",
                     "a GPU or INTFA_ARCH names an arch here")
    def test_without_gpu_or_arch_raises_no_device(self):
        with self.assertRaisesRegex(intfa.NoDevice, "INTFA_ARCH"):
            intfa.precompile(head_dims=64)


if __name__ == "__main__":
    unittest.main()
