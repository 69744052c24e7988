#include "families/any_spec.hpp"

#include "intfa/errors.hpp"

namespace intfa::families {

device::Arch AnySpec::arch() const {
  return std::visit([](const auto& spec) { return spec.arch; }, spec_);
}

std::string AnySpec::to_string() const {
  return std::visit([](const auto& spec) { return spec.to_string(); }, spec_);
}

json::Value AnySpec::to_json() const {
  return std::visit([](const auto& spec) { return spec.to_json(); }, spec_);
}

AnySpec AnySpec::from_json(const json::Value& value) {
  std::string family;
  try {
    family = value.at("family").as_string();
  } catch (const json::TypeError& error) {
    throw InvalidArgument("spec", "(JSON)", error.what());
  }
  if (quantize::names_kernel(family)) return quantize::QuantizeSpec::from_json(value);
  if (attention::names_kernel(family)) return attention::AttentionSpec::from_json(value);
  if (paged::names_kernel(family)) return paged::PagedSpec::from_json(value);
  throw InvalidArgument("spec.family", "'" + family + "'", "unknown value");
}

render::KernelId kernel_id(const AnySpec& spec) {
  return std::visit([](const auto& held) { return kernel_id(held); }, spec.held());
}

render::KernelSource kernel_source(const AnySpec& spec, const render::TemplateSet& templates) {
  return std::visit([&](const auto& held) { return kernel_source(held, templates); }, spec.held());
}

render::RenderedUnit render(const AnySpec& spec, const render::TemplateSet& templates) {
  return kernel_source(spec, templates).unit;
}

}  // namespace intfa::families
