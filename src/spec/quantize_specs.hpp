// The kernel specs the quantize entry points launch, in one place so that what precompile
// bundles and what `intfa run` compiles without a GPU are exactly what quantize_qk/quantize_v
// ask the runtime for.
#pragma once

#include <vector>

#include "device/arch.hpp"
#include "intfa/types.hpp"
#include "render/kernel_spec.hpp"
#include "spec/attention_spec.hpp"

namespace intfa::quantize {

// 16-bit input type of the quantize kernels (kF16 or kBF16).
kernels::ElementType element_type(DType dtype);

// What quantize_rows does to a row besides quantizing it (the KernelSpec fields of the same names).
struct RowTransforms {
  bool smooth_k = false;      // K: minus its channel means
  bool q_dot_k_mean = false;  // Q of a smoothed K: q . mean per row, the LSE term
  bool rotate = false;        // Q and K: the rotation of incoherent processing
  // K: one scale per row, or per 64-row block (quantize_row_blocks).
  KScaleGranularity k_granularity = KScaleGranularity::kPerToken;
};

// quantize_qk's row pass.
render::KernelSpec rows_spec(device::Arch arch, int head_dim, kernels::ElementType input, int bits,
                             const RowTransforms& transforms = {});
// K smoothing's first pass: the per-(batch, head) channel means.
render::KernelSpec channel_mean_spec(device::Arch arch, int head_dim, kernels::ElementType input);
// quantize_v's quantize pass and, unless per block, the max pass that runs before it.
render::KernelSpec v_spec(device::Arch arch, int head_dim, kernels::ElementType input,
                          VScaleGranularity granularity);
render::KernelSpec v_scale_spec(device::Arch arch, int head_dim, kernels::ElementType input,
                                VScaleGranularity granularity);

// Every quantize kernel one attention call of `request` with `dtype` inputs needs under `options`
// (attention_forward_16bit's order): with K smoothing its mean pass, then K's rows and Q's rows
// (smoothed, rotated, with the LSE term as options.smooth_k and options.rotate_qk say; K's per
// token or per 64-row block as request.k_granularity says) and, for full INT8, V's passes.
std::vector<render::KernelSpec> call_specs(const attention::SpecRequest& request, DType dtype,
                                           const AttentionOptions& options);

}  // namespace intfa::quantize
