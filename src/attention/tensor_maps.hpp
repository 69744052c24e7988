// The TMA descriptors of the Hopper attention kernel (KernelPath::kWgmma), made with the driver's
// cuTensorMapEncodeTiled from the caller's tensors.
#pragma once

#include <optional>
#include <string>

#include "attention/wgmma_params.h"
#include "intfa/attention.hpp"
#include "render/kernel_spec.hpp"

namespace intfa::attention {

// Why TMA cannot describe these tensors (a base or stride not a multiple of 16 bytes, ...), naming
// the field; nullopt when it can.
std::optional<std::string> tma_incompatibility(const AttentionProblem& problem,
                                               const AttentionTensors& tensors);

// Writes the tensor maps of `params` (Q, K, V) for the tiles of `spec`. Throws DriverError.
void encode_tensor_maps(kernels::WgmmaAttentionParams& params, const AttentionProblem& problem,
                        const AttentionTensors& tensors, const render::KernelSpec& spec);

}  // namespace intfa::attention
