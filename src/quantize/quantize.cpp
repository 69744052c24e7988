// The quantize entry points: validation of their arguments, then the family's specs, parameters
// and launch shapes (src/families/quantize_family.hpp) on the caller's stream.
#include "intfa/quantize.hpp"

#include "api/tensor_checks.hpp"
#include "device/device_info.hpp"
#include "device/driver_api.hpp"
#include "families/quantize_family.hpp"
#include "intfa/errors.hpp"
#include "launch/kernel_runtime.hpp"
#include "quantize/quantize_internal.hpp"
#include "render/kernel_spec.hpp"

namespace intfa {
namespace {

kernels::ElementType input_type(const TensorView& input, const char* field) {
  if (input.dtype == DType::kF16) return kernels::ElementType::kF16;
  if (input.dtype == DType::kBF16) return kernels::ElementType::kBF16;
  throw InvalidArgument(std::string(field) + ".dtype", dtype_name(input.dtype),
                        "expected f16 or bf16");
}

struct LaunchContext {
  CUcontext context;
  device::Arch arch;
};

LaunchContext current_launch_context(CUstream stream) {
  LaunchContext launch_context;
  launch_context.context = launch::launch_context(stream);
  CUdevice device = 0;
  INTFA_DRIVER(cuCtxGetDevice, &device);
  launch_context.arch = device::cached_device_info(device).arch;
  return launch_context;
}

void launch_spec(const render::KernelSpec& spec, const LaunchContext& where,
                 const launch::LaunchShape& shape, CUstream stream, const void* params) {
  const launch::LoadedKernel& kernel =
      launch::KernelRuntime::instance().load(spec, where.context, shape.dynamic_shared_bytes);
  launch::launch(kernel, shape, stream, params);
}

// The first pass of K smoothing: one block per (batch, head) (channel_mean.cuh).
void launch_channel_mean(const TensorShape& shape, int input_channels, const TensorView& input,
                         kernels::ElementType element, float* channel_mean,
                         const LaunchContext& where, CUstream stream) {
  const render::KernelSpec spec = quantize::channel_mean_spec(where.arch, shape.head_dim, element);
  kernels::ChannelMeanParams params = quantize::channel_mean_params(shape, input, channel_mean);
  params.channels = input_channels;
  launch_spec(spec, where, quantize::channel_mean_launch_shape(shape), stream, &params);
}

void require_float_alignment(const void* pointer, const char* field) {
  if (reinterpret_cast<std::uintptr_t>(pointer) % 4 != 0) {
    throw InvalidArgument(field, std::to_string(reinterpret_cast<std::uintptr_t>(pointer)),
                          "expected 4-byte alignment");
  }
}

// The channels of an input narrower than the kernel's head dim (quantize_internal.hpp).
void validate_input_channels(const TensorShape& shape, int input_channels) {
  if (input_channels < 8 || input_channels > shape.head_dim || input_channels % 8 != 0) {
    throw InvalidArgument("input_channels", std::to_string(input_channels),
                          "expected a multiple of 8 up to shape.head_dim " +
                              std::to_string(shape.head_dim));
  }
}

// The QuantizeOptions fields about K smoothing and the LSE term, checked against `shape`.
void validate_smoothing(const TensorShape& shape, const QuantizeOptions& options) {
  require_float_alignment(options.smooth_k_channel_mean, "options.smooth_k_channel_mean");
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
  const int mean_heads = options.k_channel_mean_heads;
  if (mean_heads < 0 || (mean_heads > 0 && shape.heads % mean_heads != 0)) {
    throw InvalidArgument("options.k_channel_mean_heads", std::to_string(mean_heads),
                          "expected 0 (the shape's heads) or a divisor of shape.heads " +
                              std::to_string(shape.heads));
  }
}

}  // namespace

void quantize_qk(const TensorShape& shape, const TensorView& input, const TensorView& output,
                 float* scales, CUstream stream, const QuantizeOptions& options) {
  quantize::quantize_qk_channels(shape, shape.head_dim, input, output, scales, stream, options);
}

void quantize::quantize_qk_channels(const TensorShape& shape, int input_channels,
                                    const TensorView& input, const TensorView& output,
                                    float* scales, CUstream stream,
                                    const QuantizeOptions& options) {
  checks::validate_shape(shape, "shape");
  validate_input_channels(shape, input_channels);
  if (options.bits != 8 && options.bits != 4) {
    throw InvalidArgument("options.bits", std::to_string(options.bits), "expected 8 or 4");
  }
  const kernels::ElementType element = input_type(input, "input");
  checks::validate_view(input, {"input", {shape.batch, shape.heads, shape.seq, input_channels},
                                   2, 16});
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
  const bool per_block = options.k_granularity == KScaleGranularity::kPerBlock;
  if (per_block && options.bits != 8) {
    throw InvalidArgument("options.k_granularity", "block",
                          "per-block scales are for 8-bit K (options.bits is " +
                              std::to_string(options.bits) + ")");
  }
  if (per_block && options.q_dot_k_mean != nullptr) {
    throw InvalidArgument("options.k_granularity", "block",
                          "per-block scales are for K; Q (which writes q_dot_k_mean) is per token");
  }

  const LaunchContext where = current_launch_context(stream);
  quantize::RowTransforms transforms;
  transforms.smooth_k = options.smooth_k_channel_mean != nullptr;
  transforms.q_dot_k_mean = options.q_dot_k_mean != nullptr;
  transforms.rotate = options.rotate;
  transforms.k_granularity = options.k_granularity;
  const render::KernelSpec spec =
      quantize::rows_spec(where.arch, shape.head_dim, element, options.bits, transforms);
  if (transforms.smooth_k) {
    launch_channel_mean(shape, input_channels, input, element, options.smooth_k_channel_mean,
                        where, stream);
  }

  kernels::QuantizeRowsParams params =
      quantize::rows_params(shape, input, output, scales, transforms, options);
  params.channels = input_channels;
  launch_spec(spec, where, quantize::rows_launch_shape(shape, transforms), stream, &params);
}

namespace {

void launch_quantize_v(const TensorShape& shape, int input_channels, const TensorView& input,
                       const int* cu_seqlens, void* output, float* scales,
                       VScaleGranularity granularity, CUstream stream);

}  // namespace

void quantize_v(const TensorShape& shape, const TensorView& input, void* output, float* scales,
                VScaleGranularity granularity, CUstream stream) {
  quantize::quantize_v_channels(shape, shape.head_dim, input, output, scales, granularity, stream);
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
  checks::validate_shape(shape, "shape");
  validate_input_channels(shape, input_channels);
  checks::validate_view(input, {"input", {shape.batch, shape.heads, shape.seq, input_channels},
                                   2, 16});
  launch_quantize_v(shape, input_channels, input, nullptr, output, scales, granularity, stream);
}

void quantize::quantize_v_varlen_channels(const TensorShape& shape, int input_channels,
                                          const TensorView& input, int total_kv,
                                          const int* cu_seqlens_kv, void* output, float* scales,
                                          VScaleGranularity granularity, CUstream stream) {
  checks::validate_shape(shape, "shape");
  validate_input_channels(shape, input_channels);
  if (total_kv < 1) {
    throw InvalidArgument("total_kv", std::to_string(total_kv), "expected >= 1");
  }
  checks::validate_offsets(cu_seqlens_kv, "cu_seqlens_kv");
  checks::validate_view(input, {"input", {1, shape.heads, total_kv, input_channels}, 2, 16});
  launch_quantize_v(shape, input_channels, input, cu_seqlens_kv, output, scales, granularity,
                    stream);
}

namespace {

void launch_quantize_v(const TensorShape& shape, int input_channels, const TensorView& input,
                       const int* cu_seqlens, void* output, float* scales,
                       VScaleGranularity granularity, CUstream stream) {
  const kernels::ElementType element = input_type(input, "input");
  if (output == nullptr) throw InvalidArgument("output", "null", "expected a device pointer");
  if (reinterpret_cast<std::uintptr_t>(output) % 16 != 0) {
    throw InvalidArgument("output", std::to_string(reinterpret_cast<std::uintptr_t>(output)),
                          "expected 16-byte alignment");
  }
  checks::validate_scales(scales, "scales");

  const LaunchContext where = current_launch_context(stream);
  kernels::QuantizeVParams params = quantize::v_params(shape, input, cu_seqlens, output, scales);
  params.channels = input_channels;

  const render::KernelSpec spec =
      quantize::v_spec(where.arch, shape.head_dim, element, granularity);
  const launch::LaunchShape launch_shape = quantize::v_launch_shape(shape, params);

  if (granularity != VScaleGranularity::kPerBlock) {
    // The maximum over the whole sequence, accumulated with atomicMax into zeroed scales.
    const std::size_t count = v_scale_count(granularity, shape.batch, shape.heads, shape.seq,
                                            shape.head_dim);
    INTFA_DRIVER(cuMemsetD32Async, reinterpret_cast<CUdeviceptr>(scales), 0, count, stream);
    launch_spec(quantize::v_scale_spec(where.arch, shape.head_dim, element, granularity), where,
                launch_shape, stream, &params);
  }
  launch_spec(spec, where, launch_shape, stream, &params);
}

}  // namespace

}  // namespace intfa
