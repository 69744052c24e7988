#include "families/quantize_family.hpp"

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "attention/attention_params.h"
#include "families/spec_format.hpp"
#include "intfa/attention.hpp"
#include "intfa/errors.hpp"
#include "numerics/numerics.hpp"
#include "numerics/option_names.hpp"

namespace intfa::quantize {
namespace {

using render::bool_argument;
using render::element_type_argument;

namespace format = families::spec_format;

const QuantizeKernel kKernels[] = {QuantizeKernel::kRows,    QuantizeKernel::kChannelMean,
                                   QuantizeKernel::kVScale,  QuantizeKernel::kV,
                                   QuantizeKernel::kKVScale, QuantizeKernel::kKV};

QuantizeSpec quantize_spec(QuantizeKernel kernel, device::Arch arch, int head_dim,
                           kernels::ElementType input) {
  QuantizeSpec spec;
  spec.kernel = kernel;
  spec.arch = arch;
  spec.head_dim = head_dim;
  spec.input_type = input;
  return spec;
}

// A kernel of templates/quantize/`header`: intfa::kernels::`kernel`<head dim, input type,
// `arguments`...> taking intfa::kernels::`params`.
render::Instantiation quantize_instantiation(const QuantizeSpec& spec, const char* header,
                                             const char* kernel,
                                             const std::vector<std::string>& arguments,
                                             const char* params) {
  std::string expression = std::string("intfa::kernels::") + kernel + "<" +
                           std::to_string(spec.head_dim) + ", " +
                           element_type_argument(spec.input_type);
  for (const std::string& argument : arguments) expression += ", " + argument;
  return {std::string("quantize/") + header, expression + ">",
          std::string("intfa::kernels::") + params};
}

// A kernel of quantize_v.cuh: quantize_v_scale or quantize_v.
render::Instantiation quantize_v_instantiation(const QuantizeSpec& spec, const char* kernel) {
  return quantize_instantiation(spec, "quantize_v.cuh", kernel,
                                {option_kernel_argument(spec.v_granularity)}, "QuantizeVParams");
}

// A kernel of K's rows and V in one launch (quantize_k_v_scale, quantize_k_v: header
// quantize/`kernel`.cuh): K per token without q_dot_k_mean, V per tensor or per channel (the
// rows half is quantize_rows' code for K; V's scales need a maximum over the sequence).
render::Instantiation k_and_v_instantiation(const QuantizeSpec& spec, const char* kernel,
                                            const char* params) {
  if (spec.v_granularity == VScaleGranularity::kPerBlock) {
    throw InvalidArgument("spec.v_granularity", "block",
                          std::string(kernel) + " takes V per tensor or per channel");
  }
  if (spec.k_granularity != KScaleGranularity::kPerToken || spec.q_dot_k_mean) {
    throw InvalidArgument("spec.k_granularity", spec.to_string(),
                          std::string(kernel) + " takes K's rows per token, without q_dot_k_mean");
  }
  return quantize_instantiation(
      spec, (std::string(kernel) + ".cuh").c_str(), kernel,
      {std::to_string(spec.qk_bits), bool_argument(spec.smooth_k),
       option_kernel_argument(spec.rotate), option_kernel_argument(spec.v_granularity)},
      params);
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
  params.channels = shape.head_dim;  // quantize/quantize_internal.hpp may narrow it
}

}  // namespace

kernels::ElementType element_type(DType dtype) {
  return dtype == DType::kBF16 ? kernels::ElementType::kBF16 : kernels::ElementType::kF16;
}

QuantizeSpec rows_spec(device::Arch arch, int head_dim, kernels::ElementType input, int bits,
                       const RowTransforms& transforms) {
  QuantizeSpec spec = quantize_spec(QuantizeKernel::kRows, arch, head_dim, input);
  spec.qk_bits = bits;
  spec.smooth_k = transforms.smooth_k;
  spec.q_dot_k_mean = transforms.q_dot_k_mean;
  spec.rotate = transforms.rotate;
  spec.k_granularity = transforms.k_granularity;
  return spec;
}

QuantizeSpec channel_mean_spec(device::Arch arch, int head_dim, kernels::ElementType input) {
  return quantize_spec(QuantizeKernel::kChannelMean, arch, head_dim, input);
}

QuantizeSpec v_spec(device::Arch arch, int head_dim, kernels::ElementType input,
                    VScaleGranularity granularity) {
  QuantizeSpec spec = quantize_spec(QuantizeKernel::kV, arch, head_dim, input);
  spec.v_granularity = granularity;
  return spec;
}

QuantizeSpec v_scale_spec(device::Arch arch, int head_dim, kernels::ElementType input,
                          VScaleGranularity granularity) {
  QuantizeSpec spec = v_spec(arch, head_dim, input, granularity);
  spec.kernel = QuantizeKernel::kVScale;
  return spec;
}

bool k_and_v_share_a_launch(KScaleGranularity k_granularity, VScaleGranularity v_granularity) {
  return k_granularity == KScaleGranularity::kPerToken &&
         v_granularity != VScaleGranularity::kPerBlock;
}

QuantizeSpec k_v_scale_spec(device::Arch arch, int head_dim, kernels::ElementType input, int bits,
                            const RowTransforms& k_transforms, VScaleGranularity granularity) {
  QuantizeSpec spec = quantize_spec(QuantizeKernel::kKVScale, arch, head_dim, input);
  spec.qk_bits = bits;
  spec.smooth_k = k_transforms.smooth_k;
  spec.rotate = k_transforms.rotate;
  spec.v_granularity = granularity;
  return spec;
}

bool k_and_v_take_one_launch(device::Arch arch, KScaleGranularity k_granularity,
                             VScaleGranularity v_granularity) {
  return arch == device::Arch::kSm90a && k_and_v_share_a_launch(k_granularity, v_granularity);
}

QuantizeSpec k_v_spec(device::Arch arch, int head_dim, kernels::ElementType input, int bits,
                      const RowTransforms& k_transforms, VScaleGranularity granularity) {
  QuantizeSpec spec = k_v_scale_spec(arch, head_dim, input, bits, k_transforms, granularity);
  spec.kernel = QuantizeKernel::kKV;
  return spec;
}

std::optional<VSlices> k_v_slices(int head_dim, int padded_seq) {
  const int blocks = padded_seq / kernels::kVTokenBlock;
  const std::uint64_t block_bytes =
      static_cast<std::uint64_t>(kernels::kVTokenBlock) * head_dim * 2;
  // The split over `cluster_blocks` blocks if its slices take at most `limit` bytes (in 64 bits:
  // a sequence of 2^28 tokens is a slice of gigabytes).
  auto slices_within = [&](int cluster_blocks, unsigned limit) -> std::optional<VSlices> {
    const int blocks_per_slice = (blocks + cluster_blocks - 1) / cluster_blocks;
    const std::uint64_t bytes = static_cast<std::uint64_t>(blocks_per_slice) * block_bytes;
    if (bytes > limit) return std::nullopt;
    VSlices slices;
    slices.cluster_blocks = cluster_blocks;
    slices.blocks_per_slice = blocks_per_slice;
    slices.shared_bytes = static_cast<unsigned>(bytes);
    return slices;
  };
  for (int cluster_blocks = 1; cluster_blocks <= kMostClusterBlocks; cluster_blocks *= 2) {
    if (auto slices = slices_within(cluster_blocks, kVSliceTargetBytes)) return slices;
  }
  return slices_within(kMostClusterBlocks, kVSliceLimitBytes);
}

namespace {

render::Instantiation rows_instantiation(const QuantizeSpec& spec) {
  // K with one scale per 64-row block: its own kernel (a block reduces over 64 rows).
  if (spec.k_granularity == KScaleGranularity::kPerBlock) {
    return quantize_instantiation(
        spec, "quantize_rows.cuh", "quantize_row_blocks",
        {bool_argument(spec.smooth_k), option_kernel_argument(spec.rotate)}, "QuantizeRowsParams");
  }
  return quantize_instantiation(
      spec, "quantize_rows.cuh", "quantize_rows",
      {std::to_string(spec.qk_bits), bool_argument(spec.smooth_k), bool_argument(spec.q_dot_k_mean),
       option_kernel_argument(spec.rotate)},
      "QuantizeRowsParams");
}

render::Instantiation instantiation(const QuantizeSpec& spec) {
  switch (spec.kernel) {
    case QuantizeKernel::kRows:
      return rows_instantiation(spec);
    case QuantizeKernel::kChannelMean:
      return quantize_instantiation(spec, "channel_mean.cuh", "channel_mean", {},
                                    "ChannelMeanParams");
    case QuantizeKernel::kVScale:
      return quantize_v_instantiation(spec, "quantize_v_scale");
    case QuantizeKernel::kV:
      return quantize_v_instantiation(spec, "quantize_v");
    case QuantizeKernel::kKVScale:
      return k_and_v_instantiation(spec, "quantize_k_v_scale", "QuantizeKVScaleParams");
    case QuantizeKernel::kKV:
      return k_and_v_instantiation(spec, "quantize_k_v", "QuantizeKVParams");
  }
  throw InternalError("unknown QuantizeKernel");
}

// " rotate", " rotate=auto" or nothing.
std::string rotation_text(QKRotation rotation) {
  if (rotation == QKRotation::kOff) return "";
  return rotation == QKRotation::kOn ? " rotate" : std::string(" rotate=") + option_name(rotation);
}

// What to_string says after "kernel arch dN": " f16->i8 smooth_k".
std::string fields_text(const QuantizeSpec& spec) {
  const std::string input = " " + render::element_type_name(spec.input_type);
  const std::string bits = spec.qk_bits == 4 ? "->i4" : "->i8";
  const std::string v_scale = " v-scale=" + std::string(option_name(spec.v_granularity));
  switch (spec.kernel) {
    case QuantizeKernel::kRows:
      return input + bits + (spec.smooth_k ? " smooth_k" : "") +
             (spec.q_dot_k_mean ? " q_dot_k_mean" : "") + rotation_text(spec.rotate) +
             (spec.k_granularity == KScaleGranularity::kPerBlock ? " k-scale=block" : "");
    case QuantizeKernel::kChannelMean:
      return input;
    case QuantizeKernel::kKVScale:
    case QuantizeKernel::kKV:
      return input + bits + (spec.smooth_k ? " smooth_k" : "") + rotation_text(spec.rotate) +
             v_scale;
    case QuantizeKernel::kVScale:
    case QuantizeKernel::kV:
      return input + v_scale;
  }
  throw InternalError("unknown QuantizeKernel");
}

// The numerics members of the spec JSON: the granularities the kernels read, the other options
// at the values a quantize spec has always written.
AttentionNumerics numerics_of(const QuantizeSpec& spec) {
  AttentionNumerics numerics = paper_numerics();
  numerics.v_granularity = spec.v_granularity;
  numerics.k_granularity = spec.k_granularity;
  return numerics;
}

}  // namespace

std::string kernel_name(QuantizeKernel kernel) {
  switch (kernel) {
    case QuantizeKernel::kRows:
      return "quantize_rows";
    case QuantizeKernel::kChannelMean:
      return "channel_mean";
    case QuantizeKernel::kVScale:
      return "quantize_v_scale";
    case QuantizeKernel::kV:
      return "quantize_v";
    case QuantizeKernel::kKVScale:
      return "quantize_k_v_scale";
    case QuantizeKernel::kKV:
      return "quantize_k_v";
  }
  throw InternalError("unknown QuantizeKernel");
}

bool operator==(const QuantizeSpec& a, const QuantizeSpec& b) {
  auto fields = [](const QuantizeSpec& s) {
    return std::tie(s.kernel, s.arch, s.head_dim, s.input_type, s.qk_bits, s.smooth_k,
                    s.q_dot_k_mean, s.rotate, s.v_granularity, s.k_granularity);
  };
  return fields(a) == fields(b);
}

std::string QuantizeSpec::to_string() const {
  return format::text_heading(kernel_name(kernel), arch, head_dim) + fields_text(*this);
}

json::Value QuantizeSpec::to_json() const {
  json::Value object = format::object_for(kernel_name(kernel), arch, head_dim);
  for (const char* tile : {"block_m", "block_n", "warps", "stages"}) object.set(tile, 0);
  object.set("qk_bits", qk_bits);
  object.set("variant", option_name(Variant::kFullInt8));
  object.set("input_type", render::element_type_name(input_type));
  object.set("output_type", render::element_type_name(kernels::ElementType::kF16));
  object.set("causal", false);
  numerics::write_json(object, numerics_of(*this));
  object.set("smooth_k", smooth_k);
  object.set("varlen", false);
  object.set("q_dot_k_mean", q_dot_k_mean);
  object.set("rotate", format::rotation_json(rotate));
  object.set("quantizes_q", false);
  return object;
}

QuantizeSpec QuantizeSpec::from_json(const json::Value& value) {
  return format::read([&] {
    QuantizeSpec spec;
    spec.kernel = format::kernel_member(value, kernel_name, kKernels);
    spec.arch = format::arch_member(value);
    spec.head_dim = format::int_member(value, "head_dim");
    spec.qk_bits = format::int_member(value, "qk_bits");
    spec.input_type = format::element_type_member(value, "input_type");
    // Absent granularities: the spec's own, Algorithm 1's (files of builds before per-block K
    // lack k_granularity, which was per token).
    const AttentionNumerics numerics =
        numerics::read_json<InvalidArgument>(value, "spec.", paper_numerics());
    spec.v_granularity = numerics.v_granularity;
    spec.k_granularity = numerics.k_granularity;
    spec.smooth_k = value.at("smooth_k").as_bool();
    // Absent before K smoothing's LSE term and the rotation existed (issue 25): neither.
    spec.q_dot_k_mean = format::optional_bool_member(value, "q_dot_k_mean");
    spec.rotate = format::rotation_member(value);
    return spec;
  });
}

bool names_kernel(const std::string& family) {
  for (QuantizeKernel kernel : kKernels) {
    if (kernel_name(kernel) == family) return true;
  }
  return false;
}

render::KernelId kernel_id(const QuantizeSpec& s) {
  using format::small_bit;
  const std::uint64_t small = small_bit(static_cast<unsigned>(s.kernel), format::kKernelTag) |
                              small_bit(static_cast<unsigned>(s.arch), format::kArch) |
                              small_bit(static_cast<unsigned>(s.input_type), format::kInputType) |
                              small_bit(s.smooth_k, format::kSmoothK) |
                              small_bit(s.q_dot_k_mean, format::kQDotKMean) |
                              format::rotation_bits(s.rotate);
  return render::KernelId{{small, format::two_fields(s.head_dim, 0), format::two_fields(0, 0),
                           format::two_fields(0, s.qk_bits), numerics::code(numerics_of(s))}};
}

render::KernelSource kernel_source(const QuantizeSpec& spec, const render::TemplateSet& templates) {
  return format::source(
      kernel_name(spec.kernel), spec.arch, spec.head_dim, [&] { return instantiation(spec); },
      templates, spec.to_string(), spec.to_json());
}

kernels::ChannelMeanParams channel_mean_params(const TensorShape& shape, const TensorView& input,
                                               float* channel_mean) {
  kernels::ChannelMeanParams params{};
  set_input(params, shape, input);
  params.mean = channel_mean;
  return params;
}

launch::LaunchShape channel_mean_launch_shape(const TensorShape& shape) {
  launch::LaunchShape launch_shape;
  launch_shape.grid[0] = static_cast<unsigned>(shape.batch * shape.heads);
  launch_shape.block[0] = 512;  // ChannelMeanConfig::kThreads
  return launch_shape;
}

kernels::QuantizeRowsParams rows_params(const TensorShape& shape, const TensorView& input,
                                        const TensorView& output, float* scales,
                                        const RowTransforms& transforms,
                                        const QuantizeOptions& options) {
  kernels::QuantizeRowsParams params{};
  set_input(params, shape, input);
  params.output = output.data;
  params.scales = scales;
  // K smoothing's means (computed by the pass before, or given), or Q's LSE term's.
  params.channel_mean = !transforms.smooth_k                     ? options.k_channel_mean
                        : options.smooth_k_given_mean != nullptr ? options.smooth_k_given_mean
                                                                 : options.smooth_k_channel_mean;
  params.q_dot_k_mean = options.q_dot_k_mean;
  // Q reads K's per-head buffers (means, rotation decisions) through its KV head.
  const bool reads_k_heads = transforms.q_dot_k_mean || options.k_rotated_heads != nullptr;
  params.channel_mean_heads = reads_k_heads && options.k_channel_mean_heads > 0
                                  ? options.k_channel_mean_heads
                                  : shape.heads;
  params.rotated_heads =
      options.k_rotated_heads != nullptr ? options.k_rotated_heads : options.rotated_heads;
  params.output_batch_stride = output.strides[0];
  params.output_head_stride = output.strides[1];
  params.output_row_stride = output.strides[2];
  return params;
}

launch::LaunchShape rows_launch_shape(const TensorShape& shape, const RowTransforms& transforms) {
  launch::LaunchShape launch_shape;
  if (transforms.k_granularity == KScaleGranularity::kPerBlock) {
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
  return launch_shape;
}

kernels::QuantizeVParams v_params(const TensorShape& shape, const TensorView& input,
                                  const int* cu_seqlens, void* output, float* scales) {
  kernels::QuantizeVParams params{};
  set_input(params, shape, input);
  params.output = static_cast<kernels::i8*>(output);
  params.scales = scales;
  params.padded_seq = v_padded_seq(shape.seq);
  params.cu_seqlens = cu_seqlens;
  return params;
}

launch::LaunchShape v_launch_shape(const TensorShape& shape,
                                   const kernels::QuantizeVParams& params) {
  launch::LaunchShape launch_shape;
  launch_shape.grid[0] = static_cast<unsigned>(params.padded_seq / kernels::kVTokenBlock);
  launch_shape.grid[1] = static_cast<unsigned>(shape.heads);
  launch_shape.grid[2] = static_cast<unsigned>(shape.batch);
  launch_shape.block[0] = 256;
  return launch_shape;
}

kernels::QuantizeKVScaleParams k_v_scale_params(const kernels::QuantizeRowsParams& k,
                                                const launch::LaunchShape& k_shape,
                                                const kernels::QuantizeVParams& v) {
  kernels::QuantizeKVScaleParams params{};
  params.k = k;
  params.v = v;
  params.k_blocks = k_shape.grid[0];
  params.v_blocks_per_head = v.padded_seq / kernels::kVTokenBlock;
  return params;
}

launch::LaunchShape k_v_scale_launch_shape(const kernels::QuantizeKVScaleParams& params) {
  launch::LaunchShape launch_shape;
  const long long v_blocks =
      static_cast<long long>(params.v_blocks_per_head) * params.v.heads * params.v.batch;
  launch_shape.grid[0] = static_cast<unsigned>(params.k_blocks + v_blocks);
  launch_shape.block[0] = 128;  // quantize_rows' block size, the fused kernel's
  return launch_shape;
}

bool k_v_rows_match(const kernels::QuantizeRowsParams& k, const kernels::QuantizeVParams& v,
                    int total_kv) {
  // Packed: K's rows [1, heads, total_kv] hold every sequence V's offsets name; dense: one row per
  // (batch, head, token) of V.
  if (v.cu_seqlens != nullptr) return k.batch == 1 && k.heads == v.heads && k.seq == total_kv;
  return k.batch == v.batch && k.heads == v.heads && k.seq == v.seq;
}

kernels::QuantizeKVParams k_v_params(const kernels::QuantizeRowsParams& k,
                                     const kernels::QuantizeVParams& v, const VSlices& slices) {
  kernels::QuantizeKVParams params{};
  params.k = k;
  params.v = v;
  params.v_blocks_per_slice = slices.blocks_per_slice;
  return params;
}

launch::LaunchShape k_v_launch_shape(const kernels::QuantizeKVParams& params,
                                     const VSlices& slices) {
  launch::LaunchShape launch_shape;
  launch_shape.grid[0] = static_cast<unsigned>(slices.cluster_blocks);  // one cluster per head
  launch_shape.grid[1] = static_cast<unsigned>(params.v.heads);
  launch_shape.grid[2] = static_cast<unsigned>(params.v.batch);
  launch_shape.cluster_blocks = static_cast<unsigned>(slices.cluster_blocks);
  launch_shape.block[0] = kernels::kQuantizeKVThreads;
  launch_shape.dynamic_shared_bytes = slices.shared_bytes;
  return launch_shape;
}

}  // namespace intfa::quantize
