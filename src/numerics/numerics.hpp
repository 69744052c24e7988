// What is derived from the list of numerics options (include/intfa/numerics.hpp): text, JSON and
// hashing of an AttentionNumerics, written once here for every option; the CLI, the Python module
// and the C API derive their flags, keywords and conversions from the same list. The bottom layer:
// it knows options, not kernels.
#pragma once

#include <cstdint>
#include <string>

#include "common/json.hpp"
#include "common/json_members.hpp"
#include "intfa/numerics.hpp"
#include "numerics/option_names.hpp"

namespace intfa::numerics {

// Every option's value in one integer (8 bits each, in list order): for hashing.
std::uint64_t code(const AttentionNumerics& numerics);
// (code has room for 8 options of up to 256 values.)

// The options a `variant` kernel reads that are named (NumericsField::named), as " flag=name" each,
// in list order: " p=u8 p-scale=tile v-scale=channel" (+ " k-scale=block" when per block).
std::string text(const AttentionNumerics& numerics, Variant variant);

// Sets the members of `object` for the options a `variant` kernel reads that are named; without a
// variant, for every option.
void write_json(json::Value& object, const AttentionNumerics& numerics, Variant variant);
void write_json(json::Value& object, const AttentionNumerics& numerics);

// The tuning database's schema version a `variant` entry needs: the highest since_schema of the
// options write_json names for it.
int schema_version(const AttentionNumerics& numerics, Variant variant);

// Calls add(type, member, value) per option, in list order, as C++ text: the kernel enum
// ("intfa::kernels::PEncoding"), the member's name and its enumerator: the members of the Numerics
// type the attention kernels take (templates/attention/attention_config.cuh).
template <typename Add>
void for_each_kernel_constant(const AttentionNumerics& numerics, Add&& add) {
  for_each_numerics_field(numerics, [&](const auto& field, const auto& value) {
    using Enum = std::decay_t<decltype(value)>;
    add(std::string(OptionTable<Enum>::kernel_enum), std::string(field.name),
        option_kernel_argument(value));
  });
}

// The options of `object`'s members, a member absent keeping its value in `numerics` (the
// defaults unless the file's writer has others: a kernel spec's are paper_numerics); a value no
// table spells
// throws `Error(prefix + member, <the value as JSON>, "expected one of a, b, c")` (InvalidArgument
// or a class derived from it taking the same arguments).
template <typename Error>
AttentionNumerics read_json(const json::Value& object, const std::string& prefix,
                            AttentionNumerics numerics = AttentionNumerics{}) {
  for_each_numerics_field(numerics, [&](const auto& field, auto& value) {
    using Enum = std::remove_reference_t<decltype(value)>;
    const json::Value* member = object.find(field.name);
    if (member == nullptr) return;
    const auto parsed =
        member->is_string() ? parse_option<Enum>(member->as_string()) : std::nullopt;
    if (!parsed) {
      throw Error(prefix + field.name, json::MemberReader::shown(*member),
                  "expected one of " + option_names_text<Enum>(", "));
    }
    value = *parsed;
  });
  return numerics;
}

}  // namespace intfa::numerics
