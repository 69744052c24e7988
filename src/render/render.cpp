#include "render/render.hpp"

#include "intfa/errors.hpp"

namespace intfa::render {

std::string element_type_argument(kernels::ElementType type) {
  return "intfa::kernels::ElementType::" + element_type_enumerator(type);
}

std::string bool_argument(bool value) { return value ? "true" : "false"; }

RenderedUnit render(const KernelSpec& spec, const TemplateSet& templates) {
  if (spec.head_dim <= 0) {
    throw InvalidArgument("spec.head_dim", std::to_string(spec.head_dim), "expected > 0");
  }
  const Instantiation instantiation = instantiation_for(spec);
  RenderedUnit unit;
  unit.file_name = "intfa_" + family_name(spec.family) + ".cu";
  unit.name_expression = instantiation.kernel;
  // Only what the kernel is: the spec's display text stays out, so that rewording it changes no
  // cache key (the cache entry's metadata and a compile error carry the spec).
  unit.source = "#include \"" + instantiation.header + "\"\n\ntemplate __global__ void " +
                instantiation.kernel + "(" + instantiation.params_type + ");\n";
  unit.headers = templates.include_closure(instantiation.header);
  return unit;
}

}  // namespace intfa::render
