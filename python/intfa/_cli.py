"""The ``intfa`` console script of the wheel: runs the C++ ``intfa`` tool installed inside the
package (intfa/bin/intfa, built from tools/intfa with the extension), so that ``intfa info``,
``intfa precompile``, ``intfa cache``, ``intfa run``, ``intfa bench`` and ``intfa tune`` are the
same commands as the CMake build's build/bin/intfa."""
import os
import sys


def tool_path():
    """Where the bundled C++ tool is (it may be missing from a build that skipped it)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "intfa")


def main():
    tool = tool_path()
    if not os.access(tool, os.X_OK):
        sys.exit(f"intfa: the command-line tool is not in this installation (expected {tool}); "
                 "reinstall the package with `pip install .`, or use build/bin/intfa")
    from intfa import _build_config, _nvrtc
    nvrtc_dir = _nvrtc.library_dir() if _build_config.NVRTC_SOURCE == "pypi" else None
    if nvrtc_dir is not None:  # a wheel without the toolkit: the tool takes PyPI's NVRTC too
        path = os.environ.get("LD_LIBRARY_PATH")
        os.environ["LD_LIBRARY_PATH"] = nvrtc_dir + (os.pathsep + path if path else "")
    sys.stdout.flush()
    os.execv(tool, [tool, *sys.argv[1:]])  # its exit status and signals are the command's
