"""Where the extension's NVRTC comes from. A wheel built for machines without the CUDA toolkit
(scripts/build_wheel.sh: CMake's INTFA_PYTHON_NVRTC=pypi, recorded in ``_build_config``) takes
libnvrtc from PyPI's nvidia-cuda-nvrtc package, which pip installs as
site-packages/nvidia/cu<major>/lib/libnvrtc.so.<major> (and the CUDA headers, from
nvidia-cuda-runtime, as .../nvidia/cu<major>/include). The extension and the ``intfa`` tool are
linked against libnvrtc.so.<major> with that folder in their RUNPATH relative to themselves, which
finds it only when intfa and the nvidia packages share one site-packages; so the package opens the
library itself first, by its absolute path, from whichever entry of sys.path holds it (a venv with
--system-site-packages over torch's nvidia packages, a --target install, ...). The extension's own
reference to libnvrtc.so.<major> is then the library already loaded, whatever LD_LIBRARY_PATH or
the loader's cache name. A build against the toolkit (``pip install .``) loads nothing here."""
import ctypes
import os
import sys

from intfa import _build_config


def library_dir():
    """The nvidia/cu<major>/lib folder holding libnvrtc.so.<major> on sys.path, or None."""
    major = _build_config.CUDA_MAJOR
    for entry in sys.path:
        folder = os.path.join(entry or os.getcwd(), "nvidia", f"cu{major}", "lib")
        if os.path.isfile(os.path.join(folder, f"libnvrtc.so.{major}")):
            return folder
    return None


def preload():
    """Opens the PyPI NVRTC (global symbols, so that the extension binds to it) in a wheel built
    for it; returns its folder, or None when this build uses the toolkit's or none is on sys.path
    (the extension's import then says which library is missing)."""
    if _build_config.NVRTC_SOURCE != "pypi":
        return None
    folder = library_dir()
    if folder is None:
        return None
    major = _build_config.CUDA_MAJOR
    # NVRTC opens its builtins (libnvrtc-builtins.so.<major>.<minor>) by name when it first
    # compiles; the loader would look for them only in LD_LIBRARY_PATH, its cache and the system
    # folders (not beside NVRTC: seen with 13.0.88), so they are opened here first and found then
    # by their soname. Not the .alt. variants, which NVRTC does not open by default.
    for name in sorted(os.listdir(folder)):
        if name.startswith(f"libnvrtc-builtins.so.{major}."):
            ctypes.CDLL(os.path.join(folder, name), mode=ctypes.RTLD_GLOBAL)
    ctypes.CDLL(os.path.join(folder, f"libnvrtc.so.{major}"), mode=ctypes.RTLD_GLOBAL)
    return folder


def missing_hint():
    """What to install when the extension finds no libnvrtc.so.<major>."""
    major = _build_config.CUDA_MAJOR
    if _build_config.NVRTC_SOURCE == "pypi":
        return (f"this intfa wheel takes NVRTC from PyPI: pip install 'nvidia-cuda-nvrtc>={major},"
                f"<{major + 1}' into the environment that runs it (no nvidia/cu{major}/lib/"
                f"libnvrtc.so.{major} on sys.path)")
    return (f"intfa was built against the CUDA {major} toolkit's NVRTC: install that toolkit, or "
            f"pip install 'nvidia-cuda-nvrtc>={major},<{major + 1}' beside intfa")
