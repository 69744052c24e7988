#include "render/render.hpp"

#include "api/option_names.hpp"
#include "common/strings.hpp"
#include "decode/paged_family.hpp"
#include "families/quantize_family.hpp"
#include "intfa/errors.hpp"

namespace intfa::render {

std::string element_type_argument(kernels::ElementType type) {
  return "intfa::kernels::ElementType::" + element_type_enumerator(type);
}

std::string bool_argument(bool value) { return value ? "true" : "false"; }

namespace {

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
    case KernelFamily::kQuantizeRows: return quantize::rows_instantiation(spec);
    case KernelFamily::kChannelMean: return quantize::channel_mean_instantiation(spec);
    case KernelFamily::kQuantizeVScale: return quantize::v_scale_instantiation(spec);
    case KernelFamily::kQuantizeV: return quantize::v_instantiation(spec);
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
