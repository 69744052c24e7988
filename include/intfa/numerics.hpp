// The attention kernel's numerics: how P and the scales of K and V are quantized, as ONE list of
// options (INTFA_ATTENTION_NUMERICS) from which everything else is derived.
//
// The enums are the kernels' own (templates/common/kernel_enums.h, installed as
// intfa/kernel_enums.h): a value means the same thing in the API, in a kernel spec and in a
// kernel, and no code converts between them. templates/attention/README.md says what each
// option does to the error; bench/RESULTS.md what it costs.
#pragma once

#include <cstddef>
#include <iosfwd>
#include <type_traits>

#include "intfa/kernel_enums.h"

namespace intfa {
namespace kernels {

// A value's name in the option tables ("full_int8", "u8", "channel"), as logs, errors and test
// frameworks print it. Declared with the enums' aliases so that every unit that prints one sees it
// (gtest, finding no printer, would print the enum's bytes, and its inline printers must be one
// definition across units).
std::ostream& operator<<(std::ostream& os, AttentionVariant value);
std::ostream& operator<<(std::ostream& os, PEncoding value);
std::ostream& operator<<(std::ostream& os, PScaleReference value);
std::ostream& operator<<(std::ostream& os, VScaleGranularity value);
std::ostream& operator<<(std::ostream& os, KScaleGranularity value);
std::ostream& operator<<(std::ostream& os, QKRotation value);

}  // namespace kernels

using Variant = kernels::AttentionVariant;  // kFullInt8 (Algorithm 1), kHalfInt8 (16-bit P.V)
using PEncoding = kernels::PEncoding;
using PScaleReference = kernels::PScaleReference;
using VScaleGranularity = kernels::VScaleGranularity;
using KScaleGranularity = kernels::KScaleGranularity;
// Q's and K's rotation before quantizing (AttentionOptions::rotate_qk, QuantizeOptions::rotate):
// kOff, kOn (every head), kAuto (the KV heads whose keys have outlier channels).
using QKRotation = kernels::QKRotation;

// Which variants' kernels read an option. The others' kernels do not depend on it: their specs
// keep it at the enum's first value, and tuning databases do not record it for them.
enum class ReadBy { kFullInt8, kBothVariants };

// Each option records the version of the tuning database's schema that introduced it. The first
// options (1) are named in text and files (spec and tuning-database JSON, spec text, bucket names)
// always; an option added after kernels were cached and tuned is named only when not its default,
// so that those kernels' entries, names and files stay exactly as they were, and a tuning database
// naming it is written as its version, which older builds refuse instead of misreading (they
// would take it for the default). Version 3 is the tuning database's variant rows'
// (src/tune/tuning_database.hpp): the next option takes 4.

// THE list of the attention kernel's numerics options:
//   X(member, Enum, default enumerator, command-line flag, read by, since schema, help)
// Each option is a member of AttentionNumerics; its values and their spellings are its enum's
// table (src/numerics/option_names.hpp). The member's name is the option's name everywhere: the
// JSON member, the Python keyword, the C struct member (include/intfa/intfa.h, checked when the
// library is built), the CLI's `--member-name` (the flag here is its short spelling).
//
//   p_encoding: how P = round(R * exp(S - reference)) is stored for the INT8 P.V product:
//     u8 (R = 255, mma u8 x s8) has half the step of the paper's s8 (R = 127).
//   p_scale: the reference of that exponent: the running row maximum (the paper), or the tile's
//     own maximum, so that every tile uses the full integer range (exp(tile max - m) is applied
//     in FP32 to the tile's partial sum).
//   v_granularity: V's scales per tensor (the paper), per channel, or per block of tokens; must
//     match how V was quantized (quantize_v).
//   k_granularity: K's scales per key (Algorithm 1), or one per 64-key block of a (batch, head),
//     which the softmax folds into each row's exponent multiplier: fewer instructions per score
//     for a coarser K (bench/RESULTS.md, "Per-block K (opt-in)"). 8-bit Q.K, dense batches, key
//     tiles of 32, 64 or 128; must match how K was quantized (QuantizeOptions).
// The defaults are the most accurate combination within 5% of the paper's speed (u8 P against the
// tile max, per-channel V: 1.4% relative L2 on N(0,1), the paper's numerics 2.5-4.6%;
// bench/history/2026-11-23.md, "Choosing the defaults").
#define INTFA_ATTENTION_NUMERICS(X)                                           \
  X(p_encoding, PEncoding, kUnsigned255, "p", kFullInt8, 1,                   \
    "P's encoding (full INT8): u8, R = 255, or s8, R = 127")                  \
  X(p_scale, PScaleReference, kTileMax, "p-scale", kFullInt8, 1,              \
    "P's reference (full INT8): the running row max or the tile's max")       \
  X(v_granularity, VScaleGranularity, kPerChannel, "v-scale", kFullInt8, 1,   \
    "V's scales (full INT8): per tensor, channel or block of tokens")         \
  X(k_granularity, KScaleGranularity, kPerToken, "k-scale", kBothVariants, 2, \
    "K's scales: per key, or per 64-key block (a faster kernel, a coarser K; 8-bit Q.K, dense)")

struct AttentionNumerics {
#define INTFA_NUMERICS_MEMBER(member, Enum, default_value, ...) Enum member = Enum::default_value;
  INTFA_ATTENTION_NUMERICS(INTFA_NUMERICS_MEMBER)
#undef INTFA_NUMERICS_MEMBER

