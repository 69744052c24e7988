// The quantize kernel families (quantize_rows and quantize_row_blocks, channel_mean,
// quantize_v_scale, quantize_v, quantize_k_v_scale, quantize_k_v): everything the rest of intfa
// needs to know about these kernels, in one place. Their spec (QuantizeSpec: the six kernels
// share its fields, and `kernel` says which one), how it renders, its text and JSON, the kernels'
// launch shapes and the packing of their parameters. The kernels' shared memory is static but
// quantize_k_v's V slice (k_v_launch_shape's dynamic shared bytes), and what they can implement
// is checked by the public entry points (src/quantize/quantize.cpp) against their arguments.
//
// Fields each kernel reads (others stay at their defaults):
//   quantize_rows     head_dim, input_type, qk_bits, smooth_k, q_dot_k_mean, rotate,
//                     k_granularity (per block: the kernel quantize_row_blocks, 8 bits)
//   channel_mean      head_dim, input_type
//   quantize_v_scale  head_dim, input_type, v_granularity
//   quantize_v        head_dim, input_type, v_granularity
//   quantize_k_v_scale  head_dim, input_type, qk_bits, smooth_k, rotate, v_granularity (K's
//                     rows per token, V per tensor or per channel: attention_forward_16bit's K
//                     and V max passes in one launch)
//   quantize_k_v      the same fields: K's rows and all of V in one launch that reads V once
//                     (sm_90a; clusters, V's slice in dynamic shared memory)
#pragma once

#include <optional>

#include "common/json.hpp"
#include "device/arch.hpp"
#include "intfa/quantize.hpp"
#include "intfa/types.hpp"
#include "launch/kernel_runtime.hpp"
#include "quantize/quantize_params.h"
#include "render/kernel_source.hpp"
#include "render/render.hpp"

namespace intfa::quantize {

// ---- The spec ----------------------------------------------------------------------------------

// The six kernels, numbered as the first of the families' kernel tags (spec_format.hpp) so that
// no two families' kernel ids meet.
enum class QuantizeKernel {
  kRows = 0,         // FP16/BF16 rows -> INT8 (or packed INT4) + one FP32 scale per row (Q, K)
  kChannelMean = 1,  // per-(batch, head) channel means of K (the first pass of K smoothing)
  kVScale = 2,       // per-(batch, head) max|V| / 127 (the first pass of per-tensor V)
  kV = 3,            // FP16/BF16 V -> INT8 in the attention kernel's V layout
  kKVScale = 4,      // K's rows and V's max pass in one launch (attention_forward_16bit)
  kKV = 5,           // K's rows and all of V in one launch, V read once (sm_90a clusters)
};
// "quantize_rows", "channel_mean", "quantize_v_scale", "quantize_v", "quantize_k_v_scale",
// "quantize_k_v": the spec JSON's "family" and the unit's file name.
std::string kernel_name(QuantizeKernel kernel);

struct QuantizeSpec {
  QuantizeKernel kernel = QuantizeKernel::kRows;
  device::Arch arch = device::Arch::kSm80;
  int head_dim = 0;
  kernels::ElementType input_type = kernels::ElementType::kF16;  // FP16 or BF16
  int qk_bits = 8;                                               // K's and Q's rows: 8 or 4
  bool smooth_k = false;      // K's rows: minus K's channel means
  bool q_dot_k_mean = false;  // Q's rows of a smoothed K: q . mean per row, the LSE term
  QKRotation rotate = QKRotation::kOff;  // rows rotated (incoherent processing, rotation.h)
  // V's scales and K's rows' (per block: quantize_row_blocks); the enums' first values where
  // the kernel does not read them.
  VScaleGranularity v_granularity = VScaleGranularity::kPerTensor;
  KScaleGranularity k_granularity = KScaleGranularity::kPerToken;

  friend bool operator==(const QuantizeSpec& a, const QuantizeSpec& b);
  friend bool operator!=(const QuantizeSpec& a, const QuantizeSpec& b) { return !(a == b); }

