"""What needs no PyTorch: the runtime's facts and counters, and ahead-of-time kernel compiles."""
import os

from intfa import _intfa
# DEFAULTS (the C++ defaults) stays importable from here, where it was defined first.
from intfa._checks import (DEFAULTS, OPTION_VALUES, as_list, check_numerics,  # noqa: F401
                           choice, is_int, option)
from intfa._errors import invalid_argument

_DTYPE_NAMES = {"f16": "f16", "float16": "f16", "half": "f16", "bf16": "bf16", "bfloat16": "bf16"}
_HEAD_DIMS = (64, 128, 256)
# The kernels' variants ("auto" chooses among them per call; precompile lists both).
_VARIANTS = tuple(name for name in OPTION_VALUES["variant"] if name != "auto")
_ARCHS = tuple(_intfa.target_archs())  # the C++ list (device::all_archs)
_MAX_JOBS = 1024  # as intfa precompile -j


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
    ``deploy_cache`` (INTFA_DEPLOY_CACHE or None), ``packaged_kernels`` (the kernels the installed
    package ships, read after INTFA_DEPLOY_CACHE, or None), ``nvrtc_library`` (the file NVRTC was opened
    from) and ``nvrtc_source`` ("PyPI package nvidia-cuda-nvrtc" or "CUDA toolkit"),
    ``cuda_include_dir`` and ``cuda_headers_source`` (None when no headers were found; "PyPI package
    nvidia-cuda-runtime" or "CUDA toolkit"), and this process's counters:
    ``nvrtc_compiles``, ``disk_hits``, ``bundle_hits``, ``packaged_hits``, ``disk_misses``,
    ``memory_hits``, ``module_loads``."""
    return _intfa.runtime_info()


# Where a wheel puts the kernels it ships (python/CMakeLists.txt, INTFA_PACKAGED_KERNEL_ARCHS).
PACKAGED_KERNELS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kernels")


def use_packaged_kernels():
    """Reads the kernels this package ships (a precompiled bundle, built into wheels for the
    default shapes) after INTFA_DEPLOY_CACHE and before the user cache; nothing when it ships
    none. Called at import; they serve where the NVRTC that built them, or a newer one of the same
    major version, runs (INTFA_LOG=1 says why they do not)."""
    if os.path.isfile(os.path.join(PACKAGED_KERNELS, "manifest.json")):
        _intfa.use_packaged_kernels(PACKAGED_KERNELS)


def auto_variant(head_dim, seq_q, seq_kv=None, is_causal=False, *, device=0):
    """The variant ``intfa.attention`` runs by default (``variant="auto"``) for a problem of
    ``head_dim``, ``seq_q`` queries against ``seq_kv`` keys (default ``seq_q``) and this causal
    flag on CUDA device ``device`` (an index), and why: ``(name, reason)``, e.g. ``("half_int8",
    "sm_90a d=64: half INT8 (bucket 4k)")``. The table is per arch, measured end to end: the
    fastest variant within the accuracy floor, the more accurate (half INT8) where the two are
    within 2%; rows ``intfa tune --variant-table`` measured on this GPU (the tuning database) come
    first. Raises InvalidArgument naming a bad argument, NoDevice without a GPU."""
    seq_kv = seq_q if seq_kv is None else seq_kv
    for name, value in (("head_dim", head_dim), ("seq_q", seq_q), ("seq_kv", seq_kv),
                        ("device", device)):
        if not is_int(value) or value < (0 if name == "device" else 1):
            raise invalid_argument(name, repr(value), "expected an int >= " +
                                   ("0" if name == "device" else "1"))
    if not isinstance(is_causal, bool):
        raise invalid_argument("is_causal", repr(is_causal), "expected True or False")
    name, reason = _intfa.auto_variant(device_index=device, head_dim=head_dim, seq_q=seq_q,
                                       seq_kv=seq_kv, causal=is_causal)
    return name, reason


def precompile(head_dims=(64, 128, 256), variants=("full_int8", "half_int8"),
               dtypes=("float16",), causal=(False, True), *, arch=None, v_granularity=None,
               p_encoding=None, p_scale=None, smooth_k=None, rotate=None, jobs=0,
               k_granularity=None):
    """Compiles now, into the kernel cache, the kernels ``intfa.attention`` will launch for these
    head dims, variants, input dtypes (torch dtypes or names) and causal settings: the quantize
    kernels and the attention kernel at the heuristic's tile config (a tuning database entry for a
    particular shape may pick another). Each argument takes one value or a sequence.

    ``arch`` ("sm_80", "sm_86", "sm_87", "sm_89", "sm_90a", "sm_100a", "sm_120", "sm_121")
    defaults to INTFA_ARCH, else the GPU's own;
    naming one needs no GPU. ``jobs`` parallel NVRTC compiles (0: all cores). The numerics options
    default as in ``intfa.attention``, ``smooth_k`` and ``rotate`` too (K smoothing's kernels by
    default; ``smooth_k=False``: the plain row kernels instead), ``k_granularity`` too ("token";
    "block": the kernels of ``intfa.attention(..., k_granularity="block")``, whose K scales per
    64 keys make the softmax cheaper and K a little coarser). Returns a dict:
    ``arch``, ``kernels``, ``compiled_now``, ``already_present``, ``specs``. Raises NoDevice when
    no arch can be named, InvalidArgument naming a bad argument, CompileError when NVRTC rejects a
    kernel.

    For a deployment bundle built on another machine use ``intfa precompile --out DIR`` (the
    command-line tool, which ``pip install`` puts on PATH) and INTFA_DEPLOY_CACHE instead."""
    numerics = dict(p_encoding=p_encoding, p_scale=p_scale, v_granularity=v_granularity,
                    k_granularity=k_granularity)
    if not is_int(jobs) or not 0 <= jobs <= _MAX_JOBS:
        raise invalid_argument("jobs", repr(jobs), f"expected an int in [0, {_MAX_JOBS}]")
    if arch is not None and arch != "":
        choice("arch", arch, _ARCHS)
    # The options, each checked (None, and only None, is the default).
    options = dict(numerics=dict(check_numerics(numerics)), smooth_k=option("smooth_k", smooth_k),
                   rotate=option("rotate", rotate))
    # Each list is read once: a generator given for one is consumed here, not twice.
    head_dims = as_list("head_dims", head_dims)
    variants = as_list("variants", variants)
    dtypes = as_list("dtypes", dtypes)
    causal = as_list("causal", causal)
    for name, values in (("head_dims", head_dims), ("variants", variants), ("dtypes", dtypes),
                         ("causal", causal)):
        if not values:
            raise invalid_argument(name, "[]", "expected one value or more")
    for head_dim in head_dims:
        if not is_int(head_dim) or head_dim not in _HEAD_DIMS:
            raise invalid_argument("head_dims", repr(head_dim),
                                   "supported head dims are 64, 128 and 256")
    for variant in variants:
        choice("variants", variant, _VARIANTS)
    for setting in causal:
        if not isinstance(setting, bool):
            raise invalid_argument("causal", repr(setting), "expected True or False values")
    return _intfa.precompile(
        arch="" if arch is None else arch,
        head_dims=head_dims,
        variants=variants,
        dtypes=[_dtype_name(dtype) for dtype in dtypes],
        causal=causal,
        jobs=jobs,
        **options)
