"""What needs no PyTorch: the runtime's facts and counters, and ahead-of-time kernel compiles."""
from intfa import _intfa
from intfa._errors import invalid_argument

# The C++ defaults (intfa::AttentionOptions{}), the one source of truth for the Python defaults.
DEFAULTS = _intfa.default_options()

_DTYPE_NAMES = {"f16": "f16", "float16": "f16", "half": "f16", "bf16": "bf16", "bfloat16": "bf16"}


def _as_list(value):
    if isinstance(value, (str, bytes, int, float, bool)) or not hasattr(value, "__iter__"):
        return [value]
    return list(value)


def _dtype_name(dtype):
    # torch.float16 prints as "torch.float16": accept dtypes without importing torch.
    name = str(dtype).replace("torch.", "")
    if name not in _DTYPE_NAMES:
        raise invalid_argument("dtypes", dtype, "expected torch.float16 or torch.bfloat16")
    return _DTYPE_NAMES[name]


def cache_info():
    """The runtime as ``intfa info`` reports it, as a dict: ``version``, ``nvrtc_version``,
    ``gpu_available``, ``gpu``, ``target_arch`` ("" when there is neither a GPU nor INTFA_ARCH),
    ``cache_directory`` (None when INTFA_CACHE_DISABLE=1), ``cache_entries``, ``cache_bytes``,
    ``deploy_cache`` (INTFA_DEPLOY_CACHE or None), and this process's counters:
    ``nvrtc_compiles``, ``disk_hits``, ``bundle_hits``, ``disk_misses``, ``memory_hits``,
    ``module_loads``."""
    return _intfa.runtime_info()


def precompile(head_dims=(64, 128, 256), variants=("full_int8", "half_int8"),
               dtypes=("float16",), causal=(False, True), *, arch=None, v_granularity=None,
               p_encoding=None, p_scale=None, smooth_k=False, jobs=0):
    """Compiles now, into the kernel cache, the kernels ``intfa.attention`` will launch for these
    head dims, variants, input dtypes (torch dtypes or names) and causal settings: the quantize
    kernels and the attention kernel at the heuristic's tile config (a tuning database entry for a
    particular shape may pick another). Each argument takes one value or a sequence.

    ``arch`` ("sm_80", "sm_86", "sm_87", "sm_89", "sm_90a", "sm_100a", "sm_120", "sm_121")
    defaults to INTFA_ARCH, else the GPU's own;
    naming one needs no GPU. ``jobs`` parallel NVRTC compiles (0: all cores). The numerics options
    default as in ``intfa.attention``; ``smooth_k`` adds K's smoothing kernels. Returns a dict:
    ``arch``, ``kernels``, ``compiled_now``, ``already_present``, ``specs``. Raises NoDevice when
    no arch can be named, InvalidArgument naming a bad argument, CompileError when NVRTC rejects a
    kernel.

    For a deployment bundle built on another machine use ``intfa precompile --out DIR`` (the
    command-line tool, which ``pip install`` puts on PATH) and INTFA_DEPLOY_CACHE instead."""
    if not isinstance(jobs, int) or jobs < 0:
        raise invalid_argument("jobs", jobs, "expected an int >= 0")
    for name, value in (("head_dims", head_dims), ("causal", causal)):
        for item in _as_list(value):
            wanted = int if name == "head_dims" else bool
            if not isinstance(item, wanted) or (wanted is int and isinstance(item, bool)):
                raise invalid_argument(name, repr(item), f"expected {wanted.__name__} values")
    return _intfa.precompile(
        arch=arch or "",
        head_dims=_as_list(head_dims),
        variants=[str(variant) for variant in _as_list(variants)],
        dtypes=[_dtype_name(dtype) for dtype in _as_list(dtypes)],
        causal=_as_list(causal),
        p_encoding=p_encoding or DEFAULTS["p_encoding"],
        p_scale=p_scale or DEFAULTS["p_scale"],
        v_granularity=v_granularity or DEFAULTS["v_granularity"],
        smooth_k=bool(smooth_k), jobs=jobs)
