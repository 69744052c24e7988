// What every family's spec type shares without being one type: the JSON conventions of a spec
// file (one member list, read and checked alike by each family's reader), the packing of a
// render::KernelId, and the render step that turns a family's instantiation into the JIT core's
// KernelSource. Each family's spec (quantize::QuantizeSpec, attention::AttentionSpec,
// paged::PagedSpec; families/any_spec.hpp holds one of them) uses these beside its own fields.
#pragma once

#include <cstdint>
#include <string>

#include "common/json.hpp"
#include "device/arch.hpp"
#include "intfa/errors.hpp"
#include "intfa/numerics.hpp"
#include "numerics/option_names.hpp"
#include "render/kernel_source.hpp"
#include "render/render.hpp"
#include "render/template_set.hpp"

namespace intfa::families::spec_format {

// A spec's JSON has one list of members for every family, in this order: "family", "arch",
// "head_dim", "block_m", "block_n", "warps", "stages", "qk_bits", "variant", "input_type",
// "output_type", "causal", the numerics (numerics::write_json), "smooth_k", "varlen",
// "q_dot_k_mean", "rotate", "quantizes_q". A family writes each of them, those it has no field
// for at the value its specs have always written, so that cache sidecars and bundle manifests
// stay byte-identical to those written while one struct held every family's fields; its reader
// reads the members it has.

// What a family's to_string starts from: "family arch dN" (the family's fields follow).
std::string text_heading(const std::string& family, device::Arch arch, int head_dim);

// The JSON object a family's to_json starts from: "family" (the kernel's name), "arch",
// "head_dim".
json::Value object_for(const std::string& family, device::Arch arch, int head_dim);

// Readers of one member of `object`; each throws InvalidArgument naming "spec.<member>".
device::Arch arch_member(const json::Value& object);
int int_member(const json::Value& object, const char* member);  // 0 .. 2^20
kernels::ElementType element_type_member(const json::Value& object, const char* member);
// Members added by later builds: absent reads as false.
bool optional_bool_member(const json::Value& object, const char* member);

// "rotate", the rotation of Q's and K's rows: false (off) and true (on) as every build wrote
// them, "auto" for QKRotation::kAuto; absent reads as off.
json::Value rotation_json(QKRotation rotation);
QKRotation rotation_member(const json::Value& object);

// An option of the spec JSON by its table (numerics/option_names.hpp: names and aliases).
template <typename Enum>
Enum option_member(const json::Value& object, const char* member) {
  const std::string text = object.at(member).as_string();
  if (const auto value = parse_option<Enum>(text)) return *value;
  throw InvalidArgument(std::string("spec.") + member, "'" + text + "'",
                        "expected " + option_names_text<Enum>());
}

// A family's kernel from the "family" member: the value of `kernels` whose `name` it is, or
// InvalidArgument naming spec.family.
template <typename Kernel, std::size_t N>
Kernel kernel_member(const json::Value& object, std::string (*name)(Kernel),
                     const Kernel (&kernels)[N]) {
  const std::string text = object.at("family").as_string();
  for (Kernel kernel : kernels) {
    if (name(kernel) == text) return kernel;
  }
  throw InvalidArgument("spec.family", "'" + text + "'", "unknown value");
}

// Runs `read` (a family's reader), turning a JSON type error into InvalidArgument naming the spec.
template <typename Read>
auto read(Read&& read_members) {
  try {
    return read_members();
  } catch (const json::TypeError& error) {
    throw InvalidArgument("spec", "(JSON)", error.what());
  }
}

// The packing of a render::KernelId, one layout for every family: word 0 holds the kernel's tag
// (each family numbers its kernels apart from the others': quantize 0-5, attention 6-7, paged
// 8-10) in its low byte and the small fields by `small_bit`; words 1-3 two 32-bit fields each;
// word 4 the numerics code.
constexpr std::uint64_t small_bit(unsigned value, int shift) {
  return static_cast<std::uint64_t>(value) << shift;
}
constexpr std::uint64_t two_fields(int low, int high) {
  return static_cast<std::uint64_t>(static_cast<std::uint32_t>(low)) |
         static_cast<std::uint64_t>(static_cast<std::uint32_t>(high)) << 32;
}
// Shifts of word 0's small fields (a family leaves those it has not at zero).
enum SmallField : int {
  kKernelTag = 0,
  kArch = 8,
  kVariant = 16,
  kInputType = 24,
  kOutputType = 32,
  kCausal = 40,
  kSmoothK = 41,
  kVarlen = 42,
  kQDotKMean = 43,
  kRotate = 44,
  kQuantizesQ = 45,
  kRotateAuto = 46,  // QKRotation::kAuto (kRotate: kOn)
};
// The rotation's bits of word 0.
constexpr std::uint64_t rotation_bits(QKRotation rotation) {
  return small_bit(rotation == QKRotation::kOn, kRotate) |
         small_bit(rotation == QKRotation::kAuto, kRotateAuto);
}

// The KernelSource of a spec whose kernel is `family` (its name, the unit's file name) for
// `arch`: its instantiation rendered with `templates`, described by `text` and `json`. Throws
// InvalidArgument for a head dim that is not positive (before the family's own checks).
template <typename Instantiate>
render::KernelSource source(const std::string& family, device::Arch arch, int head_dim,
                            Instantiate&& instantiate, const render::TemplateSet& templates,
                            std::string text, json::Value json) {
  if (head_dim <= 0) {
    throw InvalidArgument("spec.head_dim", std::to_string(head_dim), "expected > 0");
  }
  return render::KernelSource{render::render_unit(family, instantiate(), templates), arch,
                              std::move(text), std::move(json)};
}

}  // namespace intfa::families::spec_format
