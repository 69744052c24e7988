"""intfa's exceptions: the Python side of include/intfa/errors.hpp.

The C++ runtime's errors arrive as these classes with the C++ message (python/src/errors.cpp
translates them); the torch layer raises the same classes for what it rejects itself, with
messages in the C++ form "invalid <field> = <value>: <expectation>".
"""


class Error(RuntimeError):
    """Every failure intfa reports. ``status`` is the C API's status name ("invalid_argument",
    "unsupported", "compile_error", "driver_error", "no_device", "cache_error", "internal")."""

    default_status = "internal"

    def __init__(self, message, status=None, **attributes):
        super().__init__(message)
        self.status = status or self.default_status
        for name, value in attributes.items():
            setattr(self, name, value)


class InvalidArgument(Error, ValueError):
    """A caller-supplied value is wrong; ``field`` names it ("q.dtype", "problem.head_dim") and
    ``value`` gives it. Raised before anything is launched."""

    default_status = "invalid_argument"


class Unsupported(Error, NotImplementedError):
    """A valid request intfa cannot serve (arch, attention mask, dropout, ...)."""

    default_status = "unsupported"


class CompileError(Error):
    """NVRTC rejected a generated kernel: ``spec`` is the kernel, ``log`` NVRTC's whole log."""

    default_status = "compile_error"


class DriverError(Error):
    """A CUDA driver call failed: ``call``, ``result`` (the CUresult) and ``result_name``."""

    default_status = "driver_error"


class NoDevice(Error):
    """No CUDA driver or GPU where one is needed (or no arch to compile for)."""

    default_status = "no_device"


class CacheError(Error):
    """The kernel cache could not be used in a way that must fail the call."""

    default_status = "cache_error"


class InternalError(Error):
    """A broken invariant inside intfa: a bug, please report it."""

    default_status = "internal"


# Shown and pickled as the names the package exports (intfa.InvalidArgument, ...).
for _class in (Error, InvalidArgument, Unsupported, CompileError, DriverError, NoDevice,
               CacheError, InternalError):
    _class.__module__ = "intfa"


def invalid_argument(field, value, expectation):
    """An InvalidArgument worded as the C++ one is."""
    return InvalidArgument(f"invalid {field} = {value}: {expectation}", field=field,
                           value=str(value))
