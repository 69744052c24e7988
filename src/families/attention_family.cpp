#include "families/attention_family.hpp"

#include <string>
#include <tuple>
#include <vector>

#include "families/attention_wgmma_family.hpp"
#include "families/spec_format.hpp"
#include "intfa/errors.hpp"
#include "numerics/numerics.hpp"

namespace intfa::attention {
namespace {

using render::bool_argument;
using render::element_type_argument;
namespace format = families::spec_format;

void validate_mma_sync_config(const AttentionSpec& spec) {
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

render::ConstantsStruct numerics_constants(const AttentionSpec& spec) {
  render::ConstantsStruct numerics("intfa_numerics");
  numerics::for_each_kernel_constant(
      spec.numerics, [&](const std::string& type, const std::string& member,
                         const std::string& value) { numerics.add(type, member, value); });
  return numerics;
}

namespace {

// The portable kernel's instantiation.
render::Instantiation portable_instantiation(const AttentionSpec& spec) {
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

// What to_string says after "kernel arch dN" (either kernel).
std::string fields_text(const AttentionSpec& spec) {
  return " m" + std::to_string(spec.block_m) + " n" + std::to_string(spec.block_n) + " w" +
         std::to_string(spec.warps) + " s" + std::to_string(spec.stages) + " " +
         option_name(spec.variant) + " qk" + std::to_string(spec.qk_bits) + " " +
         render::element_type_name(spec.input_type) + "->" +
         render::element_type_name(spec.output_type) + (spec.causal ? " causal" : "") +
         (spec.varlen ? " varlen" : "") + numerics::text(spec.numerics, spec.variant) +
         (spec.quantizes_q
              ? std::string(" q=in_kernel") + (spec.q_dot_k_mean ? "+q_dot_k_mean" : "") +
                    (spec.rotate == QKRotation::kOn     ? "+rotate"
                     : spec.rotate == QKRotation::kAuto ? "+rotate=auto"
                                                        : "")
              : std::string());
}

}  // namespace

std::string kernel_name(KernelPath path) {
  return path == KernelPath::kWgmma ? "attention_wgmma" : "attention";
}

bool names_kernel(const std::string& family) {
  return family == kernel_name(KernelPath::kMmaSync) || family == kernel_name(KernelPath::kWgmma);
}

bool operator==(const AttentionSpec& a, const AttentionSpec& b) {
  auto fields = [](const AttentionSpec& s) {
    return std::tie(s.path, s.arch, s.head_dim, s.block_m, s.block_n, s.warps, s.stages, s.qk_bits,
                    s.variant, s.input_type, s.output_type, s.causal, s.varlen, s.numerics,
                    s.quantizes_q, s.q_dot_k_mean, s.rotate);
  };
  return fields(a) == fields(b);
}

std::string AttentionSpec::to_string() const {
  return format::text_heading(kernel_name(path), arch, head_dim) + fields_text(*this);
}

json::Value AttentionSpec::to_json() const {
  json::Value object = format::object_for(kernel_name(path), arch, head_dim);
  object.set("block_m", block_m);
  object.set("block_n", block_n);
  object.set("warps", warps);
  object.set("stages", stages);
  object.set("qk_bits", qk_bits);
  object.set("variant", option_name(variant));
  object.set("input_type", render::element_type_name(input_type));
  object.set("output_type", render::element_type_name(output_type));
  object.set("causal", causal);
  numerics::write_json(object, numerics);
  object.set("smooth_k", false);  // the quantize kernels' (spec_format.hpp's one member list)
  object.set("varlen", varlen);
  object.set("q_dot_k_mean", q_dot_k_mean);
  object.set("rotate", format::rotation_json(rotate));
  object.set("quantizes_q", quantizes_q);
  return object;
}

AttentionSpec AttentionSpec::from_json(const json::Value& value) {
  return format::read([&] {
    AttentionSpec spec;
    const KernelPath paths[] = {KernelPath::kMmaSync, KernelPath::kWgmma};
    spec.path = format::kernel_member(value, kernel_name, paths);
    spec.arch = format::arch_member(value);
    spec.head_dim = format::int_member(value, "head_dim");
    spec.block_m = format::int_member(value, "block_m");
    spec.block_n = format::int_member(value, "block_n");
    spec.warps = format::int_member(value, "warps");
    spec.stages = format::int_member(value, "stages");
    spec.qk_bits = format::int_member(value, "qk_bits");
    spec.variant = format::option_member<Variant>(value, "variant");
    spec.input_type = format::element_type_member(value, "input_type");
    spec.output_type = format::element_type_member(value, "output_type");
    spec.causal = value.at("causal").as_bool();
    // Every option (absent: the spec's own, Algorithm 1's; files of builds before per-block K
    // lack k_granularity, which was per token).
    spec.numerics = numerics::read_json<InvalidArgument>(value, "spec.", paper_numerics());
    // Absent in the files of builds before varlen, K smoothing's LSE term and the Hopper
    // kernel's own Q pass existed: dense, INT8 Q.
    spec.varlen = format::optional_bool_member(value, "varlen");
    spec.q_dot_k_mean = format::optional_bool_member(value, "q_dot_k_mean");
    spec.quantizes_q = format::optional_bool_member(value, "quantizes_q");
    spec.rotate = format::rotation_member(value);
    return spec;
  });
}

render::KernelId kernel_id(const AttentionSpec& s) {
  using format::small_bit;
  // The kernel tags 6 and 7 (spec_format.hpp): after the quantize kernels' 0-5.
  const unsigned tag = s.path == KernelPath::kWgmma ? 7 : 6;
  const std::uint64_t small =
      small_bit(tag, format::kKernelTag) | small_bit(static_cast<unsigned>(s.arch), format::kArch) |
      small_bit(static_cast<unsigned>(s.variant), format::kVariant) |
      small_bit(static_cast<unsigned>(s.input_type), format::kInputType) |
      small_bit(static_cast<unsigned>(s.output_type), format::kOutputType) |
      small_bit(s.causal, format::kCausal) | small_bit(s.varlen, format::kVarlen) |
      small_bit(s.q_dot_k_mean, format::kQDotKMean) | format::rotation_bits(s.rotate) |
      small_bit(s.quantizes_q, format::kQuantizesQ);
  return render::KernelId{{small, format::two_fields(s.head_dim, s.block_m),
                           format::two_fields(s.block_n, s.warps),
                           format::two_fields(s.stages, s.qk_bits), numerics::code(s.numerics)}};
}

render::KernelSource kernel_source(const AttentionSpec& spec,
                                   const render::TemplateSet& templates) {
  return format::source(
      kernel_name(spec.path), spec.arch, spec.head_dim,
      [&] {
        return spec.path == KernelPath::kWgmma ? wgmma_instantiation(spec)
                                               : portable_instantiation(spec);
      },
      templates, spec.to_string(), spec.to_json());
}

int shared_bytes(const AttentionSpec& spec) {
  if (spec.path == KernelPath::kWgmma) return wgmma_shared_bytes(spec);
  return kernels::attention_shared_bytes(
      spec.head_dim, spec.block_m, spec.block_n, spec.stages, spec.qk_bits,
      spec.variant == Variant::kFullInt8,
      spec.variant == Variant::kFullInt8 &&
          spec.numerics.v_granularity == VScaleGranularity::kPerBlock);
}

void validate_config(const AttentionSpec& spec, int max_shared_bytes) {
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
  if (spec.path == KernelPath::kWgmma) {
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

launch::LaunchShape launch_shape(const AttentionProblem& problem, const AttentionSpec& spec) {
  launch::LaunchShape shape;
  shape.grid[0] = static_cast<unsigned>((problem.seq_q + spec.block_m - 1) / spec.block_m);
  shape.grid[1] = static_cast<unsigned>(problem.heads_q);
  shape.grid[2] = static_cast<unsigned>(problem.batch);
  shape.block[0] = static_cast<unsigned>(spec.warps * 32);
  shape.dynamic_shared_bytes = static_cast<unsigned>(shared_bytes(spec));
  return shape;
}

}  // namespace intfa::attention
