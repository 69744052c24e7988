"""Argument checks that need no PyTorch: numbers, lists and the C++ problem rules, each failure an
``InvalidArgument`` naming the Python argument (``sm_scale``, ``max_seqlen_q``, ``q.shape``), never a
pybind11 ``TypeError`` or an ``OverflowError`` from a conversion."""
import math

from intfa import _intfa
from intfa._errors import InvalidArgument, invalid_argument

_INT32_MAX = 2**31 - 1
# The kernels take sm_scale * log2(e) as a float32: what it cannot hold (1e300 would become
# infinity, 1e-320 zero) is refused, as the C++ API refuses it.
_LOG2_E = 1.4426950408889634
_FLOAT32_MIN_NORMAL = 1.1754943508222875e-38
_FLOAT32_MAX = 3.4028234663852886e38


def is_int(value):
    """An int that is not a bool (True is an int to Python, not a count to intfa)."""
    return isinstance(value, int) and not isinstance(value, bool)


def resolve_sm_scale(sm_scale, name="sm_scale"):
    """The softmax scale for the C++ API: None gives 0.0 (1/sqrt(head_dim) there); a positive
    finite number float32 can hold (times log2(e)) is passed on; anything else is refused."""
    if sm_scale is None:
        return 0.0
    if isinstance(sm_scale, bool) or not isinstance(sm_scale, (int, float)):
        raise invalid_argument(name, repr(sm_scale),
                               "expected a number > 0 (or None for 1/sqrt(head_dim))")
    try:
        scale = float(sm_scale)
    except OverflowError:  # an int beyond any float (10**400)
        scale = math.inf
    if not math.isfinite(scale) or scale <= 0:
        raise invalid_argument(name, sm_scale,
                               "expected a finite number > 0 (or None for 1/sqrt(head_dim))")
    if not _FLOAT32_MIN_NORMAL <= scale * _LOG2_E <= _FLOAT32_MAX:
        raise invalid_argument(name, sm_scale,
                               "expected a scale float32 holds (times log2(e), in "
                               "[1.2e-38, 3.4e38])")
    return scale


# For each problem member, the Python argument it comes from and what it is there.
TENSOR_PROBLEM = {
    "batch": ("q.shape", "the batch of q"),
    "heads_q": ("q.shape", "the heads of q"),
    "heads_kv": ("k.shape", "the heads of k"),
    "seq_q": ("q.shape", "the sequence length of q"),
    "seq_kv": ("k.shape", "the sequence length of k"),
    "head_dim": ("q.shape", "the head dim of q"),
}
VARLEN_PROBLEM = dict(TENSOR_PROBLEM,
                      batch=("cu_seqlens_q.shape", "the number of sequences"),
                      seq_q=("max_seqlen_q", "the longest query sequence"),
                      seq_kv=("max_seqlen_k", "the longest key sequence"))


def validate_problem(names, **problem):
    """The C++ problem rules (head dims 64/128/256, heads_q a multiple of heads_kv, sizes >= 1,
    the grid's limits) with the C++ reason, naming the Python argument `names` maps each member
    to. Sizes beyond int32 are refused here: pybind11 would raise TypeError for them."""
    for member, value in problem.items():
        if member in names and is_int(value) and value > _INT32_MAX:
            field, what = names[member]
            raise invalid_argument(field, value, f"expected at most 2**31 - 1 ({what})")
    try:
        _intfa.validate_problem(**problem)
    except InvalidArgument as error:
        member = error.field.replace("problem.", "", 1)
        if member not in names:
            raise
        field, what = names[member]
        reason = str(error).split(": ", 1)[-1]
        raise invalid_argument(field, error.value, f"{reason} ({what})") from None


def as_list(name, value):
    """One value or an iterable of them, read once (a generator is consumed here, not twice)."""
    if isinstance(value, (str, bytes, int, float, bool)) or not hasattr(value, "__iter__"):
        return [value]
    try:
        return list(value)
    except TypeError as error:
        raise invalid_argument(name, repr(value), f"expected a value or a sequence ({error})")


