// attention_forward split in two: everything up to the launch (validation, config choice, kernel
// lookup, parameters), then the launch itself. The split lets `intfa bench --jit` measure what the
// API adds above a raw launch of the same kernel with the same parameters.
#pragma once

#include <cuda.h>

#include "attention/attention_params.h"
#include "attention/wgmma_params.h"
#include "families/attention_family.hpp"
#include "intfa/attention.hpp"
#include "launch/kernel_runtime.hpp"

namespace intfa::attention {

// What attention_forward_16bit adds to the plan. Its 16-bit Q, which the Hopper kernel quantizes
// itself where it serves the call (SpecRequest::quantize_q_in_kernel); with K smoothing, K's
// channel means in and the LSE term out (the memory of AttentionTensors::q_dot_k_mean); with
// automatic rotation (QKRotation::kAuto), the heads K's pass rotated.
// `head_dim`: the caller's, when it lies between the kernels' (problem.head_dim is then the
// kernel's): the channels of this Q, of the output and of half INT8's V
// (AttentionParams::out_head_dim).
struct SixteenBitCall {
  TensorView q;
  const float* k_channel_mean = nullptr;
  float* q_dot_k_mean = nullptr;
  const int* rotated_heads = nullptr;
  int head_dim = 0;  // 0: problem.head_dim
};

struct PlannedLaunch {
  AttentionSpec spec;
  CUcontext context = nullptr;                   // the stream's
  const launch::LoadedKernel* kernel = nullptr;  // null until loaded
  launch::LaunchShape shape;
  // The Hopper kernel takes all of it; the portable one only params.attention.
  kernels::WgmmaAttentionParams params{};
  bool wgmma = false;
  // The kernel quantizes Q itself: the caller skips Q's quantize pass.
  bool quantizes_q = false;

  const void* arguments() const {
    return wgmma ? static_cast<const void*>(&params) : static_cast<const void*>(&params.attention);
  }
};

// After the caller's validate_problem and validate_options (each once per call): validates the
// tensors, chooses the config and the kernel (PlannedLaunch::spec), and compiles or fetches and
// loads it (plan_launch; plan_kernel leaves PlannedLaunch::kernel null, for a caller that loads it
// with the other kernels of its call: launch::CallKernels); launches nothing. With
// `sixteen_bit`, a Hopper kernel takes its 16-bit Q and quantizes it (rotated as options.rotate_qk
// says);
// tensors.q is then still checked, and read by the portable kernel if that one is chosen.
PlannedLaunch plan_launch(const AttentionProblem& problem, const AttentionTensors& tensors,
                          CUstream stream, const AttentionOptions& options,
                          const SixteenBitCall* sixteen_bit = nullptr);
PlannedLaunch plan_kernel(const AttentionProblem& problem, const AttentionTensors& tensors,
                          CUstream stream, const AttentionOptions& options,
                          const SixteenBitCall* sixteen_bit = nullptr);

}  // namespace intfa::attention
