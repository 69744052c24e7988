// Rendering: a KernelSpec becomes an instantiation unit, the only source text intfa generates.
// The unit #includes the family's template header and explicitly instantiates its kernel with the
// spec's values; kernel bodies are never edited as text.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "render/kernel_source.hpp"
#include "render/kernel_spec.hpp"
#include "render/template_set.hpp"

namespace intfa::render {

// Where a family's kernel lives and how it is named with the spec's values: what each family's
// host file gives the renderer (src/families/*_family.hpp, src/families/paged_family.hpp).
struct Instantiation {
  std::string header;
  std::string kernel;  // fully qualified template-id
  std::string params_type;
  // Definitions written between the include and the instantiation: the types of named constants
  // a kernel takes as template arguments (ConstantsStruct).
  std::string definitions = {};
};

// A struct of named constants, a kernel's template argument in an instantiation unit:
//   struct <prefix>_<value>_<value>... {
//     static constexpr <type> <member> = <value>;
//   };
// Its name carries the values (so that a profiler's kernel names tell kernels apart); the kernel
// reads the members by name.
class ConstantsStruct {
 public:
  explicit ConstantsStruct(std::string prefix) : name_(std::move(prefix)) {}
  ConstantsStruct& add(const std::string& type, const std::string& member,
                       const std::string& value);
  ConstantsStruct& add(const std::string& member, int value);
  ConstantsStruct& add(const std::string& member, bool value);
  ConstantsStruct& add(const std::string& member, kernels::ElementType value);
  const std::string& name() const { return name_; }
  std::string definition() const;

 private:
  std::string name_;
  std::string members_;
};

// The instantiation of `spec` by its family's host file: the JIT core's one question to the
// kernel families. Defined by src/families/kernel_families.cpp, the one switch over KernelFamily,
// so that render/ includes no family's header. Throws InternalError for an unknown family.
Instantiation instantiation_for(const KernelSpec& spec);

// The spec's values as template arguments of an instantiation: "intfa::kernels::ElementType::kF16",
// "true", ...
std::string element_type_argument(kernels::ElementType type);
std::string bool_argument(bool value);
// Throws InvalidArgument when the spec's family cannot be rendered with its fields (validation of
// sizes against a device lives with each family's host code, before rendering).
RenderedUnit render(const KernelSpec& spec, const TemplateSet& templates = TemplateSet::active());

}  // namespace intfa::render
