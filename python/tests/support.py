"""What the binding's tests share: the package under test, torch when usable, skip decorators that
say why a test cannot run here."""
import importlib
import os
import unittest

import intfa

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
