// The quantize entry points for an input narrower than the kernel's head dim: `shape` at the
// kernel's head dim (64, 128 or 256), `input` with `input_channels` channels (a multiple of 8, at
// most shape.head_dim), read as if zeros followed them; the outputs are the kernel's width. What
// attention_forward_16bit uses for a head dim between the kernels' (templates/attention/README.md,
// "Head dims between the kernels'"); intfa::quantize_qk and quantize_v are these with all
// channels. Each validates as the public function does, the input against input_channels.
//
// attention_forward_16bit plans its quantize passes (plan_qk_channels, plan_k_and_v_channels: every
// check, the kernels, their parameters and shapes), adds their kernels to the call's
// launch::CallKernels with its own (add_kernels), loads them all at once (on a cold cache they
// compile together), then launches (launch_planned). The functions below that take no plan are
// these three steps.
#pragma once

#include <cuda.h>

#include <cstddef>

#include "device/arch.hpp"
#include "families/quantize_family.hpp"
#include "intfa/quantize.hpp"
#include "launch/kernel_runtime.hpp"

namespace intfa::quantize {

// The context and arch of the stream the passes launch on.
struct LaunchContext {
  CUcontext context = nullptr;
  device::Arch arch = device::Arch::kSm80;
};

// One kernel launch of a plan: its spec, shape and (once the call's kernels are loaded) kernel.
struct PlannedKernel {
  QuantizeSpec spec;
  launch::LaunchShape shape;
  const launch::LoadedKernel* kernel = nullptr;
};

// quantize_qk's passes, checked: K smoothing's channel means (when smoothing by means not given:
// one block per (batch, head), channel_mean.cuh), then the row pass.
struct RowsPass {
  LaunchContext where;
  kernels::ElementType element = kernels::ElementType::kF16;
  RowTransforms transforms;
  PlannedKernel rows;
  kernels::QuantizeRowsParams params;
  bool mean_pass = false;  // K smoothing with its means computed (QuantizeOptions)
  PlannedKernel mean;      // with mean_pass
  kernels::ChannelMeanParams mean_params;
};

// Which of quantize_v's passes run: both (quantize_v), or for per-tensor and per-channel scales
// one of them alone (v_scales, quantize_v_with_scales).
enum class VPassesRun { kBoth, kScalesOnly, kQuantizeOnly };

// quantize_v's passes, checked: the max pass (per tensor and per channel: into scales zeroed
// first) and the quantize pass, on one grid (the shape of both).
struct VPasses {
  LaunchContext where;
  kernels::QuantizeVParams params;
  bool quantize_pass = true;
  PlannedKernel quantize;  // with quantize_pass
  bool max_pass = false;
  PlannedKernel max;            // with max_pass
  std::size_t scale_count = 0;  // the scales to zero before the max pass
};

void quantize_qk_channels(const TensorShape& shape, int input_channels, const TensorView& input,
                          const TensorView& output, float* scales, CUstream stream,
                          const QuantizeOptions& options);

void quantize_v_channels(const TensorShape& shape, int input_channels, const TensorView& input,
                         void* output, float* scales, VScaleGranularity granularity,
                         CUstream stream);

void quantize_v_varlen_channels(const TensorShape& shape, int input_channels,
                                const TensorView& input, int total_kv, const int* cu_seqlens_kv,
                                void* output, float* scales, VScaleGranularity granularity,
                                CUstream stream);

// K's and V's passes of attention_forward_16bit (both at the kernel's head dim, their inputs with
// input_channels channels). K's options as quantize_qk_channels' (K: no q_dot_k_mean); V packed
// when cu_seqlens_kv is set (then v_input is [1, heads, total_kv, channels], as
// quantize_v_varlen_channels'). Each is checked as by its own function.
struct KAndVPasses {
  TensorShape k_shape;
  TensorView k_input, k_output;
  float* k_scales = nullptr;
  QuantizeOptions k_options;
  TensorShape v_shape;
  TensorView v_input;
  int total_kv = 0;
  const int* cu_seqlens_kv = nullptr;
  void* v_output = nullptr;
  float* v_scales = nullptr;
  VScaleGranularity v_granularity = VScaleGranularity::kPerChannel;
};

// How quantize_k_and_v_channels launches K's and V's passes.
enum class KAndVLaunches {
  kOne,       // sm_90a: K's channel means, then K's rows and all of V (quantize_k_v)
  kShared,    // K's channel means or a memset, K's rows with V's max pass, V's quantize pass
  kSeparate,  // quantize_qk's passes, then quantize_v's
};

// K's and V's passes planned; the parameters of a launch are set only where it is planned (they
// have no initializers: a plan is made on every call).
struct KAndVPlan {
  // K's plan made in place by `plan_k` (no copy: a plan is large, and this is every call's path).
  template <typename PlanK>
  explicit KAndVPlan(PlanK plan_k) : k(plan_k()) {}

  RowsPass k;
  VPasses v;
  KAndVLaunches launches = KAndVLaunches::kSeparate;
  VScaleGranularity v_granularity = VScaleGranularity::kPerChannel;
  PlannedKernel both;  // quantize_k_v (kOne) or quantize_k_v_scale (kShared)
  kernels::QuantizeKVParams one_params;
  kernels::QuantizeKVScaleParams shared_params;
};

// The same kernels' work as quantize_qk_channels(K) then quantize_v_channels (or its varlen form),
// bit for bit, in fewer launches where V has a max pass and K is per token. On sm_90a, where V's
// (batch, head) fits the shared memory of a cluster (quantize::k_v_slices): K's channel means when
// smoothing, then K's rows and all of V in one launch that reads V once (quantize_k_v). Else K's
// channel means (their launch also zeroes V's scales; without smoothing a memset does), K's rows
// and V's max pass in one launch (quantize_k_v_scale), then V's quantize pass: three driver calls
// where the two functions make five (four without smoothing). Otherwise the two functions'
// launches.
// Returns whether K and V went through quantize_k_v (for tests).
bool quantize_k_and_v_channels(const KAndVPasses& passes, int input_channels, CUstream stream);

// The three steps (see the top of this file). A plan must stay where it is from add_kernels until
// its launch: the call's CallKernels holds pointers into it. (A plan is a kilobyte or so: keep it
// a local initialized from these functions' results, not a std::optional, whose emplace and
// storage GCC zero-fills on every call.)
// `where`: the stream's launch context when the caller has it (else the driver is asked, after
// the checks).
RowsPass plan_qk_channels(const TensorShape& shape, int input_channels, const TensorView& input,
                          const TensorView& output, float* scales, CUstream stream,
                          const QuantizeOptions& options, const LaunchContext* where = nullptr);
void add_kernels(RowsPass& pass, launch::CallKernels& kernels);
void launch_planned(const RowsPass& pass, CUstream stream);

KAndVPlan plan_k_and_v_channels(const KAndVPasses& passes, int input_channels, CUstream stream,
                                const LaunchContext* where = nullptr);
void add_kernels(KAndVPlan& plan, launch::CallKernels& kernels);
// Returns whether K and V went through quantize_k_v: a GPU (or MIG slice) that cannot hold one
// cluster of its split takes the other launches instead (their kernels loaded then).
bool launch_planned(const KAndVPlan& plan, CUstream stream);

}  // namespace intfa::quantize
