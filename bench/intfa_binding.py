"""intfa through its Python package (python/: `import intfa`, PYTHONPATH=build/python or
`pip install .`) for the benchmark scripts: the interface of intfa_ctypes.IntfaAttention, reading
the same Options struct, so a script can take either path."""
import intfa
from intfa._runtime import OPTION_VALUES

from intfa_ctypes import FULL_INT8

# The C API's enum values index the library's table of names (src/api/option_names.hpp).
P_ENCODINGS = OPTION_VALUES["p_encoding"]
P_SCALES = OPTION_VALUES["p_scale"]
V_GRANULARITIES = OPTION_VALUES["v_granularity"]


class BindingAttention:
    """One problem's quantized tensors, ready to time: quantize() and attend() launch on the
    current stream, as IntfaAttention's do."""

    def __init__(self, q, k, v, causal, variant, options, smooth_k=None, rotate=None):
        self.q, self.k, self.v, self.causal = q, k, v, causal
        self.smooth_k, self.rotate = smooth_k, rotate  # None: the library's defaults
        self.full = variant == FULL_INT8
        self.v_granularity = V_GRANULARITIES[options.v_granularity]
        config = (options.block_m, options.block_n, options.warps, options.stages)
        self.numerics = {"p_encoding": P_ENCODINGS[options.p_encoding],
                         "p_scale": P_SCALES[options.p_scale],
                         "config": config if any(config) else None}
        self.quantize()

    def quantize(self):
        self.quantized = intfa.quantize(self.q, self.k, self.v if self.full else None,
                                        v_granularity=self.v_granularity,
                                        smooth_k=self.smooth_k, rotate=self.rotate)

    def attend(self):
        z = self.quantized
        return intfa.attention_int8(z.q, z.k, z.v if self.full else self.v, z.q_scale, z.k_scale,
                                    z.v_scale, is_causal=self.causal,
                                    q_dot_k_mean=z.q_dot_k_mean, **self.numerics)


def end_to_end(q, k, v, causal, variant, options, smooth_k=None, rotate=None,
               k_granularity=None):
    """intfa.attention as a user calls it on FP16 inputs (quantize and attend, one C++ call), with
    the same numerics options as BindingAttention (smooth_k, rotate: None for the defaults) and
    K's scale granularity (None: per token)."""
    full = variant == FULL_INT8
    numerics = dict(variant="full_int8" if full else "half_int8",
                    p_encoding=P_ENCODINGS[options.p_encoding], p_scale=P_SCALES[options.p_scale],
                    smooth_k=smooth_k, rotate=rotate, k_granularity=k_granularity)
    if full:
        numerics["v_granularity"] = V_GRANULARITIES[options.v_granularity]
    # fallback="error": a problem intfa does not serve raises rather than timing torch's SDPA.
    return lambda: intfa.attention(q, k, v, is_causal=causal, fallback="error", **numerics)


def defaults_end_to_end(q, k, v, causal):
    """intfa.attention with every numerics option at its default: variant "auto" (the table, or
    this GPU's tuned rows), automatic rotation, K smoothing."""
    return lambda: intfa.attention(q, k, v, is_causal=causal, fallback="error")
