// The quantize entry points: validation of their arguments, then the family's specs, parameters
// and launch shapes (src/families/quantize_family.hpp) on the caller's stream.
#include "intfa/quantize.hpp"

#include <limits>
#include <optional>

#include "common/env.hpp"
#include "common/tensor_checks.hpp"
#include "device/device_info.hpp"
#include "device/driver_api.hpp"
#include "families/quantize_family.hpp"
#include "intfa/errors.hpp"
#include "launch/kernel_runtime.hpp"
#include "numerics/option_names.hpp"
#include "quantize/quantize_internal.hpp"

namespace intfa {
namespace {

kernels::ElementType input_type(const TensorView& input, const char* field) {
  if (input.dtype == DType::kF16) return kernels::ElementType::kF16;
  if (input.dtype == DType::kBF16) return kernels::ElementType::kBF16;
  throw InvalidArgument(std::string(field) + ".dtype", dtype_name(input.dtype),
                        "expected f16 or bf16");
}

using quantize::LaunchContext;
using quantize::RowsPass;
using quantize::VPasses;

LaunchContext current_launch_context(CUstream stream) {
  LaunchContext launch_context;
  launch_context.context = launch::launch_context(stream);
  CUdevice device = 0;
  INTFA_DRIVER(cuCtxGetDevice, &device);
  launch_context.arch = device::cached_device_info(device).arch;
  return launch_context;
}

void launch_kernel(const quantize::PlannedKernel& planned, CUstream stream, const void* params) {
  launch::launch(*planned.kernel, planned.shape, stream, params);
}

void add_kernel(quantize::PlannedKernel& planned, launch::CallKernels& kernels) {
  kernels.add(planned.spec, planned.shape.dynamic_shared_bytes, &planned.kernel);
}

// INTFA_ONE_LAUNCH_KV (docs/environment.md): 0 quantizes K and V for attention on sm_90a
// with the launches of other archs (V read twice), for comparisons. Read once.
bool one_launch_kv_enabled() {
  static const bool enabled = env::flag("INTFA_ONE_LAUNCH_KV", true);
  return enabled;
}

void require_float_alignment(const void* pointer, const char* field) {
  if (reinterpret_cast<std::uintptr_t>(pointer) % 4 != 0) {
    throw InvalidArgument(field, std::to_string(reinterpret_cast<std::uintptr_t>(pointer)),
                          "expected 4-byte alignment");
  }
}

// K smoothing's channel-mean pass over `input` (`input_channels` of its channels) into `means`
// (null: not written), and automatic rotation's decisions into `rotated_heads` (null: none),
// measured less the means when `smoothed`.
void plan_channel_mean(const LaunchContext& where, const TensorShape& shape, int input_channels,
                       const TensorView& input, kernels::ElementType element, float* means,
                       int* rotated_heads, bool smoothed, quantize::PlannedKernel& mean,
                       kernels::ChannelMeanParams& params) {
  mean.spec = quantize::channel_mean_spec(where.arch, shape.head_dim, element);
  mean.shape = quantize::channel_mean_launch_shape(shape);
  params = quantize::channel_mean_params(shape, input, means);
  params.channels = input_channels;
  params.rotated_heads = rotated_heads;
  params.smoothed = smoothed ? 1 : 0;
}

// The channels of an input narrower than the kernel's head dim (quantize_internal.hpp).
void validate_input_channels(const TensorShape& shape, int input_channels) {
  if (input_channels < 8 || input_channels > shape.head_dim || input_channels % 8 != 0) {
    throw InvalidArgument(
        "input_channels", std::to_string(input_channels),
        "expected a multiple of 8 up to shape.head_dim " + std::to_string(shape.head_dim));
  }
}

// The QuantizeOptions fields about K smoothing and the LSE term, checked against `shape`.
void validate_smoothing(const TensorShape& shape, const QuantizeOptions& options) {
  require_float_alignment(options.smooth_k_channel_mean, "options.smooth_k_channel_mean");
  require_float_alignment(options.smooth_k_given_mean, "options.smooth_k_given_mean");
  require_float_alignment(options.k_channel_mean, "options.k_channel_mean");
  require_float_alignment(options.q_dot_k_mean, "options.q_dot_k_mean");
  if ((options.k_channel_mean == nullptr) != (options.q_dot_k_mean == nullptr)) {
    throw InvalidArgument(
        options.k_channel_mean == nullptr ? "options.k_channel_mean" : "options.q_dot_k_mean",
        "null", "expected both k_channel_mean and q_dot_k_mean, or neither (Q of a smoothed K)");
  }
  if (options.k_channel_mean != nullptr && options.smooth_k_channel_mean != nullptr) {
    throw InvalidArgument("options.smooth_k_channel_mean", "(set)",
                          "expected null with options.k_channel_mean: smoothing is for K, the "
                          "LSE term for Q");
  }
  if (options.smooth_k_given_mean != nullptr) {
    if (options.smooth_k_channel_mean != nullptr) {
      throw InvalidArgument("options.smooth_k_given_mean", "(set)",
                            "expected null with options.smooth_k_channel_mean: K's means are "
                            "either computed or given");
    }
    if (options.k_channel_mean != nullptr) {
      throw InvalidArgument("options.smooth_k_given_mean", "(set)",
                            "expected null with options.k_channel_mean: smoothing is for K, the "
                            "LSE term for Q");
    }
  }
  const int mean_heads = options.k_channel_mean_heads;
  if (mean_heads < 0 || (mean_heads > 0 && shape.heads % mean_heads != 0)) {
    throw InvalidArgument("options.k_channel_mean_heads", std::to_string(mean_heads),
                          "expected 0 (the shape's heads) or a divisor of shape.heads " +
                              std::to_string(shape.heads));
  }
}

// The QuantizeOptions fields about the rotation (after validate_smoothing).
void validate_rotation(const QuantizeOptions& options) {
  const int value = static_cast<int>(options.rotate);
  if (value < 0 || value >= static_cast<int>(option_count<QKRotation>())) {
    throw InvalidArgument("options.rotate", std::to_string(value),
                          "expected " + option_names_text<QKRotation>());
  }
  require_float_alignment(options.rotated_heads, "options.rotated_heads");
  require_float_alignment(options.k_rotated_heads, "options.k_rotated_heads");
  const bool writes = options.rotated_heads != nullptr;
  const bool reads = options.k_rotated_heads != nullptr;
  if (options.rotate != QKRotation::kAuto) {
    if (writes || reads) {
      throw InvalidArgument(writes ? "options.rotated_heads" : "options.k_rotated_heads", "(set)",
                            std::string("expected null with options.rotate = ") +
                                option_name(options.rotate) + ": the heads are for auto");
    }
    return;
  }
  const bool query = options.k_channel_mean != nullptr;
  if (writes == reads || (query && writes)) {
    throw InvalidArgument(
        writes ? "options.rotated_heads" : "options.k_rotated_heads", writes ? "(set)" : "null",
        query ? "expected k_rotated_heads, not rotated_heads, with options.rotate = auto for Q "
                "(K's decisions)"
              : "expected one of rotated_heads (K: decided here) and k_rotated_heads (decided "
                "before) with options.rotate = auto");
  }
  if (writes && options.smooth_k_given_mean != nullptr) {
    throw InvalidArgument("options.rotated_heads", "(set)",
                          "expected k_rotated_heads with options.smooth_k_given_mean: a shard's "
                          "decisions must be its whole sequence's");
  }
}

}  // namespace

void quantize_qk(const TensorShape& shape, const TensorView& input, const TensorView& output,
                 float* scales, CUstream stream, const QuantizeOptions& options) {
  quantize::quantize_qk_channels(shape, shape.head_dim, input, output, scales, stream, options);
}

void k_channel_means(const TensorShape& shape, const TensorView& input, float* means,
                     CUstream stream, int* rotated_heads) {
  checks::validate_shape(shape, "shape");
  const kernels::ElementType element = input_type(input, "input");
  checks::validate_view(input,
                        {"input", {shape.batch, shape.heads, shape.seq, shape.head_dim}, 2, 16});
  if (means == nullptr && rotated_heads == nullptr) {
    throw InvalidArgument("means", "null", "expected a device pointer (or rotated_heads)");
  }
  require_float_alignment(means, "means");
  require_float_alignment(rotated_heads, "rotated_heads");
  quantize::PlannedKernel mean;
  kernels::ChannelMeanParams params;
  const LaunchContext where = current_launch_context(stream);
  plan_channel_mean(where, shape, shape.head_dim, input, element, means, rotated_heads,
                    means != nullptr, mean, params);
  launch::CallKernels kernels;
  add_kernel(mean, kernels);
  kernels.load(where.context);
  launch_kernel(mean, stream, &params);
}

std::vector<int> k_channel_mean_sample_rows(int seq) {
  if (seq < 1) throw InvalidArgument("seq", std::to_string(seq), "expected >= 1");
  const int count = kernels::channel_mean_sample_count(seq);
  std::vector<int> rows(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) rows[i] = kernels::channel_mean_sample_row(i, count, seq);
  return rows;
}

namespace {

// `where`: the stream's launch context when the caller has it already (after the checks, the
// driver is asked otherwise).
RowsPass plan_rows_pass(const TensorShape& shape, int input_channels, const TensorView& input,
                        const TensorView& output, float* scales, CUstream stream,
                        const QuantizeOptions& options, const LaunchContext* where) {
  checks::validate_shape(shape, "shape");
  validate_input_channels(shape, input_channels);
  if (options.bits != 8 && options.bits != 4) {
    throw InvalidArgument("options.bits", std::to_string(options.bits), "expected 8 or 4");
  }
  const kernels::ElementType element = input_type(input, "input");
  checks::validate_view(input,
                        {"input", {shape.batch, shape.heads, shape.seq, input_channels}, 2, 16});
  const DType output_dtype = options.bits == 8 ? DType::kI8 : DType::kI4x2;
  if (output.dtype != output_dtype) {
    throw InvalidArgument("output.dtype", dtype_name(output.dtype),
                          "expected " + dtype_name(output_dtype) + " for " +
                              std::to_string(options.bits) + "-bit quantization");
  }
  const int output_row_bytes = shape.head_dim * options.bits / 8;
  checks::validate_view(output,
                        {"output", {shape.batch, shape.heads, shape.seq, output_row_bytes}, 1, 16});
  checks::validate_scales(scales, "scales");

  validate_smoothing(shape, options);
  validate_rotation(options);
  const bool per_block = options.k_granularity == KScaleGranularity::kPerBlock;
  if (per_block && options.bits != 8) {
    throw InvalidArgument(
        "options.k_granularity", "block",
        "per-block scales are for 8-bit K (options.bits is " + std::to_string(options.bits) + ")");
  }
  if (per_block && options.q_dot_k_mean != nullptr) {
    throw InvalidArgument("options.k_granularity", "block",
                          "per-block scales are for K; Q (which writes q_dot_k_mean) is per token");
  }

  RowsPass pass;
  pass.where = where != nullptr ? *where : current_launch_context(stream);
  pass.element = element;
  pass.transforms.smooth_k =
      options.smooth_k_channel_mean != nullptr || options.smooth_k_given_mean != nullptr;
  pass.transforms.q_dot_k_mean = options.q_dot_k_mean != nullptr;
  pass.transforms.rotate = options.rotate;
  pass.transforms.k_granularity = options.k_granularity;
  pass.rows.spec =
      quantize::rows_spec(pass.where.arch, shape.head_dim, element, options.bits, pass.transforms);
  pass.params = quantize::rows_params(shape, input, output, scales, pass.transforms, options);
  pass.params.channels = input_channels;
  pass.rows.shape = quantize::rows_launch_shape(shape, pass.transforms);
  pass.mean_pass = options.smooth_k_channel_mean != nullptr || options.rotated_heads != nullptr;
  if (pass.mean_pass) {
    plan_channel_mean(pass.where, shape, input_channels, input, element,
                      options.smooth_k_channel_mean, options.rotated_heads,
                      pass.transforms.smooth_k, pass.mean, pass.mean_params);
  }
  return pass;
}

// K smoothing's channel means, when the pass computes them; the launch also zeroes `zero_count`
// floats at `zero` (V's scale accumulators, for quantize_k_and_v_channels).
void launch_channel_mean(const RowsPass& pass, CUstream stream, float* zero = nullptr,
                         std::size_t zero_count = 0) {
  if (!pass.mean_pass) return;
  kernels::ChannelMeanParams params = pass.mean_params;
  params.zero = zero;
  params.zero_count = static_cast<kernels::i64>(zero_count);
  launch_kernel(pass.mean, stream, &params);
}

void add_rows_kernels(RowsPass& pass, launch::CallKernels& kernels) {
  if (pass.mean_pass) add_kernel(pass.mean, kernels);
  add_kernel(pass.rows, kernels);
}

void launch_rows_pass(const RowsPass& pass, CUstream stream) {
  launch_channel_mean(pass, stream);
  launch_kernel(pass.rows, stream, &pass.params);
}

}  // namespace

quantize::RowsPass quantize::plan_qk_channels(const TensorShape& shape, int input_channels,
                                              const TensorView& input, const TensorView& output,
                                              float* scales, CUstream stream,
                                              const QuantizeOptions& options,
                                              const LaunchContext* where) {
  return plan_rows_pass(shape, input_channels, input, output, scales, stream, options, where);
}

void quantize::add_kernels(RowsPass& pass, launch::CallKernels& kernels) {
  add_rows_kernels(pass, kernels);
}

void quantize::launch_planned(const RowsPass& pass, CUstream stream) {
  launch_rows_pass(pass, stream);
}

void quantize::quantize_qk_channels(const TensorShape& shape, int input_channels,
                                    const TensorView& input, const TensorView& output,
                                    float* scales, CUstream stream,
                                    const QuantizeOptions& options) {
  RowsPass pass =
      plan_rows_pass(shape, input_channels, input, output, scales, stream, options, nullptr);
  launch::CallKernels kernels;
  add_rows_kernels(pass, kernels);
  kernels.load(pass.where.context);
  launch_rows_pass(pass, stream);
}

namespace {

// `input` is [batch, heads, seq, input_channels], or when `packed` the sequences' rows
// [1, heads, total_kv, input_channels] with their offsets `cu_seqlens` (which must then be set).
// `where`: the stream's launch context when the caller has it already (after the checks, the
// driver is asked otherwise).
// `run`: which passes (kScalesOnly needs no output). Fills `passes` in place.
void plan_v_passes(const TensorShape& shape, int input_channels, const TensorView& input,
                   bool packed, int total_kv, const int* cu_seqlens, void* output, float* scales,
                   VScaleGranularity granularity, quantize::VPassesRun run, CUstream stream,
                   const LaunchContext* where, VPasses& passes) {
  checks::validate_shape(shape, "shape");
  validate_input_channels(shape, input_channels);
  if (packed) {
    if (total_kv < 1) {
      throw InvalidArgument("total_kv", std::to_string(total_kv), "expected >= 1");
    }
    checks::validate_offsets(cu_seqlens, "cu_seqlens_kv");
  }
  checks::validate_view(input, {"input",
                                {packed ? 1 : shape.batch, shape.heads,
                                 packed ? total_kv : shape.seq, input_channels},
                                2,
                                16});
  const kernels::ElementType element = input_type(input, "input");
  if (run != quantize::VPassesRun::kBoth && granularity == VScaleGranularity::kPerBlock) {
    throw InvalidArgument("granularity", "block",
                          "expected tensor or channel: per-block scales are each block's own, "
                          "computed in quantize_v's one pass");
  }
  passes.quantize_pass = run != quantize::VPassesRun::kScalesOnly;
  if (passes.quantize_pass && output == nullptr) {
    throw InvalidArgument("output", "null", "expected a device pointer");
  }
  if (reinterpret_cast<std::uintptr_t>(output) % 16 != 0) {
    throw InvalidArgument("output", std::to_string(reinterpret_cast<std::uintptr_t>(output)),
                          "expected 16-byte alignment");
  }
  checks::validate_scales(scales, "scales");

  passes.where = where != nullptr ? *where : current_launch_context(stream);
  passes.params = quantize::v_params(shape, input, cu_seqlens, output, scales);
  passes.params.channels = input_channels;
  passes.quantize.spec = quantize::v_spec(passes.where.arch, shape.head_dim, element, granularity);
  passes.quantize.shape = quantize::v_launch_shape(shape, passes.params);
  if (granularity != VScaleGranularity::kPerBlock && run != quantize::VPassesRun::kQuantizeOnly) {
    passes.max_pass = true;
    passes.max.spec =
        quantize::v_scale_spec(passes.where.arch, shape.head_dim, element, granularity);
    passes.max.shape = passes.quantize.shape;
    passes.scale_count =
        v_scale_count(granularity, shape.batch, shape.heads, shape.seq, shape.head_dim);
  }
}

void zero_scales(const VPasses& passes, CUstream stream) {
  INTFA_DRIVER(cuMemsetD32Async, reinterpret_cast<CUdeviceptr>(passes.params.scales), 0,
               passes.scale_count, stream);
}

void add_v_kernels(VPasses& passes, launch::CallKernels& kernels) {
  if (passes.max_pass) add_kernel(passes.max, kernels);
  if (passes.quantize_pass) add_kernel(passes.quantize, kernels);
}

void launch_v_passes(const VPasses& passes, CUstream stream) {
  if (passes.max_pass) {
    // The maximum over the whole sequence, accumulated with atomicMax into zeroed scales.
    zero_scales(passes, stream);
    launch_kernel(passes.max, stream, &passes.params);
  }
  if (passes.quantize_pass) launch_kernel(passes.quantize, stream, &passes.params);
}

void load_and_launch_v_passes(VPasses& passes, CUstream stream) {
  launch::CallKernels kernels;
  add_v_kernels(passes, kernels);
  kernels.load(passes.where.context);
  launch_v_passes(passes, stream);
}

}  // namespace

void quantize_v(const TensorShape& shape, const TensorView& input, void* output, float* scales,
                VScaleGranularity granularity, CUstream stream) {
  quantize::quantize_v_channels(shape, shape.head_dim, input, output, scales, granularity, stream);
}

void v_scales(const TensorShape& shape, const TensorView& input, float* scales,
              VScaleGranularity granularity, CUstream stream) {
  VPasses passes;
  plan_v_passes(shape, shape.head_dim, input, false, 0, nullptr, nullptr, scales, granularity,
                quantize::VPassesRun::kScalesOnly, stream, nullptr, passes);
  load_and_launch_v_passes(passes, stream);
}

void quantize_v_with_scales(const TensorShape& shape, const TensorView& input, void* output,
                            const float* scales, VScaleGranularity granularity, CUstream stream) {
  VPasses passes;
  // The quantize pass only reads per-tensor and per-channel scales (QuantizeVParams::scales is
  // written by the max pass and, per block, by the quantize pass, neither of which runs here).
  plan_v_passes(shape, shape.head_dim, input, false, 0, nullptr, output, const_cast<float*>(scales),
                granularity, quantize::VPassesRun::kQuantizeOnly, stream, nullptr, passes);
  load_and_launch_v_passes(passes, stream);
}

void quantize_v_varlen(const TensorShape& shape, const TensorView& input, int total_kv,
                       const int* cu_seqlens_kv, void* output, float* scales,
                       VScaleGranularity granularity, CUstream stream) {
  quantize::quantize_v_varlen_channels(shape, shape.head_dim, input, total_kv, cu_seqlens_kv,
                                       output, scales, granularity, stream);
}

void quantize::quantize_v_channels(const TensorShape& shape, int input_channels,
                                   const TensorView& input, void* output, float* scales,
                                   VScaleGranularity granularity, CUstream stream) {
  VPasses passes;
  plan_v_passes(shape, input_channels, input, false, 0, nullptr, output, scales, granularity,
                VPassesRun::kBoth, stream, nullptr, passes);
  load_and_launch_v_passes(passes, stream);
}

void quantize::quantize_v_varlen_channels(const TensorShape& shape, int input_channels,
                                          const TensorView& input, int total_kv,
                                          const int* cu_seqlens_kv, void* output, float* scales,
                                          VScaleGranularity granularity, CUstream stream) {
  VPasses passes;
  plan_v_passes(shape, input_channels, input, true, total_kv, cu_seqlens_kv, output, scales,
                granularity, VPassesRun::kBoth, stream, nullptr, passes);
  load_and_launch_v_passes(passes, stream);
}

namespace {

// The launches of K and V other than quantize_k_v: K's rows with V's max pass in one launch where
// both kernels take part and the two grids fit one; otherwise each function's own.
void plan_two_launches(quantize::KAndVPlan& plan) {
  const VScaleGranularity v_granularity = plan.v_granularity;
  const RowsPass& k = plan.k;
  const VPasses& v = plan.v;
  const launch::LaunchShape& v_shape = v.quantize.shape;
  const long long v_blocks =
      static_cast<long long>(v_shape.grid[0]) * v_shape.grid[1] * v_shape.grid[2];
  const bool shared = quantize::k_and_v_share_a_launch(k.transforms.k_granularity, v_granularity) &&
                      !k.transforms.q_dot_k_mean &&
                      k.rows.shape.grid[0] + v_blocks <= std::numeric_limits<int>::max();
  if (!shared) {
    plan.launches = quantize::KAndVLaunches::kSeparate;
    return;
  }
  plan.launches = quantize::KAndVLaunches::kShared;
  plan.shared_params = quantize::k_v_scale_params(k.params, k.rows.shape, v.params);
  plan.both.spec = quantize::k_v_scale_spec(k.where.arch, k.rows.spec.head_dim, k.element,
                                            k.rows.spec.qk_bits, k.transforms, v_granularity);
  plan.both.shape = quantize::k_v_scale_launch_shape(plan.shared_params);
  plan.both.kernel = nullptr;
}

void add_k_and_v_kernels(quantize::KAndVPlan& plan, launch::CallKernels& kernels) {
  switch (plan.launches) {
    case quantize::KAndVLaunches::kOne:
      if (plan.k.mean_pass) add_kernel(plan.k.mean, kernels);
      add_kernel(plan.both, kernels);
      return;
    case quantize::KAndVLaunches::kShared:
      if (plan.k.mean_pass) add_kernel(plan.k.mean, kernels);
      add_kernel(plan.both, kernels);
      add_kernel(plan.v.quantize, kernels);
      return;
    case quantize::KAndVLaunches::kSeparate:
      add_rows_kernels(plan.k, kernels);
      add_v_kernels(plan.v, kernels);
      return;
  }
}

bool launch_k_and_v(const quantize::KAndVPlan& plan, CUstream stream) {
  const RowsPass& k = plan.k;
  const VPasses& v = plan.v;
  switch (plan.launches) {
    case quantize::KAndVLaunches::kOne:
      // A GPU (or MIG slice) that cannot hold one cluster of the split takes the two launches.
      if (!launch::cluster_fits(*plan.both.kernel, plan.both.shape)) {
        quantize::KAndVPlan two = plan;
        plan_two_launches(two);
        launch::CallKernels kernels;
        add_k_and_v_kernels(two, kernels);
        kernels.load(k.where.context);
        return launch_k_and_v(two, stream);
      }
      launch_channel_mean(k, stream);
      launch_kernel(plan.both, stream, &plan.one_params);
      return true;
    case quantize::KAndVLaunches::kShared:
      // V's scales are zeroed by the launch before the max pass: K's channel means when
      // they are computed, else a memset.
      if (k.mean_pass) {
        launch_channel_mean(k, stream, v.params.scales, v.scale_count);
      } else {
        zero_scales(v, stream);
      }
      launch_kernel(plan.both, stream, &plan.shared_params);
      launch_kernel(v.quantize, stream, &v.params);
      return false;
    case quantize::KAndVLaunches::kSeparate:
      launch_rows_pass(k, stream);
      launch_v_passes(v, stream);
      return false;
  }
  return false;
}

}  // namespace

quantize::KAndVPlan quantize::plan_k_and_v_channels(const KAndVPasses& kv, int input_channels,
                                                    CUstream stream, const LaunchContext* where) {
  KAndVPlan plan([&] {
    return plan_rows_pass(kv.k_shape, input_channels, kv.k_input, kv.k_output, kv.k_scales, stream,
                          kv.k_options, where);
  });
  const RowsPass& k = plan.k;
  // One kernel takes both: V is K's dtype and head dim (attention_forward_16bit checks the
  // dtypes; this says it where a caller does not).
  if (kv.v_input.dtype != kv.k_input.dtype) {
    throw InvalidArgument("v_input.dtype", dtype_name(kv.v_input.dtype),
                          "expected " + dtype_name(kv.k_input.dtype) + ", the dtype of k_input");
  }
  if (kv.v_shape.head_dim != kv.k_shape.head_dim) {
    throw InvalidArgument("v_shape.head_dim", std::to_string(kv.v_shape.head_dim),
                          "expected " + std::to_string(kv.k_shape.head_dim) + ", K's");
  }
  plan_v_passes(kv.v_shape, input_channels, kv.v_input, kv.cu_seqlens_kv != nullptr, kv.total_kv,
                kv.cu_seqlens_kv, kv.v_output, kv.v_scales, kv.v_granularity, VPassesRun::kBoth,
                stream, &k.where, plan.v);
  plan.v_granularity = kv.v_granularity;
  // On sm_90a, K's rows and all of V in one launch that reads V once, where V fits its clusters
  // (and the GPU holds one: launch_k_and_v asks).
  const std::optional<quantize::VSlices> slices =
      quantize::k_and_v_take_one_launch(k.where.arch, kv.k_options.k_granularity,
                                        kv.v_granularity) &&
              !k.transforms.q_dot_k_mean &&
              quantize::k_v_rows_match(k.params, plan.v.params, kv.total_kv) &&
              one_launch_kv_enabled()
          ? quantize::k_v_slices(kv.k_shape.head_dim, plan.v.params.padded_seq)
          : std::nullopt;
  if (slices) {
    plan.launches = KAndVLaunches::kOne;
    plan.one_params = quantize::k_v_params(k.params, plan.v.params, *slices);
    plan.both.spec = quantize::k_v_spec(k.where.arch, kv.k_shape.head_dim, k.element,
                                        kv.k_options.bits, k.transforms, kv.v_granularity);
    plan.both.shape = quantize::k_v_launch_shape(plan.one_params, *slices);
  } else {
    plan_two_launches(plan);
  }
  return plan;
}

void quantize::add_kernels(KAndVPlan& plan, launch::CallKernels& kernels) {
  add_k_and_v_kernels(plan, kernels);
}

bool quantize::launch_planned(const KAndVPlan& plan, CUstream stream) {
  return launch_k_and_v(plan, stream);
}

bool quantize::quantize_k_and_v_channels(const KAndVPasses& kv, int input_channels,
                                         CUstream stream) {
  KAndVPlan plan = plan_k_and_v_channels(kv, input_channels, stream);
  launch::CallKernels kernels;
  add_k_and_v_kernels(plan, kernels);
  kernels.load(plan.k.where.context);
  return launch_k_and_v(plan, stream);
}

}  // namespace intfa
