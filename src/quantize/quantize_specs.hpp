// The kernel specs the quantize entry points launch, in one place so that what precompile
// bundles and what `intfa run` compiles without a GPU are exactly what quantize_qk/quantize_v
// ask the runtime for.
#pragma once

#include <vector>

#include "attention/attention_spec.hpp"
#include "device/arch.hpp"
#include "intfa/types.hpp"
#include "render/kernel_spec.hpp"

namespace intfa::quantize {

// 16-bit input type of the quantize kernels (kF16 or kBF16).
kernels::ElementType element_type(DType dtype);

// quantize_qk's row pass; with `smooth_k`, the variant that subtracts the channel means.
render::KernelSpec rows_spec(device::Arch arch, int head_dim, kernels::ElementType input, int bits,
                             bool smooth_k);
// K smoothing's first pass: the per-(batch, head) channel means.
render::KernelSpec channel_mean_spec(device::Arch arch, int head_dim, kernels::ElementType input);
// quantize_v's quantize pass and, unless per block, the max pass that runs before it.
render::KernelSpec v_spec(device::Arch arch, int head_dim, kernels::ElementType input,
                          VScaleGranularity granularity);
render::KernelSpec v_scale_spec(device::Arch arch, int head_dim, kernels::ElementType input,
                                VScaleGranularity granularity);

// Every quantize kernel one attention call of `request` with `dtype` inputs needs: Q's and K's
// rows (K smoothed, with its mean pass, when `smooth_k`) and, for full INT8, V's passes.
std::vector<render::KernelSpec> call_specs(const attention::SpecRequest& request, DType dtype,
                                           bool smooth_k);

}  // namespace intfa::quantize
