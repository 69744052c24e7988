// intfa_accuracy_model: the accuracy tables of issue 25 from the CPU model of the kernels.
//
// The model (tests/reference/pipeline_model.hpp) does what intfa.attention does to 16-bit inputs
// with the kernels' own rounding; the kernels match it to their ex2.approx (the GPU tests check
// <= 1e-3 relative L2), so its error against float64 attention of the original inputs is the
// kernels' error to three digits. One table per metric (relative L2, cosine similarity, mean
// relative error, and the LSE's max |error| in nats), a row per input family, variant, option
// and head dim, a column per key count N.
//
// The attention is non-causal and every query row is independent of the others, so each problem
// takes --query-rows query rows against all N keys (the error statistics of N rows at a fraction
// of the time; every option sees the same rows).
//
//   build/bin/intfa_accuracy_model [--families normal,k_offset,...] [--options plain,smooth,...]
//       [--variants full,half] [--head-dims 64,128] [--seqs 1024,...,16384] [--heads 1]
//       [--query-rows 1024] [--seed S] [--json FILE]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "quantize/quantize_params.h"
#include "reference/input_families.hpp"
#include "reference/pipeline_model.hpp"
#include "reference/reference.hpp"

namespace {

using intfa::reference::ErrorMetrics;
using intfa::reference::InputFamily;
using intfa::reference::PipelineOptions;
using intfa::reference::Shape;

// One column of choices the table compares: how Q and K are transformed before quantizing.
struct Transform {
  std::string name;
  bool smooth_k;
  intfa::QKRotation rotate;
  bool exact_mean;
  // Not the kernels: float64 attention of per-token INT8 Q and K dequantized (P and V exact), the
  // part of the error that Q.K's quantization alone makes; with Q as two INT8 terms (q8 * s +
  // r8 * s', r the rounding error: what a second Q.K MMA would buy).
  enum class Error { kKernels, kQueryKeyOnly, kQueryKeyOnlyTwoTermQ } error = Error::kKernels;
  bool k_per_block = false;  // K with one scale per 64 keys (the opt-in faster numerics)
  // The kernels' numerics with Q (and K) as two INT8 terms, 254 q.k + q_low.k (+ q.k_low) in
  // int32 (PipelineOptions::q_low_terms): the model of a more precise Q.K that no kernel has yet.
  bool q_low_terms = false;
  bool k_low_terms = false;
};

const std::vector<Transform>& known_transforms() {
  constexpr intfa::QKRotation kOff = intfa::QKRotation::kOff, kOn = intfa::QKRotation::kOn,
                              kAuto = intfa::QKRotation::kAuto;
  static const std::vector<Transform> transforms = {
      {"plain", false, kOff, false},
      {"smooth", true, kOff, false},
      {"smooth_exact", true, kOff, true},
      {"rotate", false, kOn, false},
      {"smooth+rotate", true, kOn, false},
      {"smooth+auto", true, kAuto, false},  // the defaults: rotated where K has outliers
      {"kblock", false, kOff, false, Transform::Error::kKernels, true},
      {"smooth+kblock", true, kOff, false, Transform::Error::kKernels, true},
      {"smooth+rotate+kblock", true, kOn, false, Transform::Error::kKernels, true},
      {"qk_only", false, kOff, false, Transform::Error::kQueryKeyOnly},
      {"qk_only_q2", false, kOff, false, Transform::Error::kQueryKeyOnlyTwoTermQ},
      {"smooth+q2", true, kOff, false, Transform::Error::kKernels, false, true},
      {"smooth+q2k2", true, kOff, false, Transform::Error::kKernels, false, true, true},
      {"smooth+rotate+q2k2", true, kOn, false, Transform::Error::kKernels, false, true, true},
  };
  return transforms;
}

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = text.find(',', start);
    const std::size_t end = comma == std::string::npos ? text.size() : comma;
    if (end > start) parts.push_back(text.substr(start, end - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return parts;
}

std::vector<int> split_ints(const std::string& text) {
  std::vector<int> values;
  for (const std::string& part : split(text)) values.push_back(std::stoi(part));
  return values;
}

struct Arguments {
  std::vector<InputFamily> families = intfa::reference::all_input_families();
  std::vector<Transform> transforms;
  std::vector<std::string> variants = {"full", "half"};
  std::vector<int> head_dims = {64, 128};
  std::vector<int> seqs = {1024, 2048, 4096, 8192, 16384};
  int heads = 1;
  int query_rows = 1024;
  int block_n = 0;  // 0: the Hopper kernels' key tile (128; 64 at d=256)
  std::string v_scale = "channel";
  std::uint64_t seed = 0;
  std::string json;
};

Arguments parse(int argc, char** argv) {
  Arguments arguments;
  arguments.seed = intfa::reference::fresh_seed();
  std::vector<std::string> transform_names = {"plain", "smooth", "rotate", "smooth+rotate"};
  for (int i = 1; i < argc; ++i) {
    const std::string name = argv[i];
    if (name == "--help" || name == "-h") {
      std::printf(
          "usage: intfa_accuracy_model [--families LIST] [--options LIST] "
          "[--variants full,half] [--head-dims LIST] [--seqs LIST] [--heads H] "
          "[--query-rows R] [--block-n N] [--v-scale tensor|channel|block] [--seed S] [--json "
          "FILE]\n  options:");
      for (const Transform& transform : known_transforms()) {
        std::printf(" %s", transform.name.c_str());
      }
      std::printf("\n");
      std::exit(0);
    }
    if (i + 1 >= argc) throw std::invalid_argument(name + ": expected a value");
    const std::string value = argv[++i];
    if (name == "--families") {
      arguments.families.clear();
      for (const std::string& family : split(value)) {
        arguments.families.push_back(intfa::reference::parse_family(family));
      }
    } else if (name == "--options") {
      transform_names = split(value);
    } else if (name == "--variants") {
      arguments.variants = split(value);
    } else if (name == "--head-dims") {
      arguments.head_dims = split_ints(value);
    } else if (name == "--seqs") {
      arguments.seqs = split_ints(value);
    } else if (name == "--heads") {
      arguments.heads = std::stoi(value);
    } else if (name == "--query-rows") {
      arguments.query_rows = std::stoi(value);
    } else if (name == "--block-n") {
      arguments.block_n = std::stoi(value);
    } else if (name == "--v-scale") {
      if (value != "tensor" && value != "channel" && value != "block") {
        throw std::invalid_argument("--v-scale: expected tensor, channel or block");
      }
      arguments.v_scale = value;
    } else if (name == "--seed") {
      arguments.seed = std::stoull(value);
    } else if (name == "--json") {
      arguments.json = value;
    } else {
      throw std::invalid_argument(name + ": unknown option");
    }
  }
  for (const std::string& wanted : transform_names) {
    bool found = false;
    for (const Transform& transform : known_transforms()) {
      if (transform.name == wanted) {
        arguments.transforms.push_back(transform);
        found = true;
      }
    }
    if (!found) throw std::invalid_argument("--options: unknown '" + wanted + "'");
  }
  for (const std::string& variant : arguments.variants) {
    if (variant != "full" && variant != "half") {
      throw std::invalid_argument("--variants: expected full or half, got '" + variant + "'");
    }
  }
  return arguments;
}

// The defaults of intfa::AttentionOptions (u8 P against the tile max, V per channel) for full
// INT8, and the Hopper kernels' key tile of 128 (64 at d=256).
PipelineOptions pipeline_options(const Arguments& arguments, const std::string& variant,
                                 int head_dim, const Transform& transform) {
  intfa::AttentionOptions attention;
  attention.numerics.v_granularity =
      arguments.v_scale == "tensor"  ? intfa::VScaleGranularity::kPerTensor
      : arguments.v_scale == "block" ? intfa::VScaleGranularity::kPerBlock
                                     : intfa::VScaleGranularity::kPerChannel;
  attention.numerics.k_granularity = transform.k_per_block ? intfa::KScaleGranularity::kPerBlock
                                                           : intfa::KScaleGranularity::kPerToken;
  attention.smooth_k = transform.smooth_k;
  attention.rotate_qk = transform.rotate;
  PipelineOptions options = PipelineOptions::of(
      variant == "full" ? intfa::Variant::kFullInt8 : intfa::Variant::kHalfInt8, attention,
      arguments.block_n > 0 ? arguments.block_n
      : head_dim >= 256     ? 64
                            : 128);
  options.exact_mean = transform.exact_mean;
  options.q_low_terms = transform.q_low_terms;
  options.k_low_terms = transform.k_low_terms;
  return options;
}

struct Row {
  std::string family, variant, option;
  int head_dim;
  bool operator<(const Row& other) const {
    return std::tie(family, variant, option, head_dim) <
           std::tie(other.family, other.variant, other.option, other.head_dim);
  }
};

struct Cell {
  ErrorMetrics metrics;
  double lse_max_abs_error = 0;
};

double max_lse_error(const std::vector<double>& exact, const std::vector<double>& model) {
  double worst = 0;
  for (std::size_t i = 0; i < exact.size(); ++i) {
    worst = std::max(worst, std::fabs(exact[i] - model[i]));
  }
  return worst;
}

void print_table(const char* title, const std::vector<Row>& order,
                 const std::map<Row, std::map<int, Cell>>& cells, const std::vector<int>& seqs,
                 double (*value)(const Cell&), const char* format) {
  std::printf("\n**%s**\n\n| inputs | variant | option | d |", title);
  for (int seq : seqs) std::printf(" N=%d |", seq);
  std::printf("\n|---|---|---|---|");
  for (std::size_t i = 0; i < seqs.size(); ++i) std::printf("---|");
  std::printf("\n");
  for (const Row& row : order) {
    std::printf("| %s | %s | %s | %d |", row.family.c_str(), row.variant.c_str(),
                row.option.c_str(), row.head_dim);
    const auto& by_seq = cells.at(row);
    for (int seq : seqs) {
      const auto found = by_seq.find(seq);
      if (found == by_seq.end()) {
        std::printf(" |");
      } else {
        std::printf(" ");
        std::printf(format, value(found->second));
        std::printf(" |");
      }
    }
    std::printf("\n");
  }
}

// Per-token INT8 rows of `x` dequantized (q8 * scale), with `terms` INT8 terms: each next one
// quantizes what the previous ones left.
std::vector<float> dequantized(const std::vector<float>& x, int head_dim, int terms) {
  std::vector<float> sum(x.size(), 0.0f), left = x;
  const int rows = static_cast<int>(x.size() / static_cast<std::size_t>(head_dim));
  for (int term = 0; term < terms; ++term) {
    const intfa::reference::QuantizedRows q =
        intfa::reference::quantize_rows(left.data(), rows, head_dim, 8);
    for (std::size_t i = 0; i < x.size(); ++i) {
      const float value = q.values[i] * q.scales[i / static_cast<std::size_t>(head_dim)];
      sum[i] += value;
      left[i] -= value;
    }
  }
  return sum;
}

int run(const Arguments& arguments) {
  std::vector<Row> order;
  std::map<Row, std::map<int, Cell>> cells;
  std::ofstream json;
  if (!arguments.json.empty()) json.open(arguments.json);
  const auto started = std::chrono::steady_clock::now();
  for (InputFamily family : arguments.families) {
    for (int head_dim : arguments.head_dims) {
      for (int seq : arguments.seqs) {
        Shape shape =
            intfa::reference::make_shape(1, arguments.heads, arguments.heads,
                                         std::min(seq, arguments.query_rows), seq, head_dim, false);
        const std::uint64_t seed = arguments.seed + static_cast<std::uint64_t>(seq) * 1000 +
                                   static_cast<std::uint64_t>(head_dim);
        const auto inputs = intfa::reference::make_inputs(family, shape, seed);
        std::vector<double> exact(shape.q_elements()), exact_lse(shape.q_elements() / head_dim);
        intfa::reference::attention_f64(shape, inputs.q.data(), inputs.k.data(), inputs.v.data(),
                                        exact.data(), exact_lse.data());
        for (const std::string& variant : arguments.variants) {
          for (const Transform& transform : arguments.transforms) {
            std::vector<double> out(exact.size()), lse(exact_lse.size());
            if (transform.error == Transform::Error::kKernels) {
              intfa::reference::attention_pipeline_model(
                  shape, inputs.q.data(), inputs.k.data(), inputs.v.data(),
                  pipeline_options(arguments, variant, head_dim, transform), out.data(),
                  lse.data());
            } else if (variant == "half") {  // the same for both variants: listed once
              const int q_terms = transform.error == Transform::Error::kQueryKeyOnly ? 1 : 2;
              const std::vector<float> q = dequantized(inputs.q, head_dim, q_terms);
              const std::vector<float> k = dequantized(inputs.k, head_dim, 1);
              intfa::reference::attention_f64(shape, q.data(), k.data(), inputs.v.data(),
                                              out.data(), lse.data());
            } else {
              continue;
            }
            const Row row{intfa::reference::family_name(family), variant, transform.name, head_dim};
            if (cells.find(row) == cells.end()) order.push_back(row);
            Cell& cell = cells[row][seq];
            cell.metrics = intfa::reference::compare(exact.data(), out.data(), out.size());
            cell.lse_max_abs_error = max_lse_error(exact_lse, lse);
            const double elapsed =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
            std::fprintf(stderr, "[%6.0f s] %s %s %s d=%d N=%d: rel_l2 %.3f%%\n", elapsed,
                         row.family.c_str(), variant.c_str(), transform.name.c_str(), head_dim, seq,
                         100 * cell.metrics.relative_l2);
            if (json.is_open()) {
              json << "{\"inputs\": \"" << row.family << "\", \"variant\": \"" << variant
                   << "\", \"option\": \"" << transform.name << "\", \"head_dim\": " << head_dim
                   << ", \"seq\": " << seq << ", \"rel_l2\": " << cell.metrics.relative_l2
                   << ", \"cosine\": " << cell.metrics.cosine
                   << ", \"mre\": " << cell.metrics.mean_relative_error
                   << ", \"lse_max_abs_error\": " << cell.lse_max_abs_error << "}\n";
              json.flush();
            }
          }
        }
      }
    }
  }
  std::sort(order.begin(), order.end(), [&](const Row& a, const Row& b) {
    // Families in the order asked for, then variant, option (as asked), head dim.
    auto rank = [&](const Row& row) {
      int family = 0, option = 0;
      for (std::size_t i = 0; i < arguments.families.size(); ++i) {
        if (intfa::reference::family_name(arguments.families[i]) == row.family) {
          family = static_cast<int>(i);
        }
      }
      for (std::size_t i = 0; i < arguments.transforms.size(); ++i) {
        if (arguments.transforms[i].name == row.option) option = static_cast<int>(i);
      }
      return std::make_tuple(family, row.variant, option, row.head_dim);
    };
    return rank(a) < rank(b);
  });
  std::printf(
      "CPU model of the kernels vs float64 of the original FP16 inputs; B=1, H=%d, "
      "%d query rows against N keys, non-causal, seed %llu. full = full INT8 defaults "
      "(u8 P against the tile max, V per channel), half = half INT8; options: plain (none), "
      "smooth (K minus the mean of %d sampled keys, LSE term), smooth_exact (the mean of "
      "all keys), rotate (Q, K Hadamard-rotated), smooth+rotate, smooth+auto (the defaults: "
      "the heads whose keys have outlier channels rotated), kblock (K with one scale per 64 "
      "keys, alone or with the others); qk_only (not a kernel: float64 "
      "attention of per-token INT8 Q and K, the error of Q.K's quantization alone) and qk_only_q2 "
      "(the same with Q as two INT8 terms), listed under half.\n",
      arguments.heads, arguments.query_rows, static_cast<unsigned long long>(arguments.seed),
      intfa::kernels::kChannelMeanSamples);
  print_table(
      "relative L2 (%)", order, cells, arguments.seqs,
      [](const Cell& cell) { return 100 * cell.metrics.relative_l2; }, "%.3f");
  print_table(
      "cosine similarity", order, cells, arguments.seqs,
      [](const Cell& cell) { return cell.metrics.cosine; }, "%.6f");
  print_table(
      "mean relative error (%)", order, cells, arguments.seqs,
      [](const Cell& cell) { return 100 * cell.metrics.mean_relative_error; }, "%.3f");
  print_table(
      "LSE max |error| against float64 (nats)", order, cells, arguments.seqs,
      [](const Cell& cell) { return cell.lse_max_abs_error; }, "%.4f");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const std::exception& error) {
    std::fprintf(stderr, "intfa_accuracy_model: %s\n", error.what());
    return 2;
  }
}
