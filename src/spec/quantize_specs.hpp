// The kernel specs the quantize entry points launch, in one place so that what precompile
// bundles and what `intfa run` compiles without a GPU are exactly what quantize_qk/quantize_v
// ask the runtime for. Each kernel's spec is its family's (src/families/quantize_family.hpp);
// here, the list one attention call needs.
#pragma once

#include <vector>

#include "families/quantize_family.hpp"
#include "intfa/types.hpp"
#include "spec/attention_spec.hpp"

namespace intfa::quantize {

// Every quantize kernel one attention call of `request` with `dtype` inputs needs under `options`:
// with K smoothing its mean pass, then K's rows and Q's rows (smoothed, rotated, with the LSE term
// as options.smooth_k and options.rotate_qk say; K's per token or per 64-row block as
// request.k_granularity says; Q's only with `q_rows`: not where the attention kernel quantizes Q
// itself) and, for full INT8, V's passes.
std::vector<QuantizeSpec> call_specs(const attention::SpecRequest& request, DType dtype,
                                     const AttentionOptions& options, bool q_rows = true);

}  // namespace intfa::quantize