def choice(name, value, choices):
    """`value` when it is one of the strings `choices`."""
    if not isinstance(value, str) or value not in choices:
        shown = value if isinstance(value, str) and value else repr(value)
        raise invalid_argument(name, shown, "expected " + " or ".join(map(repr, choices)))
    return value


# THE list of the attention kernel's numerics options (INTFA_ATTENTION_NUMERICS in
# include/intfa/numerics.hpp), read here and nowhere else in the package: per option, in the
# list's order, its name (the Python keyword), default, values' names and the variants that read
# it. An entry point takes an option by its keyword and its `numerics` dict (intfa._torch); nothing
# else in the package names one.
NUMERICS_FIELDS = _intfa.numerics_fields()
NUMERICS = tuple(field["name"] for field in NUMERICS_FIELDS)

# The C++ defaults (intfa::AttentionOptions{}), the one source of truth for the Python defaults,
# and the names of each option's values (src/numerics/option_names.hpp, the one table): the
# numerics options' (from the list) with the variant's and the Q/K transforms'. The variant's
# default is "auto": intfa::auto_variant's table chooses full or half INT8 per call
# (resolve_variant).
DEFAULTS = dict(_intfa.default_options(), variant="auto")
OPTION_VALUES = dict(_intfa.option_values())
OPTION_VALUES["variant"] = tuple(OPTION_VALUES["variant"]) + ("auto",)


def resolve_variant(variant, device, head_dim, seq_q, seq_kv, is_causal):
    """A checked variant with "auto" resolved: the table of intfa::auto_variant for a problem of
    `head_dim` (any the kernels serve: the next kernel's row), these lengths and causal flag on
    CUDA `device`; full INT8 on any other device (whose calls go to SDPA or are refused). An
    opaque call, for eager code only: the op's plan, the accuracy check, the ring's statistics."""
    if variant != "auto":
        return variant
    if device.type != "cuda":
        return "full_int8"
    if device.index is None:
        import torch  # (torch is the caller's: this package imports it lazily)
        index = torch.cuda.current_device()
    else:
        index = device.index
    return _intfa.auto_variant(device_index=index, head_dim=head_dim, seq_q=seq_q,
                               seq_kv=seq_kv, causal=bool(is_causal))[0]


def option(name, value):
    """The value of the option `name` (a key of DEFAULTS: "variant", a numerics option of the
    list, "smooth_k" or "rotate") for the C++ API, for every entry point that takes one. None, and
    only None, gives the C++ default (`value or default` would read 0, "", False and [] as it
    too); one of the option table's names (a str) is itself, for smooth_k True or False, and for
    rotate True and False too (its names "on" and "off"; "auto" is the default). Anything else is
    an InvalidArgument naming the argument: bools where a name is expected, empty strings, lists,
    and ints, the C enums' values included (the Python API spells options by name, as the binding
    takes them; to C, 0 is per-tensor V or s8 P, not the default)."""
    if value is None:
        return DEFAULTS[name]
    if name == "rotate" and isinstance(value, bool):
        return "on" if value else "off"
    names = OPTION_VALUES.get(name)
    if names is None:  # smooth_k
        valid, shown, expected = isinstance(value, bool), repr(value), "True or False"
    else:
        valid = isinstance(value, str) and value in names
        shown = value if isinstance(value, str) and value else repr(value)
        expected = " or ".join(map(repr, names))
    if not valid:
        if name == "rotate":
            expected = "True, False or " + expected
        raise invalid_argument(name, shown,
                               f"expected {expected} (or None for the default, {DEFAULTS[name]!r})")
    return value


def check_numerics(numerics):
    """An entry point's numerics (option name -> the caller's value), each
    checked and defaulted by `option` (None, and only None, is the C++ default; anything else but
    one of its names is an InvalidArgument naming the option), as the one hashable value the
    checked arguments, the plans and the ops carry: ((name, value), ...) in the list's order. An
    option the entry point does not take is absent, and the C++ default
    (_intfa.numerics_from_dict)."""
    for name in numerics:
        if name not in NUMERICS:
            raise TypeError(f"unexpected keyword argument {name!r} (the numerics options are "
                            f"{', '.join(NUMERICS)})")
    return tuple((name, option(name, numerics[name])) for name in NUMERICS if name in numerics)
