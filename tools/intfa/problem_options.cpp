#include "intfa/problem_options.hpp"

#include <optional>
#include <string_view>
#include <type_traits>

#include "attention/validation.hpp"
#include "common/strings.hpp"
#include "intfa/attention_workload.hpp"
#include "intfa/errors.hpp"
#include "numerics/option_names.hpp"

namespace intfa::cli {

namespace {

// "p-encoding": the flag an option's member name spells (every option also takes its short flag,
// "p"); nullopt where the two are one ("p-scale").
template <typename Field>
std::optional<std::string> member_flag(const Field& field) {
  std::string flag = field.name;
  for (char& c : flag) c = c == '_' ? '-' : c;
  if (flag == field.flag) return std::nullopt;
  return flag;
}

// One line per option of the list: "  --p u8|s8 (or --p-encoding): <help>; default u8".
std::string build_numerics_flags_help() {
  std::string help;
  for_each_numerics_field(AttentionNumerics{}, [&](const auto& field, const auto&) {
    using Enum = std::remove_cv_t<std::remove_reference_t<decltype(field.default_value)>>;
    std::string names;
    for (const auto& row : OptionTable<Enum>::rows) {
      names += (names.empty() ? "" : "|") + std::string(row.name);
    }
    const auto long_flag = member_flag(field);
    help += "  --" + std::string(field.flag) + " " + names +
            (long_flag ? " (or --" + *long_flag + ")" : std::string()) + ": " + field.help +
            "; default " + option_name(field.default_value) + "\n";
  });
  return help;
}

std::string build_numerics_help() {
  return "  --variant full_int8|half_int8  full INT8 (default) or half INT8 (FP16/BF16 V); full "
         "and\n"
         "                             half for short\n" +
         build_numerics_flags_help() +
         "  --qk-bits 8|4              Q.K in INT8 (default) or INT4\n"
         "  --dtype f16|bf16           inputs and output (default f16)\n"
         "  --dist FAMILY              inputs: normal (N(0,1), default), uniform (U(-0.5,0.5)),\n"
         "                             k_offset, outliers, sharp, offset_outliers,\n"
         "                             sharp_offset_outliers, v_outliers (see "
         "intfa_accuracy_model)\n"
         "  --softmax-scale X          default 1/sqrt(head_dim)\n"
         "  --config M,N,W,S           tile config block_m,block_n,warps,stages (default: tuned "
         "or\n"
         "                             heuristic); W = 12 or 16, or 8 with M = 64, is the\n"
         "                             Hopper (wgmma) kernel\n"
         "  --smooth-k[=BOOL]          K smoothing: K minus its channel means (over a sample of "
         "keys)\n"
         "                             before quantizing; on by default, --smooth-k=0 turns it "
         "off\n"
         "  --rotate[=BOOL|auto]       rotate Q and K by a signed Walsh-Hadamard matrix before\n"
         "                             quantizing (incoherent processing: spreads outlier "
         "channels);\n"
         "                             auto (the default) rotates the heads whose keys have "
         "outlier\n"
         "                             channels\n";
}

// `--flag TEXT` as an option by its table (numerics/option_names.hpp: any spelling).
template <typename Enum>
Enum parse_option_flag(const std::string& flag, const std::string& text) {
  if (const auto value = parse_option<Enum>(text)) return *value;
  throw UsageError("--" + flag + " " + text + ": expected " + option_names_text<Enum>());
}

}  // namespace

const char* numerics_options_help() {
  static const std::string help = build_numerics_help();
  return help.c_str();
}

const char* numerics_flags_help() {
  static const std::string help = build_numerics_flags_help();
  return help.c_str();
}

const std::vector<std::string>& numerics_flag_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> list;
    for_each_numerics_field(AttentionNumerics{}, [&](const auto& field, const auto&) {
      list.push_back(field.flag);
      if (const auto long_flag = member_flag(field)) list.push_back(*long_flag);
    });
    return list;
  }();
  return names;
}

const std::vector<std::string>& qk_transform_flag_names() {
  static const std::vector<std::string> names = {"smooth-k"};
  return names;
}

const std::vector<std::string>& qk_transform_auto_flag_names() {
  static const std::vector<std::string> names = {"rotate"};
  return names;
}

