#include "families/kernel_spec.hpp"

#include <tuple>
#include <utility>

#include "intfa/errors.hpp"
#include "numerics/numerics.hpp"

namespace intfa::families {
namespace {

auto as_tuple(const KernelSpec& s) {
  return std::tie(s.family, s.arch, s.head_dim, s.block_m, s.block_n, s.warps, s.stages, s.qk_bits,
                  s.variant, s.input_type, s.output_type, s.causal, s.numerics, s.smooth_k,
                  s.varlen, s.q_dot_k_mean, s.rotate, s.quantizes_q);
}

template <typename Enum, std::size_t N>
Enum enum_from_name(const json::Value& object, const char* member, std::string (*name)(Enum),
                    const Enum (&values)[N]) {
  const std::string text = object.at(member).as_string();
  for (Enum value : values) {
    if (name(value) == text) return value;
  }
  throw InvalidArgument(std::string("spec.") + member, "'" + text + "'", "unknown value");
}

// An option of the spec JSON by its table (numerics/option_names.hpp: names and aliases).
template <typename Enum>
Enum option_from_name(const json::Value& object, const char* member) {
  const std::string text = object.at(member).as_string();
  if (const auto value = parse_option<Enum>(text)) return *value;
  throw InvalidArgument(std::string("spec.") + member, "'" + text + "'",
                        "expected " + option_names_text<Enum>());
}

const KernelFamily kFamilies[] = {
    KernelFamily::kQuantizeRows, KernelFamily::kChannelMean,     KernelFamily::kQuantizeVScale,
    KernelFamily::kQuantizeV,    KernelFamily::kQuantizeKVScale, KernelFamily::kQuantizeKV,
    KernelFamily::kAttention,    KernelFamily::kAttentionWgmma,  KernelFamily::kPagedAppend,
    KernelFamily::kPagedDecode,  KernelFamily::kMergeStates};
const kernels::ElementType kElementTypes[] = {
    kernels::ElementType::kF16, kernels::ElementType::kBF16, kernels::ElementType::kF32};

}  // namespace

bool operator==(const KernelSpec& a, const KernelSpec& b) {
  return as_tuple(a) == as_tuple(b);
}

render::KernelId kernel_id(const KernelSpec& s) {
  auto two = [](int low, int high) {
    return static_cast<std::uint64_t>(static_cast<std::uint32_t>(low)) |
           static_cast<std::uint64_t>(static_cast<std::uint32_t>(high)) << 32;
  };
  auto bits = [](auto value, int shift) {
    return static_cast<std::uint64_t>(static_cast<unsigned>(value)) << shift;
  };
  const std::uint64_t small =
      bits(s.family, 0) | bits(s.arch, 8) | bits(s.variant, 16) | bits(s.input_type, 24) |
      bits(s.output_type, 32) | bits(s.causal, 40) | bits(s.smooth_k, 41) | bits(s.varlen, 42) |
      bits(s.q_dot_k_mean, 43) | bits(s.rotate, 44) | bits(s.quantizes_q, 45);
  return render::KernelId{{small, two(s.head_dim, s.block_m), two(s.block_n, s.warps),
                           two(s.stages, s.qk_bits), numerics::code(s.numerics)}};
}

std::string family_name(KernelFamily family) {
  switch (family) {
    case KernelFamily::kQuantizeRows:
      return "quantize_rows";
    case KernelFamily::kChannelMean:
      return "channel_mean";
    case KernelFamily::kQuantizeVScale:
      return "quantize_v_scale";
    case KernelFamily::kQuantizeV:
      return "quantize_v";
    case KernelFamily::kQuantizeKVScale:
      return "quantize_k_v_scale";
    case KernelFamily::kQuantizeKV:
      return "quantize_k_v";
    case KernelFamily::kAttention:
      return "attention";
    case KernelFamily::kAttentionWgmma:
      return "attention_wgmma";
    case KernelFamily::kPagedAppend:
      return "paged_append";
    case KernelFamily::kPagedDecode:
      return "paged_decode";
    case KernelFamily::kMergeStates:
      return "merge_states";
  }
  throw InternalError("unknown KernelFamily");
}

render::RenderedUnit render(const KernelSpec& spec, const render::TemplateSet& templates) {
  if (spec.head_dim <= 0) {
    throw InvalidArgument("spec.head_dim", std::to_string(spec.head_dim), "expected > 0");
  }
  return render::render_unit(family_name(spec.family), instantiation_for(spec), templates);
}

render::KernelSource kernel_source(const KernelSpec& spec, const render::TemplateSet& templates) {
  return render::KernelSource{render(spec, templates), spec.arch, spec.to_string(), spec.to_json()};
}

std::string KernelSpec::to_string() const {
  return family_name(family) + " " + device::arch_name(arch) + " d" + std::to_string(head_dim) +
         family_fields_text(*this);
}

json::Value KernelSpec::to_json() const {
  json::Value object = json::Value::object();
  object.set("family", family_name(family));
  object.set("arch", device::arch_name(arch));
  object.set("head_dim", head_dim);
  object.set("block_m", block_m);
  object.set("block_n", block_n);
  object.set("warps", warps);
  object.set("stages", stages);
  object.set("qk_bits", qk_bits);
  object.set("variant", option_name(variant));
  object.set("input_type", render::element_type_name(input_type));
  object.set("output_type", render::element_type_name(output_type));
  object.set("causal", causal);
  numerics::write_json(object, numerics);
  object.set("smooth_k", smooth_k);
  object.set("varlen", varlen);
  object.set("q_dot_k_mean", q_dot_k_mean);
  object.set("rotate", rotate);
  object.set("quantizes_q", quantizes_q);
  return object;
}

KernelSpec KernelSpec::from_json(const json::Value& value) {
  try {
    KernelSpec spec;
    spec.family = enum_from_name(value, "family", family_name, kFamilies);
    const std::string arch = value.at("arch").as_string();
    const auto parsed_arch = device::parse_arch(arch);
    if (!parsed_arch) throw InvalidArgument("spec.arch", "'" + arch + "'", "unknown arch");
    spec.arch = *parsed_arch;
    auto integer = [&](const char* member) {
      const std::int64_t number = value.at(member).as_int();
      if (number < 0 || number > 1 << 20) {
        throw InvalidArgument(std::string("spec.") + member, std::to_string(number),
                              "out of range");
      }
      return static_cast<int>(number);
    };
    spec.head_dim = integer("head_dim");
    spec.block_m = integer("block_m");
    spec.block_n = integer("block_n");
    spec.warps = integer("warps");
    spec.stages = integer("stages");
    spec.qk_bits = integer("qk_bits");
    spec.variant = option_from_name<Variant>(value, "variant");
    spec.input_type = enum_from_name(value, "input_type", render::element_type_name, kElementTypes);
    spec.output_type =
        enum_from_name(value, "output_type", render::element_type_name, kElementTypes);
    spec.causal = value.at("causal").as_bool();
    // Every option (absent: the spec's own, Algorithm 1's; files of builds before per-block K
    // lack k_granularity, which was per token).
    spec.numerics = numerics::read_json<InvalidArgument>(value, "spec.", paper_numerics());
    spec.smooth_k = value.at("smooth_k").as_bool();
    // Absent in the files of builds before varlen existed: those specs are not varlen.
    const json::Value* varlen = value.find("varlen");
    spec.varlen = varlen != nullptr && varlen->as_bool();
    // Absent before K smoothing's LSE term and the rotation existed (issue 25): neither.
    for (auto [member, field] : {std::pair<const char*, bool*>{"q_dot_k_mean", &spec.q_dot_k_mean},
                                 {"rotate", &spec.rotate},
                                 // Absent before the Hopper kernel's own Q pass: INT8 Q.
                                 {"quantizes_q", &spec.quantizes_q}}) {
      const json::Value* found = value.find(member);
      *field = found != nullptr && found->as_bool();
    }
    return spec;
  } catch (const json::TypeError& error) {
    throw InvalidArgument("spec", "(JSON)", error.what());
  }
}

}  // namespace intfa::families

namespace intfa::families {

std::size_t KernelSpecHash::operator()(const KernelSpec& s) const noexcept {
  std::size_t hash = 1469598103934665603ull;
  auto mix = [&hash](long long value) {
    hash ^= static_cast<std::size_t>(value) + 0x9e3779b97f4a7c15ull + (hash << 6) + (hash >> 2);
  };
  mix(static_cast<int>(s.family));
  mix(static_cast<int>(s.arch));
  mix(s.head_dim);
  mix(s.block_m);
  mix(s.block_n);
  mix(s.warps);
  mix(s.stages);
  mix(s.qk_bits);
  mix(static_cast<int>(s.variant));
  mix(static_cast<int>(s.input_type));
  mix(static_cast<int>(s.output_type));
  mix(s.causal);
  mix(static_cast<long long>(numerics::code(s.numerics)));
  mix(s.smooth_k);
  mix(s.varlen);
  mix(s.q_dot_k_mean);
  mix(s.rotate);
  mix(s.quantizes_q);
  return hash;
}

}  // namespace intfa::families
