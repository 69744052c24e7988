// One table per numerics enum (include/intfa/numerics.hpp): every spelling of every value, in one
// place. The name is the one spelling everything writes (the CLI, the Python package, kernel specs
// and their JSON, the tuning database, logs); every surface reads the name, the old name (what
// tuning databases and bundle manifests written before these tables say) and the short name (the
// CLI's abbreviation) alike; the enumerator is what the renderer writes into an instantiation
// unit (templates/common/kernel_enums.h). A new value is one new row here.
#pragma once

#include <cstddef>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>

#include "intfa/numerics.hpp"

namespace intfa {

template <typename Enum>
struct OptionName {
  Enum value;
  const char* name;
  const char* old_name;    // nullptr: none
  const char* short_name;  // nullptr: none
  const char* enumerator;  // of the kernel enum of the same value
};

inline constexpr OptionName<Variant> kVariantNames[] = {
    {Variant::kFullInt8, "full_int8", nullptr, "full", "kFullInt8"},
    {Variant::kHalfInt8, "half_int8", nullptr, "half", "kHalfInt8"},
};
inline constexpr OptionName<PEncoding> kPEncodingNames[] = {
    {PEncoding::kSigned127, "s8", nullptr, nullptr, "kSigned127"},
    {PEncoding::kUnsigned255, "u8", nullptr, nullptr, "kUnsigned255"},
};
// "running_max" and "tile_max": the spec JSON's and the tuning database's spellings until then.
inline constexpr OptionName<PScaleReference> kPScaleNames[] = {
    {PScaleReference::kRunningMax, "running", "running_max", nullptr, "kRunningMax"},
    {PScaleReference::kTileMax, "tile", "tile_max", nullptr, "kTileMax"},
};
inline constexpr OptionName<VScaleGranularity> kVGranularityNames[] = {
    {VScaleGranularity::kPerTensor, "tensor", nullptr, nullptr, "kPerTensor"},
    {VScaleGranularity::kPerChannel, "channel", nullptr, nullptr, "kPerChannel"},
    {VScaleGranularity::kPerBlock, "block", nullptr, nullptr, "kPerBlock"},
};
inline constexpr OptionName<KScaleGranularity> kKGranularityNames[] = {
    {KScaleGranularity::kPerToken, "token", nullptr, nullptr, "kPerToken"},
    {KScaleGranularity::kPerBlock, "block", nullptr, nullptr, "kPerBlock"},
};

// Not a numerics option of the attention kernel (the quantize passes' and the Hopper kernel's Q
// pass's), but spelled the same way everywhere. Spec JSON writes off and on as the booleans it
// always wrote (families/spec_format.hpp).
inline constexpr OptionName<QKRotation> kQKRotationNames[] = {
    {QKRotation::kOff, "off", nullptr, nullptr, "kOff"},
    {QKRotation::kOn, "on", nullptr, nullptr, "kOn"},
    {QKRotation::kAuto, "auto", nullptr, nullptr, "kAuto"},
};

// The table of an enum, and the kernel enum whose enumerators it names.
template <typename Enum>
struct OptionTable;
template <>
struct OptionTable<Variant> {
  static constexpr const auto& rows = kVariantNames;
  static constexpr const char* kernel_enum = "intfa::kernels::AttentionVariant";
};
template <>
struct OptionTable<PEncoding> {
  static constexpr const auto& rows = kPEncodingNames;
  static constexpr const char* kernel_enum = "intfa::kernels::PEncoding";
};
template <>
struct OptionTable<PScaleReference> {
  static constexpr const auto& rows = kPScaleNames;
  static constexpr const char* kernel_enum = "intfa::kernels::PScaleReference";
};
template <>
struct OptionTable<VScaleGranularity> {
  static constexpr const auto& rows = kVGranularityNames;
  static constexpr const char* kernel_enum = "intfa::kernels::VScaleGranularity";
};
template <>
struct OptionTable<KScaleGranularity> {
  static constexpr const auto& rows = kKGranularityNames;
  static constexpr const char* kernel_enum = "intfa::kernels::KScaleGranularity";
};

template <>
struct OptionTable<QKRotation> {
  static constexpr const auto& rows = kQKRotationNames;
  static constexpr const char* kernel_enum = "intfa::kernels::QKRotation";
};

// Row i of a table is value i of its enum (option_row indexes by value).
template <typename Enum>
constexpr bool rows_are_values_in_order() {
  std::size_t index = 0;
  for (const auto& row : OptionTable<Enum>::rows) {
    if (static_cast<std::size_t>(row.value) != index) return false;
    ++index;
  }
  return true;
}
static_assert(rows_are_values_in_order<Variant>() && rows_are_values_in_order<PEncoding>() &&
                  rows_are_values_in_order<PScaleReference>() &&
                  rows_are_values_in_order<VScaleGranularity>() &&
                  rows_are_values_in_order<KScaleGranularity>() &&
                  rows_are_values_in_order<QKRotation>(),
              "a table row per value, in the enums' order");

template <typename Enum>
constexpr const OptionName<Enum>& option_row(Enum value) {
  return OptionTable<Enum>::rows[static_cast<std::size_t>(value)];
}

// The one spelling of `value`.
template <typename Enum>
constexpr const char* option_name(Enum value) {
  return option_row(value).name;
}
// `text` as a value: its name, old name or short name.
template <typename Enum>
std::optional<Enum> parse_option(std::string_view text) {
  auto is = [&](const char* spelling) { return spelling != nullptr && text == spelling; };
  for (const auto& row : OptionTable<Enum>::rows) {
    if (is(row.name) || is(row.old_name) || is(row.short_name)) return row.value;
  }
  return std::nullopt;
}

// The names for a message: "tensor, channel or block" (`last` joins the last two).
template <typename Enum>
std::string option_names_text(const char* last = " or ", const char* quote = "") {
  std::string text;
  const std::size_t count = std::size(OptionTable<Enum>::rows);
  for (std::size_t i = 0; i < count; ++i) {
    if (i > 0) text += i + 1 == count ? last : ", ";
    text += std::string(quote) + OptionTable<Enum>::rows[i].name + quote;
  }
  return text;
}

// "intfa::kernels::PScaleReference::kTileMax": the kernel enumerator of `value`.
template <typename Enum>
std::string option_kernel_argument(Enum value) {
  return std::string(OptionTable<Enum>::kernel_enum) + "::" + option_row(value).enumerator;
}

// How many values `Enum` has (its table's rows).
template <typename Enum>
constexpr std::size_t option_count() {
  return std::size(OptionTable<Enum>::rows);
}

}  // namespace intfa
