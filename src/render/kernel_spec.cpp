#include "render/kernel_spec.hpp"

#include <tuple>
#include <utility>

#include "api/option_names.hpp"
#include "decode/paged_family.hpp"
#include "intfa/errors.hpp"

namespace intfa::render {
namespace {

auto as_tuple(const KernelSpec& s) {
  return std::tie(s.family, s.arch, s.head_dim, s.block_m, s.block_n, s.warps, s.stages, s.qk_bits,
                  s.variant, s.input_type, s.output_type, s.causal, s.p_encoding, s.p_scale,
                  s.v_granularity, s.smooth_k, s.varlen, s.q_dot_k_mean, s.rotate,
                  s.k_granularity, s.quantizes_q);
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

// A numerics option of the spec JSON by its table (intfa/api/option_names.hpp: names and aliases).
template <typename KernelEnum>
KernelEnum option_from_name(const json::Value& object, const char* member) {
  using Public = decltype(public_option(KernelEnum{}));
  const std::string text = object.at(member).as_string();
  if (const auto value = parse_option<Public>(text)) return static_cast<KernelEnum>(*value);
  throw InvalidArgument(std::string("spec.") + member, "'" + text + "'",
                        "expected " + option_names_text<Public>());
}

const KernelFamily kFamilies[] = {
    KernelFamily::kQuantizeRows,   KernelFamily::kChannelMean,      KernelFamily::kQuantizeVScale,
    KernelFamily::kQuantizeV,      KernelFamily::kQuantizeKVScale,  KernelFamily::kQuantizeKV,
    KernelFamily::kAttention,      KernelFamily::kAttentionWgmma,   KernelFamily::kPagedAppend,
    KernelFamily::kPagedDecode,    KernelFamily::kMergeStates};
const kernels::ElementType kElementTypes[] = {
    kernels::ElementType::kF16, kernels::ElementType::kBF16, kernels::ElementType::kF32};

}  // namespace

bool operator==(const KernelSpec& a, const KernelSpec& b) { return as_tuple(a) == as_tuple(b); }

std::string family_name(KernelFamily family) {
  switch (family) {
    case KernelFamily::kQuantizeRows: return "quantize_rows";
    case KernelFamily::kChannelMean: return "channel_mean";
    case KernelFamily::kQuantizeVScale: return "quantize_v_scale";
    case KernelFamily::kQuantizeV: return "quantize_v";
    case KernelFamily::kQuantizeKVScale: return "quantize_k_v_scale";
    case KernelFamily::kQuantizeKV: return "quantize_k_v";
    case KernelFamily::kAttention: return "attention";
    case KernelFamily::kAttentionWgmma: return "attention_wgmma";
    case KernelFamily::kPagedAppend: return "paged_append";
    case KernelFamily::kPagedDecode: return "paged_decode";
    case KernelFamily::kMergeStates: return "merge_states";
  }
  throw InternalError("unknown KernelFamily");
}

std::string element_type_name(kernels::ElementType type) {
  switch (type) {
    case kernels::ElementType::kF16: return "f16";
    case kernels::ElementType::kBF16: return "bf16";
    case kernels::ElementType::kF32: return "f32";
  }
  throw InternalError("unknown ElementType");
}

std::string element_type_enumerator(kernels::ElementType type) {
  switch (type) {
    case kernels::ElementType::kF16: return "kF16";
    case kernels::ElementType::kBF16: return "kBF16";
    case kernels::ElementType::kF32: return "kF32";
  }
  throw InternalError("unknown ElementType");
}

std::string variant_name(kernels::AttentionVariant variant) {
  return option_name(public_option(variant));
}

std::string p_encoding_name(kernels::PEncoding encoding) {
  return option_name(public_option(encoding));
}

std::string p_scale_name(kernels::PScaleReference reference) {
  return option_name(public_option(reference));
}

std::string v_granularity_name(kernels::VScaleGranularity granularity) {
  return option_name(public_option(granularity));
}

std::string k_granularity_name(kernels::KScaleGranularity granularity) {
  return option_name(public_option(granularity));
}

std::string KernelSpec::to_string() const {
  // Named only when per block, so that the text of every other spec stays as it was.
  const std::string k_blocks =
      k_granularity == kernels::KScaleGranularity::kPerBlock ? " k=block" : "";
  std::string text = family_name(family) + " " + device::arch_name(arch) + " d" +
                     std::to_string(head_dim);
  switch (family) {
    case KernelFamily::kQuantizeRows:
      text += " " + element_type_name(input_type) + "->" + (qk_bits == 4 ? "i4" : "i8");
      if (smooth_k) text += " smooth_k";
      if (q_dot_k_mean) text += " q_dot_k_mean";
      if (rotate) text += " rotate";
      text += k_blocks;
      break;
    case KernelFamily::kChannelMean:
      text += " " + element_type_name(input_type);
      break;
    case KernelFamily::kQuantizeKVScale:
    case KernelFamily::kQuantizeKV:
      text += " " + element_type_name(input_type) + "->" + (qk_bits == 4 ? "i4" : "i8");
      if (smooth_k) text += " smooth_k";
      if (rotate) text += " rotate";
      text += " v=" + v_granularity_name(v_granularity);
      break;
    case KernelFamily::kQuantizeVScale:
    case KernelFamily::kQuantizeV:
      text += " " + element_type_name(input_type) + " v=" + v_granularity_name(v_granularity);
      break;
    case KernelFamily::kAttention:
    case KernelFamily::kAttentionWgmma:
      text += " m" + std::to_string(block_m) + " n" + std::to_string(block_n) + " w" +
              std::to_string(warps) + " s" + std::to_string(stages) + " " + variant_name(variant) +
              " qk" + std::to_string(qk_bits) + " " + element_type_name(input_type) + "->" +
              element_type_name(output_type) + (causal ? " causal" : "") +
              (varlen ? " varlen" : "");
      if (variant == kernels::AttentionVariant::kFullInt8) {
        text += " p=" + p_encoding_name(p_encoding) + "/" + p_scale_name(p_scale) +
                " v=" + v_granularity_name(v_granularity);
      }
      text += k_blocks;
      if (quantizes_q) text += q_dot_k_mean ? " q=in_kernel+q_dot_k_mean" : " q=in_kernel";
      break;
    case KernelFamily::kPagedAppend:
    case KernelFamily::kPagedDecode:
    case KernelFamily::kMergeStates:
      text += paged::describe(*this);
      break;
  }
  return text;
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
  object.set("variant", variant_name(variant));
  object.set("input_type", element_type_name(input_type));
  object.set("output_type", element_type_name(output_type));
  object.set("causal", causal);
  object.set("p_encoding", p_encoding_name(p_encoding));
  object.set("p_scale", p_scale_name(p_scale));
  object.set("v_granularity", v_granularity_name(v_granularity));
  object.set("smooth_k", smooth_k);
  object.set("varlen", varlen);
  object.set("q_dot_k_mean", q_dot_k_mean);
  object.set("rotate", rotate);
  object.set("k_granularity", k_granularity_name(k_granularity));
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
    spec.variant = option_from_name<kernels::AttentionVariant>(value, "variant");
    spec.input_type = enum_from_name(value, "input_type", element_type_name, kElementTypes);
    spec.output_type = enum_from_name(value, "output_type", element_type_name, kElementTypes);
    spec.causal = value.at("causal").as_bool();
    spec.p_encoding = option_from_name<kernels::PEncoding>(value, "p_encoding");
    spec.p_scale = option_from_name<kernels::PScaleReference>(value, "p_scale");
    spec.v_granularity = option_from_name<kernels::VScaleGranularity>(value, "v_granularity");
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
    // Absent before per-block K existed: per token.
    if (value.find("k_granularity") != nullptr) {
      spec.k_granularity = option_from_name<kernels::KScaleGranularity>(value, "k_granularity");
    }
    return spec;
  } catch (const json::TypeError& error) {
    throw InvalidArgument("spec", "(JSON)", error.what());
  }
}

}  // namespace intfa::render

namespace intfa::render {

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
  mix(static_cast<int>(s.p_encoding));
  mix(static_cast<int>(s.p_scale));
  mix(static_cast<int>(s.v_granularity));
  mix(s.smooth_k);
  mix(s.varlen);
  mix(s.q_dot_k_mean);
  mix(s.rotate);
  mix(static_cast<int>(s.k_granularity));
  mix(s.quantizes_q);
  return hash;
}

}  // namespace intfa::render
