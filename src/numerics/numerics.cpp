#include "numerics/numerics.hpp"

#include <ostream>

namespace intfa::numerics {

static_assert(numerics_option_count() <= 8, "code() packs 8 bits per option into 64");

std::uint64_t code(const AttentionNumerics& numerics) {
  std::uint64_t result = 0;
  int shift = 0;
  for_each_numerics_field(numerics, [&](const auto&, const auto& value) {
    result |= static_cast<std::uint64_t>(static_cast<unsigned>(value) & 0xffu) << shift;
    shift += 8;
  });
  return result;
}

std::string text(const AttentionNumerics& numerics, Variant variant) {
  std::string result;
  for_each_numerics_field(numerics, [&](const auto& field, const auto& value) {
    if (field.read_by_variant(variant) && field.named(value)) {
      result += std::string(" ") + field.flag + "=" + option_name(value);
    }
  });
  return result;
}

void write_json(json::Value& object, const AttentionNumerics& numerics, Variant variant) {
  for_each_numerics_field(numerics, [&](const auto& field, const auto& value) {
    if (field.read_by_variant(variant) && field.named(value)) {
      object.set(field.name, option_name(value));
    }
  });
}

void write_json(json::Value& object, const AttentionNumerics& numerics) {
  for_each_numerics_field(numerics, [&](const auto& field, const auto& value) {
    object.set(field.name, option_name(value));
  });
}

int schema_version(const AttentionNumerics& numerics, Variant variant) {
  int version = 1;
  for_each_numerics_field(numerics, [&](const auto& field, const auto& value) {
    if (field.read_by_variant(variant) && field.named(value) && field.since_schema > version) {
      version = field.since_schema;
    }
  });
  return version;
}

}  // namespace intfa::numerics

namespace intfa::kernels {

std::ostream& operator<<(std::ostream& os, AttentionVariant value) { return os << option_name(value); }
std::ostream& operator<<(std::ostream& os, PEncoding value) { return os << option_name(value); }
std::ostream& operator<<(std::ostream& os, PScaleReference value) { return os << option_name(value); }
std::ostream& operator<<(std::ostream& os, VScaleGranularity value) { return os << option_name(value); }
std::ostream& operator<<(std::ostream& os, KScaleGranularity value) { return os << option_name(value); }
std::ostream& operator<<(std::ostream& os, QKRotation value) {
  return os << option_name(value);
}

}  // namespace intfa::kernels