void parse_qk_transforms(const Args& args, AttentionOptions& options) {
  const AttentionOptions defaults;
  options.smooth_k = args.flag_or("smooth-k", defaults.smooth_k);
  if (args.has("rotate")) {
    const std::optional<bool> rotate = args.flag_or_auto("rotate", std::nullopt);
    options.rotate_qk = !rotate ? QKRotation::kAuto : *rotate ? QKRotation::kOn : QKRotation::kOff;
  } else {
    options.rotate_qk = defaults.rotate_qk;
  }
}

const std::vector<std::string>& numerics_option_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> list = {"variant"};
    for (const std::string& name : numerics_flag_names()) list.push_back(name);
    for (const char* name : {"qk-bits", "dtype", "dist", "softmax-scale", "config"}) {
      list.push_back(name);
    }
    return list;
  }();
  return names;
}

AttentionNumerics parse_numerics_options(const Args& args) {
  AttentionNumerics numerics;
  for_each_numerics_field(numerics, [&](const auto& field, auto& value) {
    using Enum = std::remove_reference_t<decltype(value)>;
    const auto long_flag = member_flag(field);
    const auto short_text = args.get(field.flag);
    const auto long_text = long_flag ? args.get(*long_flag) : std::nullopt;
    if (short_text && long_text) {
      throw UsageError("--" + std::string(field.flag) + " and --" + *long_flag +
                       " set one option: give one");
    }
    if (short_text) value = parse_option_flag<Enum>(field.flag, *short_text);
    if (long_text) value = parse_option_flag<Enum>(*long_flag, *long_text);
  });
  return numerics;
}

Variant parse_variant(const std::string& text) {
  return parse_option_flag<Variant>("variant", text);
}

KernelConfig parse_config(const std::string& text) {
  const auto parts = strings::split(text, ',');
  if (parts.size() != 4) throw UsageError("--config " + text + ": expected M,N,W,S");
  int values[4];
  for (int i = 0; i < 4; ++i) {
    const auto value = strings::parse_int(strings::trim(parts[static_cast<std::size_t>(i)]));
    if (!value || *value <= 0 || *value > 1024) {
      throw UsageError("--config " + text + ": '" + parts[static_cast<std::size_t>(i)] +
                       "' is not a positive integer");
    }
    values[i] = static_cast<int>(*value);
  }
  return KernelConfig{values[0], values[1], values[2], values[3],
                      path_for_config(values[0], values[2])};
}

void parse_numerics(const Args& args, AttentionProblem& problem, AttentionOptions& options,
                    DType& io_type) {
  problem.variant = parse_variant(args.get_or("variant", option_name(Variant::kFullInt8)));
  problem.qk_bits = static_cast<int>(args.get_int("qk-bits", 8, 4, 8));
  if (problem.qk_bits != 8 && problem.qk_bits != 4) throw UsageError("--qk-bits: expected 8 or 4");
  options.numerics = parse_numerics_options(args);
  const std::string dtype = args.get_or("dtype", "f16");
  if (dtype != "f16" && dtype != "bf16") throw UsageError("--dtype " + dtype + ": expected f16 or bf16");
  io_type = dtype == "f16" ? DType::kF16 : DType::kBF16;
  options.softmax_scale = args.get_double("softmax-scale", 0.0);
  if (const auto config = args.get("config")) options.config = parse_config(*config);
}

reference::InputFamily parse_input_family(const Args& args) {
  const std::string dist = args.get_or("dist", "normal");
  std::vector<std::string> names;
  for (reference::InputFamily family : reference::all_input_families()) {
    if (reference::family_name(family) == dist) return family;
    names.push_back(reference::family_name(family));
  }
  throw UsageError("--dist " + dist + ": expected " + strings::join(names, ", "));
}

std::string describe_numerics(const AttentionProblem& problem, const AttentionOptions& options) {
  std::string transforms;
  if (options.numerics.k_granularity == KScaleGranularity::kPerBlock)
    transforms += ", K per 64-key block";
  if (options.smooth_k) transforms += ", K smoothed";
  if (options.rotate_qk == QKRotation::kOn) transforms += ", Q and K rotated";
  if (options.rotate_qk == QKRotation::kAuto)
    transforms += ", Q and K rotated where K has outliers";
  if (problem.variant == Variant::kHalfInt8) {
    return "half INT8 (INT" + std::to_string(problem.qk_bits) + " Q.K, 16-bit P.V" + transforms +
           ")";
  }
  return std::string("full INT8 (INT") + std::to_string(problem.qk_bits) + " Q.K, P " +
         option_name(options.numerics.p_encoding) + " against the " +
         option_name(options.numerics.p_scale) + " max, V per " +
         option_name(options.numerics.v_granularity) + transforms + ")";
}

