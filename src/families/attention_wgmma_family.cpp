#include "families/attention_wgmma_family.hpp"

#include <cuda.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "common/strings.hpp"
#include "device/driver_api.hpp"
#include "families/attention_family.hpp"
#include "intfa/errors.hpp"
#include "numerics/option_names.hpp"

namespace intfa::attention {
namespace {

using render::bool_argument;
using render::element_type_argument;

}  // namespace

// The Hopper kernel has 8-bit Q.K, full or half INT8, and block_m = 64 per consumer warpgroup
// (warps = 4 per warpgroup, one of them the producer).
render::Instantiation wgmma_instantiation(const AttentionSpec& spec) {
  render::ConstantsStruct fields("intfa_spec");
  fields.add("head_dim", spec.head_dim)
      .add("block_n", spec.block_n)
      .add("warps", spec.warps)
      .add("stages", spec.stages)
      .add("intfa::kernels::AttentionVariant", "variant", option_kernel_argument(spec.variant))
      .add("input_type", spec.input_type)
      .add("output_type", spec.output_type)
      .add("causal", spec.causal)
      .add("quantizes_q", spec.quantizes_q)
      .add("q_dot_k_mean", spec.q_dot_k_mean)
      .add("intfa::kernels::QKRotation", "rotate_q", option_kernel_argument(spec.rotate))
      .add("varlen", spec.varlen);
  const render::ConstantsStruct numerics = numerics_constants(spec);
  return {"attention/attention_forward_wgmma.cuh",
          "intfa::kernels::attention_forward_wgmma<intfa::kernels::WgmmaAttentionConfig<" +
              fields.name() + ", " + numerics.name() + ">>",
          "const __grid_constant__ intfa::kernels::WgmmaAttentionParams",
          fields.definition() + numerics.definition()};
}

int wgmma_shared_bytes(const AttentionSpec& spec) {
  const bool full_int8 = spec.variant == Variant::kFullInt8;
  return kernels::wgmma_attention_shared_bytes(spec.head_dim, spec.block_m, spec.block_n,
                                               spec.stages, full_int8 ? 1 : 2);
}

void validate_wgmma_config(const AttentionSpec& spec) {
  const std::string path = " with config.path = wgmma";
  if (spec.arch != device::Arch::kSm90a) {
    throw Unsupported("config.path = wgmma needs sm_90a (warpgroup MMAs and TMA); the target is " +
                      device::arch_name(spec.arch));
  }
  if (spec.qk_bits != 8) {
    throw InvalidArgument("problem.qk_bits", std::to_string(spec.qk_bits), "expected 8" + path);
  }
  if (spec.quantizes_q && spec.input_type == kernels::ElementType::kF32) {
    throw InvalidArgument("spec.input_type", "f32", "expected f16 or bf16 (Q quantized in the "
                          "kernel)");
  }
  if (spec.rotate != QKRotation::kOff && !spec.quantizes_q) {
    throw InvalidArgument("spec.rotate", option_name(spec.rotate),
                          "the kernel rotates Q in its own Q pass (spec.quantizes_q)");
  }
  if (spec.q_dot_k_mean && !spec.quantizes_q) {
    throw InvalidArgument("spec.q_dot_k_mean", "true",
                          "the LSE term comes from the kernel's own Q pass (spec.quantizes_q)");
  }
  const int consumer_groups = spec.warps / 4 - 1;
  if (spec.warps % 4 != 0 || consumer_groups < 1 || consumer_groups > 3) {
    throw InvalidArgument("config.warps", std::to_string(spec.warps),
                          "expected 8, 12 or 16 (a producer and 1 to 3 consumer warpgroups)" +
                              path);
  }
  if (consumer_groups == 3 && spec.head_dim > 128) {
    throw InvalidArgument("config.warps", std::to_string(spec.warps),
                          "3 consumer warpgroups leave 160 registers per thread: head_dim <= 128");
  }
  // Half INT8 keeps the FP32 output, S and the 16-bit P in registers together: at d=128 they
  // fit 160 registers beside the loop's own with 64-key tiles only (S and P take half as many).
  if (consumer_groups == 3 && spec.variant == Variant::kHalfInt8 && spec.head_dim > 64 &&
      !(spec.head_dim == 128 && spec.block_n == 64)) {
    throw InvalidArgument("config.warps", std::to_string(spec.warps),
                          "3 consumer warpgroups leave 160 registers per thread: half_int8 at "
                          "head_dim 128 needs block_n = 64 (head_dim 64: any)");
  }
  if (consumer_groups == 1 && spec.head_dim > 128) {
    throw InvalidArgument("config.warps", std::to_string(spec.warps),
                          "1 consumer warpgroup runs two blocks per SM (232 registers per "
                          "thread, half the shared memory): head_dim <= 128");
  }
  if (spec.block_m != kernels::kWgmmaGroupRows * consumer_groups) {
    throw InvalidArgument("config.block_m", std::to_string(spec.block_m),
                          "expected 64 rows per consumer warpgroup (16 * (warps - 4))" + path);
  }
  if (spec.block_n != 64 && spec.block_n != 128) {
    throw InvalidArgument("config.block_n", std::to_string(spec.block_n),
                          "expected 64 or 128" + path);
  }
  if (spec.head_dim == 256 && spec.block_n != 64) {
    throw InvalidArgument("config.block_n", std::to_string(spec.block_n),
                          "expected 64 at head_dim 256 (registers)" + path);
  }
}

// ---- The TMA descriptors ------------------------------------------------------------------------

namespace {

static_assert(sizeof(CUtensorMap) == sizeof(kernels::TensorMap), "TensorMap mirrors CUtensorMap");

constexpr std::int64_t kTmaAlignment = 16;
constexpr std::int64_t kMaxTmaStride = std::int64_t{1} << 40;

bool aligned(const void* pointer) {
  return reinterpret_cast<std::uintptr_t>(pointer) % kTmaAlignment == 0;
}

// One operand as TMA sees it: four dimensions, innermost first, in elements of `element_bytes`
// (1: INT8, 2: half INT8's 16-bit V), and the byte strides of dimensions 1..3 with the
// TensorView::strides index each comes from (for messages).
struct TmaOperand {
  const char* name;  // "q", "k" or "v"
  const void* data;
  std::uint64_t dims[4];
  std::int64_t strides[3];
  int stride_index[3];
  int element_bytes = 1;
};

// Q or K: (head_dim, seq, heads, batch).
TmaOperand rows_operand(const char* name, const TensorView& view, int batch, int heads, int seq,
                        int head_dim) {
  return TmaOperand{name,
                    view.data,
                    {static_cast<std::uint64_t>(head_dim), static_cast<std::uint64_t>(seq),
                     static_cast<std::uint64_t>(heads), static_cast<std::uint64_t>(batch)},
                    {view.strides[2], view.strides[1], view.strides[0]},
                    {2, 1, 0}};
}

// The INT8 V layout: (v_padded_seq, head_dim, heads_kv, batch); rows are channels.
TmaOperand v_operand(const AttentionProblem& problem, const TensorView& view) {
  return TmaOperand{"v",
                    view.data,
                    {static_cast<std::uint64_t>(v_padded_seq(problem.seq_kv)),
                     static_cast<std::uint64_t>(problem.head_dim),
                     static_cast<std::uint64_t>(problem.heads_kv),
                     static_cast<std::uint64_t>(problem.batch)},
                    {view.strides[3], view.strides[1], view.strides[0]},
                    {3, 1, 0}};
}

// Half INT8's V: the caller's 16-bit tensor, (channels, seq_kv, heads_kv, batch): `channels` is
// the kernel's head dim or the caller's smaller one, whose missing channels TMA fills with zeros.
TmaOperand v16_operand(const AttentionProblem& problem, const TensorView& view, int channels) {
  return TmaOperand{"v",
                    view.data,
                    {static_cast<std::uint64_t>(channels),
                     static_cast<std::uint64_t>(problem.seq_kv),
                     static_cast<std::uint64_t>(problem.heads_kv),
                     static_cast<std::uint64_t>(problem.batch)},
                    {view.strides[2] * 2, view.strides[1] * 2, view.strides[0] * 2},
                    {2, 1, 0},
                    2};
}

// The problem as the packed tensors' rows are laid out: packed sequences are one batch of
// total_q query rows and total_kv key rows (VarlenLayout).
AttentionProblem rows_problem(const AttentionProblem& problem, const VarlenLayout& varlen) {
  AttentionProblem rows = problem;
  if (varlen.enabled()) {
    rows.batch = 1;
    rows.seq_q = varlen.total_q;
    rows.seq_kv = varlen.total_kv;
  }
  return rows;
}

// The V operand of the problem's variant: INT8 V keeps one layout per sequence (packed or not),
// 16-bit V is packed like K.
TmaOperand any_v_operand(const AttentionProblem& problem, const TensorView& view,
                         const VarlenLayout& varlen, int channels) {
  return problem.variant == Variant::kFullInt8
             ? v_operand(problem, view)
             : v16_operand(rows_problem(problem, varlen), view, channels);
}
TmaOperand any_v_operand(const AttentionProblem& problem, const TensorView& view,
                         const VarlenLayout& varlen) {
  return any_v_operand(problem, view, varlen, problem.head_dim);
}

std::optional<std::string> incompatibility(const TmaOperand& operand) {
  const std::string field = std::string("tensors.") + operand.name;
  if (!aligned(operand.data)) return field + ".data is not 16-byte aligned";
  for (int i = 0; i < 3; ++i) {
    const std::int64_t stride = operand.strides[i];
    // A dimension of extent 1 is never stepped, so its stride is free.
    const bool usable = operand.dims[i + 1] == 1 ||
                        (stride > 0 && stride % kTmaAlignment == 0 && stride < kMaxTmaStride);
    if (!usable) {
      return field + ".strides[" + std::to_string(operand.stride_index[i]) +
             "] is not a positive multiple of 16 bytes below 2^40";
    }
  }
  return std::nullopt;
}

std::string list(const std::uint64_t* values, int count) {
  std::string text;
  for (int i = 0; i < count; ++i) text += (i ? "," : "") + std::to_string(values[i]);
  return text;
}

// Boxes of (box_inner, box_outer, 1, 1) elements, swizzled by the inner row: 64 or 128 bytes, the
// shared-memory layout wgmma reads (common/wgmma.cuh). `operand` passed incompatibility().
void encode(kernels::TensorMap& out, const TmaOperand& operand, int box_inner, int box_outer) {
  // The stride of a dimension of extent 1 is never used; the dense value keeps the strides
  // ordered as the driver expects.
  std::uint64_t strides[3];
  std::uint64_t dense = operand.dims[0] * static_cast<std::uint64_t>(operand.element_bytes);
  for (int i = 0; i < 3; ++i) {
    strides[i] = operand.dims[i + 1] == 1 ? dense : static_cast<std::uint64_t>(operand.strides[i]);
    dense = strides[i] * operand.dims[i + 1];
  }
  const cuuint32_t box[4] = {static_cast<cuuint32_t>(box_inner),
                             static_cast<cuuint32_t>(box_outer), 1, 1};
  const cuuint32_t element_strides[4] = {1, 1, 1, 1};
  const int row_bytes = box_inner * operand.element_bytes;
  const CUtensorMapSwizzle swizzle =
      row_bytes == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B;
  const CUtensorMapDataType type =
      operand.element_bytes == 1 ? CU_TENSOR_MAP_DATA_TYPE_UINT8 : CU_TENSOR_MAP_DATA_TYPE_UINT16;
  CUtensorMap map;
  const CUresult result = device::driver().cuTensorMapEncodeTiled(
      &map, type, 4, const_cast<void*>(operand.data), operand.dims,
      strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
      CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (result != CUDA_SUCCESS) {
    const std::uint64_t box_dims[4] = {box[0], box[1], 1, 1};
    device::check(result, (std::string("cuTensorMapEncodeTiled (") + operand.name + ": dims " +
                           list(operand.dims, 4) + ", strides " + list(strides, 3) + ", box " +
                           list(box_dims, 4) + ")")
                              .c_str());
  }
  std::memcpy(&out, &map, sizeof map);
}

}  // namespace

std::optional<std::string> tma_incompatibility(const AttentionProblem& problem,
                                               const AttentionTensors& tensors) {
  const AttentionProblem rows = rows_problem(problem, tensors.varlen);
  for (const TmaOperand& operand :
       {rows_operand("q", tensors.q, rows.batch, rows.heads_q, rows.seq_q, rows.head_dim),
        rows_operand("k", tensors.k, rows.batch, rows.heads_kv, rows.seq_kv, rows.head_dim),
        any_v_operand(problem, tensors.v, tensors.varlen)}) {
    if (auto reason = incompatibility(operand)) return reason;
  }
  return std::nullopt;
}

void set_q_input(kernels::WgmmaAttentionParams& params, const TensorView& q,
                 const float* k_channel_mean, float* q_dot_k_mean, const int* rotated_heads) {
  params.q_input.q = q.data;
  params.q_input.strides = byte_strides(q, 2);
  params.q_input.k_channel_mean = k_channel_mean;
  params.q_input.q_dot_k_mean = q_dot_k_mean;
  params.q_input.rotated_heads = rotated_heads;
}

void encode_tensor_maps(kernels::WgmmaAttentionParams& params, const AttentionProblem& problem,
                        const AttentionTensors& tensors, const AttentionSpec& spec) {
  // K rows as slabs of at most 128 bytes by a tile of keys; INT8 V as a tile's tokens
  // (one row of block_n bytes) of every channel; 16-bit V as slabs of 64 channels (128 bytes)
  // by a tile's keys.
  const int slab = kernels::wgmma_slab_bytes(problem.head_dim);
  const AttentionProblem rows = rows_problem(problem, tensors.varlen);
  encode(params.k_map,
         rows_operand("k", tensors.k, rows.batch, rows.heads_kv, rows.seq_kv, rows.head_dim), slab,
         spec.block_n);
  const TmaOperand v =
      any_v_operand(problem, tensors.v, tensors.varlen, params.attention.out_head_dim);
  if (problem.variant == Variant::kFullInt8) {
    encode(params.v_map, v, spec.block_n, problem.head_dim);
  } else {
    encode(params.v_map, v, 64, spec.block_n);
  }
}

}  // namespace intfa::attention
