"""What the binding's tests share: the package under test, torch when usable, skip decorators that
say why a test cannot run here."""
import atexit
import importlib
import os
import shutil
import tempfile
import unittest

# The tests compile kernels into the kernel cache. ctest names one in the build tree
# (INTFA_CACHE_DIR); run any other way, they get one of their own, removed at exit, and never
# touch the user's. intfa reads the variable at the first call that needs the cache, not at
# import (PackageTest.test_import_does_not_depend_on_the_cache_variables).
if not os.environ.get("INTFA_CACHE_DIR"):
    TEST_CACHE_DIR = tempfile.mkdtemp(prefix="intfa-python-tests-")
    os.environ["INTFA_CACHE_DIR"] = TEST_CACHE_DIR
    atexit.register(shutil.rmtree, TEST_CACHE_DIR, ignore_errors=True)

import intfa  # noqa: E402 (after the cache variable)

torch = None if intfa.TORCH_UNAVAILABLE else importlib.import_module("torch")

needs_torch = unittest.skipIf(
    torch is None, f"needs PyTorch >= 2.4, and here {intfa.TORCH_UNAVAILABLE}")


def _gpu_problem():
    if torch is None:
        return f"needs PyTorch with CUDA, and here {intfa.TORCH_UNAVAILABLE}"
    if not torch.cuda.is_available():
        return "needs a CUDA GPU, and torch.cuda.is_available() is False here"
    return None


GPU_PROBLEM = _gpu_problem()
needs_gpu = unittest.skipIf(GPU_PROBLEM is not None, GPU_PROBLEM or "")


def report(line):
    """A measurement for the log: printed, and appended to $INTFA_TEST_REPORT when set."""
    print(line, flush=True)
    path = os.environ.get("INTFA_TEST_REPORT")
    if path:
        with open(path, "a") as stream:
            stream.write(line + "\n")
