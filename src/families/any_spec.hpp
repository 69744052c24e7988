// AnySpec: one kernel of any family, for the code that holds kernels of several families in one
// list (the ahead-of-time lists, `intfa precompile`, the tuner's and bench's compiles, tests that
// compile everything). Each family owns its spec type (quantize::QuantizeSpec,
// attention::AttentionSpec, paged::PagedSpec: fields, equality, text, JSON, id and render beside
// its kernels); AnySpec holds one of them and forwards to it. Reading a spec file dispatches on
// its "family" member to that family's reader.
#pragma once

#include <cstddef>
#include <string>
#include <variant>

#include "common/json.hpp"
#include "device/arch.hpp"
#include "families/attention_family.hpp"
#include "families/paged_family.hpp"
#include "families/quantize_family.hpp"
#include "render/kernel_source.hpp"
#include "render/template_set.hpp"

namespace intfa::families {

class AnySpec {
 public:
  using Held = std::variant<quantize::QuantizeSpec, attention::AttentionSpec, paged::PagedSpec>;

  // A family's spec is an AnySpec (NOLINTs: the conversion is the point).
  AnySpec(const quantize::QuantizeSpec& spec) : spec_(spec) {}    // NOLINT
  AnySpec(const attention::AttentionSpec& spec) : spec_(spec) {}  // NOLINT
  AnySpec(const paged::PagedSpec& spec) : spec_(spec) {}          // NOLINT

  const Held& held() const { return spec_; }
  // The family's spec, or null when this is another family's.
  template <typename Spec>
  const Spec* get_if() const {
    return std::get_if<Spec>(&spec_);
  }

  device::Arch arch() const;
  std::string to_string() const;
  json::Value to_json() const;
  // The reader of the family that `value`'s "family" member names; InvalidArgument naming
  // spec.family for a name no family has, or the family reader's for a bad member.
  static AnySpec from_json(const json::Value& value);

  friend bool operator==(const AnySpec& a, const AnySpec& b) { return a.spec_ == b.spec_; }
  friend bool operator!=(const AnySpec& a, const AnySpec& b) { return !(a == b); }

 private:
  Held spec_;
};

// The family's kernel_id and kernel_source of the spec held (what render::KernelRecipe takes).
render::KernelId kernel_id(const AnySpec& spec);
render::KernelSource kernel_source(
    const AnySpec& spec, const render::TemplateSet& templates = render::TemplateSet::active());
// kernel_source's unit alone.
render::RenderedUnit render(const AnySpec& spec,
                            const render::TemplateSet& templates = render::TemplateSet::active());

// For unordered containers keyed by spec: the hash of its kernel id.
struct AnySpecHash {
  std::size_t operator()(const AnySpec& spec) const noexcept {
    return render::KernelIdHash()(kernel_id(spec));
  }
};

}  // namespace intfa::families
