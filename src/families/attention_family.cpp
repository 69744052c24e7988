#include "families/attention_family.hpp"

#include <string>
#include <vector>

#include "families/attention_wgmma_family.hpp"
#include "intfa/errors.hpp"
#include "numerics/numerics.hpp"

namespace intfa::attention {
namespace {

using render::bool_argument;
using render::element_type_argument;

void validate_mma_sync_config(const families::KernelSpec& spec) {
  if (spec.quantizes_q) {
    throw InvalidArgument("spec.quantizes_q", "true",
                          "only the Hopper kernel (config.path = wgmma) quantizes Q itself");
  }
  if (spec.qk_bits != 8 && spec.qk_bits != 4) {
    throw InvalidArgument("problem.qk_bits", std::to_string(spec.qk_bits), "expected 8 or 4");
  }
  if (spec.warps != 2 && spec.warps != 4 && spec.warps != 8) {
    throw InvalidArgument("config.warps", std::to_string(spec.warps), "expected 2, 4 or 8");
  }
  if (spec.block_m != 16 * spec.warps && spec.block_m != 32 * spec.warps) {
    throw InvalidArgument("config.block_m", std::to_string(spec.block_m),
                          "expected 16 or 32 rows per warp (16 * warps or 32 * warps)");
  }
  if (spec.block_n != 32 && spec.block_n != 64 && spec.block_n != 128) {
    throw InvalidArgument("config.block_n", std::to_string(spec.block_n),
                          "expected 32, 64 or 128");
  }
}

}  // namespace

kernels::Strides byte_strides(const TensorView& view, int element_bytes) {
  return kernels::Strides{view.strides[0] * element_bytes, view.strides[1] * element_bytes,
                          view.strides[2] * element_bytes};
}

render::ConstantsStruct numerics_constants(const families::KernelSpec& spec) {
  render::ConstantsStruct numerics("intfa_numerics");
  numerics::for_each_kernel_constant(
      spec.numerics, [&](const std::string& type, const std::string& member,
                         const std::string& value) { numerics.add(type, member, value); });
  return numerics;
}

render::Instantiation portable_instantiation(const families::KernelSpec& spec) {
  render::ConstantsStruct fields("intfa_spec");
  fields.add("head_dim", spec.head_dim)
      .add("block_m", spec.block_m)
      .add("block_n", spec.block_n)
      .add("warps", spec.warps)
      .add("stages", spec.stages)
      .add("intfa::kernels::AttentionVariant", "variant", option_kernel_argument(spec.variant))
      .add("qk_bits", spec.qk_bits)
      .add("input_type", spec.input_type)
      .add("output_type", spec.output_type)
      .add("causal", spec.causal)
      .add("varlen", spec.varlen);
  const render::ConstantsStruct numerics = numerics_constants(spec);
  return {"attention/attention_forward.cuh",
          "intfa::kernels::attention_forward<intfa::kernels::AttentionConfig<" + fields.name() +
              ", " + numerics.name() + ">>",
          "intfa::kernels::AttentionParams", fields.definition() + numerics.definition()};
}

std::string fields_text(const families::KernelSpec& spec) {
  return " m" + std::to_string(spec.block_m) + " n" + std::to_string(spec.block_n) + " w" +
         std::to_string(spec.warps) + " s" + std::to_string(spec.stages) + " " +
         option_name(spec.variant) + " qk" + std::to_string(spec.qk_bits) + " " +
         render::element_type_name(spec.input_type) + "->" +
         render::element_type_name(spec.output_type) + (spec.causal ? " causal" : "") +
         (spec.varlen ? " varlen" : "") + numerics::text(spec.numerics, spec.variant) +
         (spec.quantizes_q
              ? std::string(" q=in_kernel") + (spec.q_dot_k_mean ? "+q_dot_k_mean" : "") +
                    (spec.rotate ? "+rotate" : "")
              : std::string());
}

int shared_bytes(const families::KernelSpec& spec) {
  if (spec.family == families::KernelFamily::kAttentionWgmma) return wgmma_shared_bytes(spec);
  return kernels::attention_shared_bytes(
      spec.head_dim, spec.block_m, spec.block_n, spec.stages, spec.qk_bits,
      spec.variant == Variant::kFullInt8,
      spec.variant == Variant::kFullInt8 &&
          spec.numerics.v_granularity == VScaleGranularity::kPerBlock);
}

void validate_config(const families::KernelSpec& spec, int max_shared_bytes) {
  if (spec.head_dim != 64 && spec.head_dim != 128 && spec.head_dim != 256) {
    throw InvalidArgument("problem.head_dim", std::to_string(spec.head_dim),
                          "supported head dims are 64, 128 and 256");
  }
  if (spec.numerics.k_granularity == KScaleGranularity::kPerBlock) {
    if (spec.qk_bits != 8) {
      throw InvalidArgument("options.k_granularity", "block",
                            "per-block K scales need 8-bit Q.K (problem.qk_bits is " +
                                std::to_string(spec.qk_bits) + ")");
    }
    if (spec.varlen) {
      throw InvalidArgument("options.k_granularity", "block",
                            "per-block K scales are for dense batches, not packed sequences");
    }
  }
  if (spec.family == families::KernelFamily::kAttentionWgmma) {
    validate_wgmma_config(spec);
  } else {
    validate_mma_sync_config(spec);
  }
  if (spec.stages < 2 || spec.stages > 4) {
    throw InvalidArgument("config.stages", std::to_string(spec.stages), "expected 2 to 4");
  }
  const int needed = shared_bytes(spec);
  if (needed > max_shared_bytes) {
    // (The spec's text only here: every launch checks its config, and building it cost a
    // tenth of attention_forward's host time.)
    throw Unsupported("config (" + spec.to_string() + ") needs " + std::to_string(needed) +
                      " bytes of shared memory per block; the device allows " +
                      std::to_string(max_shared_bytes));
  }
}

kernels::AttentionParams make_params(const AttentionProblem& problem,
                                     const AttentionTensors& tensors, double softmax_scale) {
  kernels::AttentionParams params{};
  params.q = tensors.q.data;
  params.k = tensors.k.data;
  params.v = tensors.v.data;
  params.q_scale = tensors.q_scale;
  params.k_scale = tensors.k_scale;
  params.v_scale = tensors.v_scale;
  params.out = tensors.out.data;
  params.lse = tensors.lse;
  params.q_dot_k_mean = tensors.q_dot_k_mean;
  params.q_strides = byte_strides(tensors.q, 1);
  params.k_strides = byte_strides(tensors.k, 1);
  if (problem.variant == Variant::kFullInt8) {
    // Rows of the INT8 V layout are channels (dimension 3); tokens are contiguous.
    params.v_strides = kernels::Strides{tensors.v.strides[0], tensors.v.strides[1],
                                        tensors.v.strides[3]};
  } else {
    params.v_strides = byte_strides(tensors.v, 2);
  }
  params.out_strides = byte_strides(tensors.out, 2);
  params.batch = problem.batch;
  params.heads_q = problem.heads_q;
  params.heads_kv = problem.heads_kv;
  params.seq_q = problem.seq_q;
  params.seq_kv = problem.seq_kv;
  params.v_padded_seq = v_padded_seq(problem.seq_kv);
  params.out_head_dim = problem.head_dim;
  params.scale_log2 = static_cast<float>(softmax_scale * 1.4426950408889634);
  if (tensors.varlen.enabled()) {
    // Packed tensors are one batch: the kernel finds each sequence's rows from the offsets.
    params.q_strides.batch = params.k_strides.batch = params.out_strides.batch = 0;
    if (problem.variant != Variant::kFullInt8) params.v_strides.batch = 0;
    params.cu_seqlens_q = tensors.varlen.cu_seqlens_q;
    params.cu_seqlens_kv = tensors.varlen.cu_seqlens_kv;
    params.total_q = tensors.varlen.total_q;
    params.total_kv = tensors.varlen.total_kv;
  }
  return params;
}

launch::LaunchShape launch_shape(const AttentionProblem& problem,
                                 const families::KernelSpec& spec) {
  launch::LaunchShape shape;
  shape.grid[0] = static_cast<unsigned>((problem.seq_q + spec.block_m - 1) / spec.block_m);
  shape.grid[1] = static_cast<unsigned>(problem.heads_q);
  shape.grid[2] = static_cast<unsigned>(problem.batch);
  shape.block[0] = static_cast<unsigned>(spec.warps * 32);
  shape.dynamic_shared_bytes = static_cast<unsigned>(shared_bytes(spec));
  return shape;
}

}  // namespace intfa::attention
