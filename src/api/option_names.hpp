// One table per numerics option enum: every spelling of every value, in one place. The name is
// the one spelling everything writes (the CLI, the Python package, kernel specs and their JSON,
// the tuning database, logs); an old name is still read wherever text is read (it is what
// tuning databases and bundle manifests written before these tables say); a short name is the
// CLI's abbreviation, read from the command line only; the enumerator is what the renderer writes into an instantiation unit
// (templates/common/kernel_enums.h). A new value is one new row here.
#pragma once

#include <cstddef>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>

#include "common/kernel_enums.h"
#include "intfa/attention.hpp"

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

// The table of an enum, and the kernel enum whose enumerators it names.
template <typename Enum>
struct OptionTable;
template <>
struct OptionTable<Variant> {
  static constexpr const auto& rows = kVariantNames;
  static constexpr const char* kernel_enum = "intfa::kernels::AttentionVariant";
  using Kernel = kernels::AttentionVariant;
};
template <>
struct OptionTable<PEncoding> {
  static constexpr const auto& rows = kPEncodingNames;
  static constexpr const char* kernel_enum = "intfa::kernels::PEncoding";
  using Kernel = kernels::PEncoding;
};
template <>
struct OptionTable<PScaleReference> {
  static constexpr const auto& rows = kPScaleNames;
  static constexpr const char* kernel_enum = "intfa::kernels::PScaleReference";
  using Kernel = kernels::PScaleReference;
};
template <>
struct OptionTable<VScaleGranularity> {
  static constexpr const auto& rows = kVGranularityNames;
  static constexpr const char* kernel_enum = "intfa::kernels::VScaleGranularity";
  using Kernel = kernels::VScaleGranularity;
};
template <>
struct OptionTable<KScaleGranularity> {
  static constexpr const auto& rows = kKGranularityNames;
  static constexpr const char* kernel_enum = "intfa::kernels::KScaleGranularity";
  using Kernel = kernels::KScaleGranularity;
};

// The public enums and the kernel enums are one list of values: a kernel spec converts between
// them with a cast, so row i of each table must be value i of both.
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
                  rows_are_values_in_order<KScaleGranularity>(),
              "a table row per value, in the enums' order");
static_assert(static_cast<int>(kernels::AttentionVariant::kHalfInt8) ==
                      static_cast<int>(Variant::kHalfInt8) &&
                  static_cast<int>(kernels::PEncoding::kUnsigned255) ==
                      static_cast<int>(PEncoding::kUnsigned255) &&
                  static_cast<int>(kernels::PScaleReference::kTileMax) ==
                      static_cast<int>(PScaleReference::kTileMax) &&
                  static_cast<int>(kernels::VScaleGranularity::kPerBlock) ==
                      static_cast<int>(VScaleGranularity::kPerBlock) &&
                  static_cast<int>(kernels::KScaleGranularity::kPerBlock) ==
                      static_cast<int>(KScaleGranularity::kPerBlock),
              "the kernel enums take the public enums' values");

template <typename Enum>
constexpr const OptionName<Enum>& option_row(Enum value) {
  return OptionTable<Enum>::rows[static_cast<std::size_t>(value)];
}

// The one spelling of `value`.
template <typename Enum>
constexpr const char* option_name(Enum value) {
  return option_row(value).name;
}
// Which spellings a reader takes besides the names.
enum class OptionSpellings { kFiles, kCommandLine };

// `text` as a value: its name or old name, and from the command line its short name too.
template <typename Enum>
std::optional<Enum> parse_option(std::string_view text,
                                 OptionSpellings spellings = OptionSpellings::kFiles) {
  auto is = [&](const char* spelling) { return spelling != nullptr && text == spelling; };
  for (const auto& row : OptionTable<Enum>::rows) {
    if (is(row.name) || is(row.old_name) ||
        (spellings == OptionSpellings::kCommandLine && is(row.short_name))) {
      return row.value;
    }
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

// The kernel enums as the public ones (the same values, checked above).
inline constexpr Variant public_option(kernels::AttentionVariant value) {
  return static_cast<Variant>(value);
}
inline constexpr PEncoding public_option(kernels::PEncoding value) {
  return static_cast<PEncoding>(value);
}
inline constexpr PScaleReference public_option(kernels::PScaleReference value) {
  return static_cast<PScaleReference>(value);
}
inline constexpr VScaleGranularity public_option(kernels::VScaleGranularity value) {
  return static_cast<VScaleGranularity>(value);
}
inline constexpr KScaleGranularity public_option(kernels::KScaleGranularity value) {
  return static_cast<KScaleGranularity>(value);
}

}  // namespace intfa
