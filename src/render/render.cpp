#include "render/render.hpp"

#include "api/option_names.hpp"
#include "common/strings.hpp"
#include "decode/paged_family.hpp"
#include "intfa/errors.hpp"

namespace intfa::render {
namespace {

std::string element_type_argument(kernels::ElementType type) {
  return "intfa::kernels::ElementType::" + element_type_enumerator(type);
}

std::string bool_argument(bool value) { return value ? "true" : "false"; }

// The numerics options as the kernel enumerators of their tables (api/option_names.hpp).
template <typename KernelEnum>
std::string option_argument(KernelEnum value) {
  return option_kernel_argument(public_option(value));
}

Instantiation quantize_rows(const KernelSpec& spec) {
  // K with one scale per 64-row block: its own kernel (a block reduces over 64 rows).
  if (spec.k_granularity == kernels::KScaleGranularity::kPerBlock) {
    return {"quantize/quantize_rows.cuh",
            "intfa::kernels::quantize_row_blocks<" + std::to_string(spec.head_dim) + ", " +
                element_type_argument(spec.input_type) + ", " + bool_argument(spec.smooth_k) +
                ", " + bool_argument(spec.rotate) + ">",
            "intfa::kernels::QuantizeRowsParams"};
  }
  return {"quantize/quantize_rows.cuh",
          "intfa::kernels::quantize_rows<" + std::to_string(spec.head_dim) + ", " +
              element_type_argument(spec.input_type) + ", " + std::to_string(spec.qk_bits) + ", " +
              bool_argument(spec.smooth_k) + ", " + bool_argument(spec.q_dot_k_mean) + ", " +
              bool_argument(spec.rotate) + ">",
          "intfa::kernels::QuantizeRowsParams"};
}

Instantiation channel_mean(const KernelSpec& spec) {
  return {"quantize/channel_mean.cuh",
          "intfa::kernels::channel_mean<" + std::to_string(spec.head_dim) + ", " +
              element_type_argument(spec.input_type) + ">",
          "intfa::kernels::ChannelMeanParams"};
}

Instantiation quantize_v(const KernelSpec& spec, const char* kernel) {
  return {"quantize/quantize_v.cuh",
          std::string("intfa::kernels::") + kernel + "<" + std::to_string(spec.head_dim) + ", " +
              element_type_argument(spec.input_type) + ", " +
              option_argument(spec.v_granularity) + ">",
          "intfa::kernels::QuantizeVParams"};
}

Instantiation attention(const KernelSpec& spec) {
  std::vector<std::string> arguments = {
      std::to_string(spec.head_dim),           std::to_string(spec.block_m),
      std::to_string(spec.block_n),            std::to_string(spec.warps),
      std::to_string(spec.stages),             option_argument(spec.variant),
      std::to_string(spec.qk_bits),            element_type_argument(spec.input_type),
      element_type_argument(spec.output_type), bool_argument(spec.causal),
      option_argument(spec.p_encoding),    option_argument(spec.p_scale),
      option_argument(spec.v_granularity)};
  // Only varlen and per-block-K kernels name the last parameters (defaults: not varlen, K per
  // token), so that the units and keys of the others stay as they were.
  const bool per_block_k = spec.k_granularity == kernels::KScaleGranularity::kPerBlock;
  if (spec.varlen || per_block_k) arguments.push_back(bool_argument(spec.varlen));
  if (per_block_k) arguments.push_back(option_argument(spec.k_granularity));
  return {"attention/attention_forward.cuh",
          "intfa::kernels::attention_forward<intfa::kernels::AttentionConfig<" +
              strings::join(arguments, ", ") + ">>",
          "intfa::kernels::AttentionParams"};
}

// The Hopper kernel has 8-bit Q.K, full or half INT8, and block_m = 64 per consumer warpgroup
// (warps = 4 per warpgroup, one of them the producer).
Instantiation attention_wgmma(const KernelSpec& spec) {
  std::vector<std::string> arguments = {
      std::to_string(spec.head_dim),           std::to_string(spec.block_n),
      std::to_string(spec.warps / 4 - 1),      std::to_string(spec.stages),
      option_argument(spec.variant),          element_type_argument(spec.input_type),
      element_type_argument(spec.output_type), bool_argument(spec.causal),
      option_argument(spec.p_encoding),    option_argument(spec.p_scale),
      option_argument(spec.v_granularity)};
  // Named only when per block (the default is per token): the other units stay as they were.
  if (spec.k_granularity == kernels::KScaleGranularity::kPerBlock) {
    arguments.push_back(option_argument(spec.k_granularity));
  }
  return {"attention/attention_forward_wgmma.cuh",
          "intfa::kernels::attention_forward_wgmma<intfa::kernels::WgmmaAttentionConfig<" +
              strings::join(arguments, ", ") + ">>",
          "const __grid_constant__ intfa::kernels::WgmmaAttentionParams"};
}

Instantiation instantiation_for(const KernelSpec& spec) {
  switch (spec.family) {
    case KernelFamily::kQuantizeRows: return quantize_rows(spec);
    case KernelFamily::kChannelMean: return channel_mean(spec);
    case KernelFamily::kQuantizeVScale: return quantize_v(spec, "quantize_v_scale");
    case KernelFamily::kQuantizeV: return quantize_v(spec, "quantize_v");
    case KernelFamily::kAttention: return attention(spec);
    case KernelFamily::kAttentionWgmma: return attention_wgmma(spec);
    case KernelFamily::kPagedAppend:
    case KernelFamily::kPagedDecode:
    case KernelFamily::kMergeStates: return paged::instantiation(spec);
  }
  throw InternalError("unknown KernelFamily");
}

}  // namespace

RenderedUnit render(const KernelSpec& spec, const TemplateSet& templates) {
  if (spec.head_dim <= 0) {
    throw InvalidArgument("spec.head_dim", std::to_string(spec.head_dim), "expected > 0");
  }
  const Instantiation instantiation = instantiation_for(spec);
  RenderedUnit unit;
  unit.file_name = "intfa_" + family_name(spec.family) + ".cu";
  unit.name_expression = instantiation.kernel;
  unit.source = "// intfa instantiation unit for: " + spec.to_string() + "\n#include \"" +
                instantiation.header + "\"\n\ntemplate __global__ void " + instantiation.kernel +
                "(" + instantiation.params_type + ");\n";
  unit.headers = templates.include_closure(instantiation.header);
  return unit;
}

}  // namespace intfa::render
