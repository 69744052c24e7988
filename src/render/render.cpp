#include "render/render.hpp"

#include "api/option_names.hpp"
#include "common/strings.hpp"
#include "decode/paged_family.hpp"
#include "families/attention_family.hpp"
#include "families/attention_wgmma_family.hpp"
#include "families/quantize_family.hpp"
#include "intfa/errors.hpp"

namespace intfa::render {

std::string element_type_argument(kernels::ElementType type) {
  return "intfa::kernels::ElementType::" + element_type_enumerator(type);
}

std::string bool_argument(bool value) { return value ? "true" : "false"; }

namespace {

Instantiation instantiation_for(const KernelSpec& spec) {
  switch (spec.family) {
    case KernelFamily::kQuantizeRows: return quantize::rows_instantiation(spec);
    case KernelFamily::kChannelMean: return quantize::channel_mean_instantiation(spec);
    case KernelFamily::kQuantizeVScale: return quantize::v_scale_instantiation(spec);
    case KernelFamily::kQuantizeV: return quantize::v_instantiation(spec);
    case KernelFamily::kAttention: return attention::portable_instantiation(spec);
    case KernelFamily::kAttentionWgmma: return attention::wgmma_instantiation(spec);
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
