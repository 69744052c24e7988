// Rendering: a family's Instantiation becomes an instantiation unit, the only source text intfa
// generates. The unit #includes the family's template header and explicitly instantiates its
// kernel with the spec's values; kernel bodies are never edited as text. Knows no family: each
// family's host file (src/families/) says what its kernel's instantiation is.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "intfa/numerics.hpp"
#include "render/kernel_source.hpp"
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

// The spec's values as template arguments of an instantiation: "intfa::kernels::ElementType::kF16",
// "true", ...
std::string element_type_argument(kernels::ElementType type);
std::string bool_argument(bool value);
std::string element_type_name(kernels::ElementType type);  // "f16", "bf16", "f32"
// The enumerator's name in kernel_enums.h ("kF16", ...), for instantiation units.
std::string element_type_enumerator(kernels::ElementType type);

// The unit "intfa_<family>.cu": the instantiation's header, its definitions and the explicit
// instantiation of its kernel, with every template the header reaches.
RenderedUnit render_unit(const std::string& family, const Instantiation& instantiation,
                         const TemplateSet& templates);

}  // namespace intfa::render
