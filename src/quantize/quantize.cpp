// Host side of the quantize kernels: validation, spec, launch geometry.
#include "intfa/quantize.hpp"

#include "attention/attention_params.h"
#include "attention/validation.hpp"
#include "device/device_info.hpp"
#include "device/driver_api.hpp"
#include "intfa/errors.hpp"
#include "launch/kernel_runtime.hpp"
#include "quantize/quantize_params.h"
#include "render/kernel_spec.hpp"
#include "spec/quantize_specs.hpp"

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

// The members every quantize kernel's parameters share: the 16-bit input and its element
// strides, and the [batch, heads, seq] extent.
template <typename Params>
void set_input(Params& params, const TensorShape& shape, const TensorView& input) {
  params.input = input.data;
  params.input_batch_stride = input.strides[0];
  params.input_head_stride = input.strides[1];
  params.input_row_stride = input.strides[2];
  params.batch = shape.batch;
  params.heads = shape.heads;
  params.seq = shape.seq;
}

// The first pass of K smoothing: one block per (batch, head) (channel_mean.cuh).
void launch_channel_mean(const TensorShape& shape, const TensorView& input,
                         kernels::ElementType element, float* channel_mean,
                         const LaunchContext& where, CUstream stream) {
  const render::KernelSpec spec = quantize::channel_mean_spec(where.arch, shape.head_dim, element);
  kernels::ChannelMeanParams params{};
  set_input(params, shape, input);
  params.mean = channel_mean;
  launch::LaunchShape launch_shape;
  launch_shape.grid[0] = static_cast<unsigned>(shape.batch * shape.heads);
  launch_shape.block[0] = 512;  // ChannelMeanConfig::kThreads
  launch_spec(spec, where, launch_shape, stream, &params);
}

void require_float_alignment(const void* pointer, const char* field) {
  if (reinterpret_cast<std::uintptr_t>(pointer) % 4 != 0) {
    throw InvalidArgument(field, std::to_string(reinterpret_cast<std::uintptr_t>(pointer)),
                          "expected 4-byte alignment");
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
  attention::validate_shape(shape, "shape");
  if (options.bits != 8 && options.bits != 4) {
    throw InvalidArgument("options.bits", std::to_string(options.bits), "expected 8 or 4");
  }
  const kernels::ElementType element = input_type(input, "input");
  attention::validate_view(input, {"input", {shape.batch, shape.heads, shape.seq, shape.head_dim},
                                   2, 16});
  const DType output_dtype = options.bits == 8 ? DType::kI8 : DType::kI4x2;
  if (output.dtype != output_dtype) {
    throw InvalidArgument("output.dtype", dtype_name(output.dtype),
                          "expected " + dtype_name(output_dtype) + " for " +
                              std::to_string(options.bits) + "-bit quantization");
  }
  const int output_row_bytes = shape.head_dim * options.bits / 8;
  attention::validate_view(output,
                           {"output", {shape.batch, shape.heads, shape.seq, output_row_bytes}, 1, 16});
  attention::validate_scales(scales, "scales");

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
    launch_channel_mean(shape, input, element, options.smooth_k_channel_mean, where, stream);
  }

  kernels::QuantizeRowsParams params{};
  set_input(params, shape, input);
  params.output = output.data;
  params.scales = scales;
  params.channel_mean =
      transforms.smooth_k ? options.smooth_k_channel_mean : options.k_channel_mean;
  params.q_dot_k_mean = options.q_dot_k_mean;
  params.channel_mean_heads = transforms.q_dot_k_mean && options.k_channel_mean_heads > 0
                                  ? options.k_channel_mean_heads
                                  : shape.heads;
  params.output_batch_stride = output.strides[0];
  params.output_head_stride = output.strides[1];
  params.output_row_stride = output.strides[2];

  launch::LaunchShape launch_shape;
  if (per_block) {
    // quantize_row_blocks: one block of 256 threads per (64-row block, head, batch).
    launch_shape.grid[0] = static_cast<unsigned>(k_scale_blocks(shape.seq));
    launch_shape.grid[1] = static_cast<unsigned>(shape.heads);
    launch_shape.grid[2] = static_cast<unsigned>(shape.batch);
    launch_shape.block[0] = 256;
  } else {
    constexpr int kThreads = 128;  // quantize_rows' block size
    const int rows_per_block = kThreads / (shape.head_dim / 8);
    const long long rows = static_cast<long long>(shape.batch) * shape.heads * shape.seq;
    launch_shape.grid[0] = static_cast<unsigned>((rows + rows_per_block - 1) / rows_per_block);
    launch_shape.block[0] = kThreads;
  }
  launch_spec(spec, where, launch_shape, stream, &params);
}

namespace {

void launch_quantize_v(const TensorShape& shape, const TensorView& input, const int* cu_seqlens,
                       void* output, float* scales, VScaleGranularity granularity,
                       CUstream stream);

}  // namespace

void quantize_v(const TensorShape& shape, const TensorView& input, void* output, float* scales,
                VScaleGranularity granularity, CUstream stream) {
  attention::validate_shape(shape, "shape");
  attention::validate_view(input, {"input", {shape.batch, shape.heads, shape.seq, shape.head_dim},
                                   2, 16});
  launch_quantize_v(shape, input, nullptr, output, scales, granularity, stream);
}

void quantize_v_varlen(const TensorShape& shape, const TensorView& input, int total_kv,
                       const int* cu_seqlens_kv, void* output, float* scales,
                       VScaleGranularity granularity, CUstream stream) {
  attention::validate_shape(shape, "shape");
  if (total_kv < 1) {
    throw InvalidArgument("total_kv", std::to_string(total_kv), "expected >= 1");
  }
  attention::validate_offsets(cu_seqlens_kv, "cu_seqlens_kv");
  attention::validate_view(input, {"input", {1, shape.heads, total_kv, shape.head_dim}, 2, 16});
  launch_quantize_v(shape, input, cu_seqlens_kv, output, scales, granularity, stream);
}

namespace {

void launch_quantize_v(const TensorShape& shape, const TensorView& input, const int* cu_seqlens,
                       void* output, float* scales, VScaleGranularity granularity,
                       CUstream stream) {
  const kernels::ElementType element = input_type(input, "input");
  if (output == nullptr) throw InvalidArgument("output", "null", "expected a device pointer");
  if (reinterpret_cast<std::uintptr_t>(output) % 16 != 0) {
    throw InvalidArgument("output", std::to_string(reinterpret_cast<std::uintptr_t>(output)),
                          "expected 16-byte alignment");
  }
  attention::validate_scales(scales, "scales");

  const LaunchContext where = current_launch_context(stream);
  kernels::QuantizeVParams params{};
  set_input(params, shape, input);
  params.output = static_cast<kernels::i8*>(output);
  params.scales = scales;
  params.padded_seq = v_padded_seq(shape.seq);
  params.cu_seqlens = cu_seqlens;

  const render::KernelSpec spec =
      quantize::v_spec(where.arch, shape.head_dim, element, granularity);
  launch::LaunchShape launch_shape;
  launch_shape.grid[0] = static_cast<unsigned>(params.padded_seq / kernels::kVTokenBlock);
  launch_shape.grid[1] = static_cast<unsigned>(shape.heads);
  launch_shape.grid[2] = static_cast<unsigned>(shape.batch);
  launch_shape.block[0] = 256;

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