std::vector<int> parse_head_dims(const Args& args, const std::vector<long>& fallback) {
  std::vector<int> head_dims;
  for (long head_dim : args.get_int_list("head-dims", fallback, 1, 1024)) {
    if (head_dim != 64 && head_dim != 128 && head_dim != 256) {
      throw UsageError("--head-dims: " + std::to_string(head_dim) +
                       " is not a supported head dim (64, 128, 256)");
    }
    head_dims.push_back(static_cast<int>(head_dim));
  }
  return head_dims;
}

std::vector<bool> parse_causal_list(const Args& args, const std::vector<bool>& fallback) {
  return args.switch_list("causal", fallback);
}

void validate_problem_options(const AttentionProblem& problem, const AttentionOptions& options) {
  static const std::vector<OptionOfField> kOptionOfField = [] {
    std::vector<OptionOfField> list = {{"problem.batch", "--batch"},
                                       {"problem.heads_q", "--heads"},
                                       {"problem.heads_kv", "--heads-kv"},
                                       {"problem.seq_q", "--seq"},
                                       {"problem.seq_kv", "--seq-kv"},
                                       {"problem.head_dim", "--head-dim"},
                                       {"problem.qk_bits", "--qk-bits"},
                                       {"problem.variant", "--variant"},
                                       {"options.softmax_scale", "--softmax-scale"},
                                       {"config.", "--config"}};
    for_each_numerics_field(AttentionNumerics{}, [&](const auto& field, const auto&) {
      list.push_back({std::string("options.") + field.name, "--" + std::string(field.flag)});
    });
    return list;
  }();
  try {
    attention::validate_problem(problem);
    attention::validate_options(problem, options);
  } catch (const InvalidArgument& error) {
    throw_naming_option(error, kOptionOfField);
  }
}

AttentionProblem grid_point(const AttentionProblem& base, Variant variant, int head_dim, long seq,
                            int batch, int heads) {
  AttentionProblem point = base;
  point.variant = variant;
  point.head_dim = head_dim;
  point.batch = batch;
  point.heads_q = point.heads_kv = heads;
  point.seq_q = point.seq_kv = static_cast<int>(seq);
  return point;
}

void validate_grid(const AttentionProblem& base, const AttentionOptions& options,
                   const std::vector<Variant>& variants, const std::vector<int>& head_dims,
                   const std::vector<long>& seqs, int batch, int heads) {
  for (Variant variant : variants)
    for (int head_dim : head_dims)
      for (long seq : seqs) {
        const AttentionProblem problem = grid_point(base, variant, head_dim, seq, batch, heads);
        validate_problem_options(problem, options);
        require_host_memory(AttentionWorkload::host_bytes(problem),
                            "--batch " + std::to_string(batch) + " --heads " +
                                std::to_string(heads) + " --seq " + std::to_string(seq) +
                                " --head-dims " + std::to_string(head_dim));
      }
}

void throw_naming_option(const InvalidArgument& error, const std::vector<OptionOfField>& options) {
  for (const auto& [field, option] : options) {
    const std::string_view name = field;
    const bool matches =
        name.back() == '.' ? strings::starts_with(error.field(), field) : error.field() == name;
    if (matches) throw UsageError(option + ": " + error.what());
  }
  throw error;
}

std::vector<Variant> parse_variant_list(const Args& args,
                                        const std::vector<std::string>& fallback) {
  std::vector<Variant> variants;
  for (const std::string& name : args.get_list("variants", fallback)) {
    variants.push_back(parse_variant(name));
  }
  return variants;
}

attention::SpecRequest spec_request(device::Arch arch, const AttentionProblem& problem,
                                    const AttentionOptions& options, DType io_type) {
  return attention::request_for(arch, problem, options, io_type);
}

}  // namespace intfa::cli