  friend bool operator==(const AttentionNumerics& a, const AttentionNumerics& b) {
#define INTFA_NUMERICS_EQUAL(member, ...) a.member == b.member&&
    return INTFA_ATTENTION_NUMERICS(INTFA_NUMERICS_EQUAL) true;
#undef INTFA_NUMERICS_EQUAL
  }
  friend bool operator!=(const AttentionNumerics& a, const AttentionNumerics& b) {
    return !(a == b);
  }
};

// One option of the list, as for_each_numerics_field hands it over.
template <typename Enum>
struct NumericsField {
  const char* name;  // the member's
  Enum default_value;
  const char* flag;  // the CLI's short flag, without "--"
  ReadBy read_by;
  int since_schema;  // the tuning database's schema version that introduced it
  const char* help;  // one line, for the CLI's usage text

  constexpr bool read_by_variant(Variant variant) const {
    return read_by == ReadBy::kBothVariants || variant == Variant::kFullInt8;
  }
  // Whether `value` is named in text and files: always for the first options, else when it is
  // not the default.
  constexpr bool named(Enum value) const { return since_schema == 1 || value != default_value; }
};

// Calls visit(field, value) for each option in the list's order: `field` is its
// NumericsField<Enum>, `value` the member of `numerics` (const or not).
template <typename Numerics, typename Visitor>
constexpr void for_each_numerics_field(Numerics&& numerics, Visitor&& visit) {
#define INTFA_NUMERICS_VISIT(member, Enum, default_value, flag, read_by, since_schema, help)   \
  visit(NumericsField<Enum>{#member, Enum::default_value, flag, ReadBy::read_by, since_schema, \
                            help},                                                             \
        numerics.member);
  INTFA_ATTENTION_NUMERICS(INTFA_NUMERICS_VISIT)
#undef INTFA_NUMERICS_VISIT
}

// Algorithm 1's numerics: every option at its enum's first value (s8 P against the running max,
// V per tensor, K per token). A kernel spec holds them for the options its kernel does not read.
constexpr AttentionNumerics paper_numerics() {
  AttentionNumerics numerics;
  for_each_numerics_field(numerics, [](const auto&, auto& value) {
    value = typename std::remove_reference<decltype(value)>::type{};
  });
  return numerics;
}

// How many options the list has.
constexpr int numerics_option_count() {
#define INTFA_NUMERICS_COUNT(...) +1
  return 0 INTFA_ATTENTION_NUMERICS(INTFA_NUMERICS_COUNT);
#undef INTFA_NUMERICS_COUNT
}

// The highest since_schema of the list: the tuning database's schema version.
constexpr int numerics_schema_version() {
  int version = 1;
#define INTFA_NUMERICS_SCHEMA(member, Enum, default_value, flag, read_by, since_schema, help) \
  version = version < since_schema ? since_schema : version;
  INTFA_ATTENTION_NUMERICS(INTFA_NUMERICS_SCHEMA)
#undef INTFA_NUMERICS_SCHEMA
  return version;
}

// The numerics a kernel of `variant` reads: the options it does not read at their enum's first
// value, so that equal kernels have equal numerics.
constexpr AttentionNumerics numerics_read_by(Variant variant, AttentionNumerics numerics) {
  for_each_numerics_field(numerics, [variant](const auto& field, auto& value) {
    using Enum = typename std::remove_reference<decltype(value)>::type;
    if (!field.read_by_variant(variant)) value = Enum{};
  });
  return numerics;
}

}  // namespace intfa
