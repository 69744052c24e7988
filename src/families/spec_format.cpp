#include "families/spec_format.hpp"

namespace intfa::families::spec_format {

std::string text_heading(const std::string& family, device::Arch arch, int head_dim) {
  return family + " " + device::arch_name(arch) + " d" + std::to_string(head_dim);
}

json::Value object_for(const std::string& family, device::Arch arch, int head_dim) {
  json::Value object = json::Value::object();
  object.set("family", family);
  object.set("arch", device::arch_name(arch));
  object.set("head_dim", head_dim);
  return object;
}

device::Arch arch_member(const json::Value& object) {
  const std::string arch = object.at("arch").as_string();
  const auto parsed = device::parse_arch(arch);
  if (!parsed) throw InvalidArgument("spec.arch", "'" + arch + "'", "unknown arch");
  return *parsed;
}

int int_member(const json::Value& object, const char* member) {
  const std::int64_t number = object.at(member).as_int();
  if (number < 0 || number > 1 << 20) {
    throw InvalidArgument(std::string("spec.") + member, std::to_string(number), "out of range");
  }
  return static_cast<int>(number);
}

kernels::ElementType element_type_member(const json::Value& object, const char* member) {
  const std::string text = object.at(member).as_string();
  for (kernels::ElementType type :
       {kernels::ElementType::kF16, kernels::ElementType::kBF16, kernels::ElementType::kF32}) {
    if (render::element_type_name(type) == text) return type;
  }
  throw InvalidArgument(std::string("spec.") + member, "'" + text + "'", "unknown value");
}

bool optional_bool_member(const json::Value& object, const char* member) {
  const json::Value* found = object.find(member);
  return found != nullptr && found->as_bool();
}

json::Value rotation_json(QKRotation rotation) {
  if (rotation == QKRotation::kAuto) return json::Value(std::string(option_name(rotation)));
  return json::Value(rotation == QKRotation::kOn);
}

QKRotation rotation_member(const json::Value& object) {
  const json::Value* found = object.find("rotate");
  if (found == nullptr) return QKRotation::kOff;
  if (found->is_bool()) return found->as_bool() ? QKRotation::kOn : QKRotation::kOff;
  const std::string text = found->as_string();
  if (const auto value = parse_option<QKRotation>(text)) return *value;
  throw InvalidArgument("spec.rotate", "'" + text + "'", "expected false, true or \"auto\"");
}

}  // namespace intfa::families::spec_format
