#include "render/render.hpp"

#include "intfa/errors.hpp"

namespace intfa::render {

std::string element_type_argument(kernels::ElementType type) {
  return "intfa::kernels::ElementType::" + element_type_enumerator(type);
}

std::string bool_argument(bool value) { return value ? "true" : "false"; }

std::string element_type_name(kernels::ElementType type) {
  switch (type) {
    case kernels::ElementType::kF16:
      return "f16";
    case kernels::ElementType::kBF16:
      return "bf16";
    case kernels::ElementType::kF32:
      return "f32";
  }
  throw InternalError("unknown ElementType");
}

std::string element_type_enumerator(kernels::ElementType type) {
  switch (type) {
    case kernels::ElementType::kF16:
      return "kF16";
    case kernels::ElementType::kBF16:
      return "kBF16";
    case kernels::ElementType::kF32:
      return "kF32";
  }
  throw InternalError("unknown ElementType");
}

ConstantsStruct& ConstantsStruct::add(const std::string& type, const std::string& member,
                                      const std::string& value) {
  members_ += "  static constexpr " + type + " " + member + " = " + value + ";\n";
  // The value's last identifier (an enumerator's name without its scope) or number.
  const std::string::size_type scope = value.rfind("::");
  name_ += "_" + (scope == std::string::npos ? value : value.substr(scope + 2));
  return *this;
}

ConstantsStruct& ConstantsStruct::add(const std::string& member, int value) {
  return add("int", member, std::to_string(value));
}

ConstantsStruct& ConstantsStruct::add(const std::string& member, bool value) {
  return add("bool", member, bool_argument(value));
}

ConstantsStruct& ConstantsStruct::add(const std::string& member, kernels::ElementType value) {
  return add("intfa::kernels::ElementType", member, element_type_argument(value));
}

std::string ConstantsStruct::definition() const {
  return "struct " + name_ + " {\n" + members_ + "};\n";
}

RenderedUnit render_unit(const std::string& family, const Instantiation& instantiation,
                         const TemplateSet& templates) {
  RenderedUnit unit;
  unit.file_name = "intfa_" + family + ".cu";
  unit.name_expression = instantiation.kernel;
  // Only what the kernel is: the spec's display text stays out, so that rewording it changes no
  // cache key (the cache entry's metadata and a compile error carry the spec).
  unit.source = "#include \"" + instantiation.header + "\"\n\n" + instantiation.definitions +
                (instantiation.definitions.empty() ? "" : "\n") + "template __global__ void " +
                instantiation.kernel + "(" + instantiation.params_type + ");\n";
  unit.headers = templates.include_closure(instantiation.header);
  return unit;
}

}  // namespace intfa::render
