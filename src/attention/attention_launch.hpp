// attention_forward split in two: everything up to the launch (validation, config choice, kernel
// lookup, parameters), then the launch itself. The split lets `intfa bench --jit` measure what the
// API adds above a raw launch of the same kernel with the same parameters.
#pragma once

#include <cuda.h>

#include "attention/attention_params.h"
#include "attention/wgmma_params.h"
#include "intfa/attention.hpp"
#include "launch/kernel_runtime.hpp"

namespace intfa::attention {

struct PlannedLaunch {
  const launch::LoadedKernel* kernel = nullptr;
  launch::LaunchShape shape;
  // The Hopper kernel takes all of it; the portable one only params.attention.
  kernels::WgmmaAttentionParams params{};
  bool wgmma = false;

  const void* arguments() const {
    return wgmma ? static_cast<const void*>(&params) : static_cast<const void*>(&params.attention);
  }
};

// Validates, chooses the config, compiles or fetches the kernel; launches nothing.
PlannedLaunch plan_launch(const AttentionProblem& problem, const AttentionTensors& tensors,
                          CUstream stream, const AttentionOptions& options);

}  // namespace intfa::attention