  // "quantize_rows sm_90a d128 f16->i8 smooth_k": the kernel, arch, head dim, and the fields the
  // kernel reads.
  std::string to_string() const;
  // The spec file's members (families/spec_format.hpp), those a quantize kernel has no field for
  // at their constant values.
  json::Value to_json() const;
  // Inverse of to_json for a quantize kernel's "family"; throws InvalidArgument naming the bad
  // member.
  static QuantizeSpec from_json(const json::Value& value);
};

// Whether `family` (a spec JSON's "family") names a quantize kernel.
bool names_kernel(const std::string& family);

// The spec's fields packed into the JIT core's key: equal ids exactly for equal specs.
render::KernelId kernel_id(const QuantizeSpec& spec);
// What the JIT core takes: the kernel's unit, arch, to_string() and to_json(). Throws
// InvalidArgument when the fields cannot be rendered (quantize_k_v with per-block V, ...).
render::KernelSource kernel_source(
    const QuantizeSpec& spec, const render::TemplateSet& templates = render::TemplateSet::active());

// ---- Specs of the entry points -----------------------------------------------------------------

// 16-bit input type of the quantize kernels (kF16 or kBF16).
kernels::ElementType element_type(DType dtype);

// What quantize_rows does to a row besides quantizing it (the QuantizeSpec fields of the same
// names).
struct RowTransforms {
  bool smooth_k = false;      // K: minus its channel means
  bool q_dot_k_mean = false;  // Q of a smoothed K: q . mean per row, the LSE term
  QKRotation rotate = QKRotation::kOff;  // Q and K: the rotation of incoherent processing
  // K: one scale per row, or per 64-row block (quantize_row_blocks).
  KScaleGranularity k_granularity = KScaleGranularity::kPerToken;
};

// quantize_qk's row pass.
QuantizeSpec rows_spec(device::Arch arch, int head_dim, kernels::ElementType input, int bits,
                       const RowTransforms& transforms = {});
// K smoothing's first pass: the per-(batch, head) channel means.
QuantizeSpec channel_mean_spec(device::Arch arch, int head_dim, kernels::ElementType input);
// quantize_v's quantize pass and, unless per block, the max pass that runs before it.
QuantizeSpec v_spec(device::Arch arch, int head_dim, kernels::ElementType input,
                    VScaleGranularity granularity);
QuantizeSpec v_scale_spec(device::Arch arch, int head_dim, kernels::ElementType input,
                          VScaleGranularity granularity);
// Whether attention_forward_16bit runs K's rows and V's max pass in one launch (k_v_scale_spec):
// V has a max pass (per tensor or per channel) and K's scales are per token (quantize_rows).
bool k_and_v_share_a_launch(KScaleGranularity k_granularity, VScaleGranularity v_granularity);
// K's row pass (`transforms` of K: smooth_k and rotate, per token) and V's max pass in one launch.
QuantizeSpec k_v_scale_spec(device::Arch arch, int head_dim, kernels::ElementType input, int bits,
                            const RowTransforms& k_transforms, VScaleGranularity granularity);

// Whether attention_forward_16bit can take K's rows and all of V in one launch (quantize_k_v) on
// `arch`: sm_90a (thread block clusters; the one arch it has run on), K per token, V per tensor
// or per channel. Whether a problem's V fits the clusters is k_v_slices' answer.
bool k_and_v_take_one_launch(device::Arch arch, KScaleGranularity k_granularity,
                             VScaleGranularity v_granularity);
QuantizeSpec k_v_spec(device::Arch arch, int head_dim, kernels::ElementType input, int bits,
                      const RowTransforms& k_transforms, VScaleGranularity granularity);

// How quantize_k_v splits a (batch, head) of V of padded_seq tokens (a multiple of 64) over a
// cluster: the fewest blocks (a power of two, at most 16) whose slices take at most
// kVSliceTargetBytes of shared memory each, or 16 blocks up to kVSliceLimitBytes; nullopt when
// V is longer than that (the two-launch passes take it).
struct VSlices {
  int cluster_blocks = 1;
  int blocks_per_slice = 1;  // 64-token blocks
  unsigned shared_bytes = 0;
};
// 32 KiB leaves room for four blocks per SM, as many as their registers allow: more blocks in
// flight than 64 KiB slices give (bench/history/2026-11-27.md, "K and all of V in one launch: V
// read once", fix 2; smaller targets measured slower: "Two things tried and not kept").
constexpr unsigned kVSliceTargetBytes = 32 * 1024;
constexpr unsigned kVSliceLimitBytes = 192 * 1024;  // one block's (227 KiB on sm_90a)
// 16 blocks is the H100's largest cluster (a non-portable size); whether a GPU (or its MIG slice)
// can hold a cluster of the split is the launch's question (launch::cluster_fits).
constexpr int kMostClusterBlocks = 16;
std::optional<VSlices> k_v_slices(int head_dim, int padded_seq);

// ---- Parameters and launch shapes --------------------------------------------------------------

// The first pass of K smoothing: one block per (batch, head) (channel_mean.cuh).
kernels::ChannelMeanParams channel_mean_params(const TensorShape& shape, const TensorView& input,
                                               float* channel_mean);
launch::LaunchShape channel_mean_launch_shape(const TensorShape& shape);

// The row pass of `options` (quantize_qk's arguments, checked), whose `transforms` are the spec's.
kernels::QuantizeRowsParams rows_params(const TensorShape& shape, const TensorView& input,
                                        const TensorView& output, float* scales,
                                        const RowTransforms& transforms,
                                        const QuantizeOptions& options);
launch::LaunchShape rows_launch_shape(const TensorShape& shape, const RowTransforms& transforms);

// V's passes (the max pass, unless per block, and the quantize pass take the same parameters and
// grid); `cu_seqlens` is null for a dense batch.
kernels::QuantizeVParams v_params(const TensorShape& shape, const TensorView& input,
                                  const int* cu_seqlens, void* output, float* scales);
launch::LaunchShape v_launch_shape(const TensorShape& shape,
                                   const kernels::QuantizeVParams& params);

// The two in one launch: `k` and `k_shape` as rows_params' and rows_launch_shape's (per token),
// `v` as v_params'.
kernels::QuantizeKVScaleParams k_v_scale_params(const kernels::QuantizeRowsParams& k,
                                                const launch::LaunchShape& k_shape,
                                                const kernels::QuantizeVParams& v);
launch::LaunchShape k_v_scale_launch_shape(const kernels::QuantizeKVScaleParams& params);

// quantize_k_v: `k` as rows_params' (per token; V's batch and heads, or packed as V's
// cu_seqlens say: k_v_rows_match), `v` as v_params', split as `slices`.
bool k_v_rows_match(const kernels::QuantizeRowsParams& k, const kernels::QuantizeVParams& v,
                    int total_kv);
kernels::QuantizeKVParams k_v_params(const kernels::QuantizeRowsParams& k,
                                     const kernels::QuantizeVParams& v, const VSlices& slices);
launch::LaunchShape k_v_launch_shape(const kernels::QuantizeKVParams& params,
                                     const VSlices& slices);

}  // namespace intfa::quantize
