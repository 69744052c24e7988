// `intfa tune --variant-table`: on this GPU, what each variant costs end to end
// (attention_forward_16bit: the quantize passes and the kernel, as intfa.attention runs them) and
// how accurate it is, per head dim, causal flag and sequence bucket; records variant "auto"'s
// choice there (attention::pick_variant) in the tuning database, where intfa::auto_variant reads
// it before the shipped table (src/spec/variant_policy.cpp).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "attention/config_choice.hpp"
#include "common/json.hpp"
#include "device/device_info.hpp"
#include "device/device_memory.hpp"
#include "device/driver_api.hpp"
#include "intfa/args.hpp"
#include "intfa/attention_workload.hpp"
#include "intfa/commands.hpp"
#include "intfa/errors.hpp"
#include "intfa/problem_options.hpp"
#include "intfa/tune_common.hpp"
#include "numerics/option_names.hpp"
#include "reference/attention_check.hpp"
#include "spec/seq_bucket.hpp"
#include "spec/variant_policy.hpp"
#include "tune/database_file.hpp"
#include "tune/tuner.hpp"

namespace intfa::cli {

const char* const kVariantTableUsage =
    "usage: intfa tune --variant-table [options]\n\n"
    "On this GPU, for each head dim, causal flag and sequence length: times intfa.attention's\n"
    "call (attention_forward_16bit: the quantize passes and the kernel, with the default options)\n"
    "under each variant, in turns of about 2 ms that alternate between the variants (the order\n"
    "reversed each round); measures each variant's relative L2 against float64 attention of the\n"
    "original inputs, the worse of N(0,1) and of keys with channel offsets and outlier channels\n"
    "(B=1, 2 heads, at most 2k tokens; a variant whose output does not match the quantized CPU\n"
    "model is dropped); and records which variant \"auto\" runs there: the fastest within\n"
    "--accuracy-floor, or the more accurate of two within 2% of each other's speed.\n"
    "intfa.attention (variant \"auto\", the default) then takes this GPU's row for its\n"
    "bucket, or the nearest bucket's, before the shipped table; `intfa info` lists the rows and\n"
    "INTFA_LOG=1 says which one a call took.\n"
    "Rows the database already has for this GPU (measured with these variants and floor) are\n"
    "skipped unless --force. A database with variant rows is schema version 3: intfa builds\n"
    "from before variant rows ignore the whole file, its tuned tile configs too (one warning).\n\n"
    "  --head-dims LIST (64,128)     --seq LIST (1k,4k,16k)   --causal[=off,on] (both)\n"
    "  --variants LIST (full,half)   the candidates\n"
    "  --batch B (4) --heads H (32)  the problem each row is timed on\n"
    "  --repeats R (20)              turns per variant\n"
    "  --accuracy-floor PCT (1.5)    relative L2 in percent\n"
    "  --dtype f16|bf16 (f16)        Q, K, V and the output\n"
    "  --budget-s S                  start no row after S seconds (0, the default: no limit)\n"
    "  --force                       re-measure rows the database already has\n"
    "  --tuning-db FILE              default: $INTFA_TUNE_DB, else tuning.json in the cache dir\n"
    "  --json FILE                   every row's measurements, as JSON\n\n"
    "Prints a line per row on stderr and a table with the shipped table's choice beside each.\n"
    "Exit 1 when a row was not recorded (a variant dropped by its check, or an error), or on an\n"
    "error. Rows do not record --dtype: f16 and bf16 share them.\n";

namespace {

namespace fs = std::filesystem;

constexpr int kWarmupCalls = 3;
constexpr double kTurnMs = 2.0;
constexpr int kMaxCallsPerTurn = 64;
// The accuracy check's length: float64 attention of 2 heads on the host stays under a second.
constexpr int kAccuracyMaxSeq = 2048;

struct VariantTableOptions : TuneGrid {
  DType io_type = DType::kF16;
  double accuracy_floor = attention::kDefaultAccuracyFloor;
};

VariantTableOptions parse_options(const Arguments& arguments) {
  Grammar grammar;
  grammar.values = tune_grid_values();
  for (const char* name : {"dtype", "accuracy-floor"}) grammar.values.push_back(name);
  grammar.flags = {"variant-table", "force"};
  grammar.switch_lists = {"causal"};
  const Args args(arguments, grammar);
  VariantTableOptions options;
  static_cast<TuneGrid&>(options) = parse_tune_grid(args, {"full", "half"});
  const std::string dtype = args.get_or("dtype", "f16");
  if (dtype != "f16" && dtype != "bf16") throw UsageError("--dtype: expected f16 or bf16");
  options.io_type = dtype == "bf16" ? DType::kBF16 : DType::kF16;
  const double floor_percent = args.get_double("accuracy-floor", 100 * options.accuracy_floor);
  if (!(floor_percent > 0 && floor_percent <= 100)) {
    throw UsageError("--accuracy-floor: expected a percentage in (0, 100]");
  }
  options.accuracy_floor = floor_percent / 100;
  validate_grid(AttentionProblem{}, AttentionOptions{}, options.variants, options.head_dims,
                options.seqs, options.batch, options.heads);
  return options;
}

// One row's problem on the GPU, N(0,1) 16-bit inputs, timed end to end under each variant.
class EndToEndTimer {
 public:
  EndToEndTimer(const AttentionProblem& problem, const std::vector<Variant>& variants,
                DType io_type)
      : problem_(problem),
        variants_(variants),
        workload_(problem, AttentionOptions{}, io_type, reference::InputFamily::kNormal,
                  reference::fresh_seed()),
        inputs_(workload_.inputs_16bit()) {
    std::size_t bytes = 0;
    for (Variant variant : variants_) {
      bytes = std::max(bytes, attention_workspace_bytes(at(variant)));
    }
    workspace_ = device::DeviceBuffer(bytes);
    workspace_bytes_ = bytes;
  }

  // Median milliseconds per call of each variant (in the order given), over `rounds` turns each.
  std::vector<double> median_ms(int rounds) {
    // One untimed call each first: the kernels' compile or load is no part of a turn's estimate.
    for (Variant variant : variants_) turn_ms(variant, 1);
    std::vector<int> calls_per_turn;
    for (Variant variant : variants_) {
      const double warm_ms = turn_ms(variant, kWarmupCalls) / kWarmupCalls;
      calls_per_turn.push_back(std::clamp(
          static_cast<int>(std::ceil(kTurnMs / std::max(warm_ms, 1e-3))), 1, kMaxCallsPerTurn));
    }
    std::vector<std::vector<double>> per_call(variants_.size());
    for (int round = 0; round < rounds; ++round) {
      for (std::size_t turn = 0; turn < variants_.size(); ++turn) {
        const std::size_t i = round % 2 == 0 ? turn : variants_.size() - 1 - turn;
        per_call[i].push_back(turn_ms(variants_[i], calls_per_turn[i]) / calls_per_turn[i]);
      }
    }
    std::vector<double> medians;
    for (std::vector<double>& times : per_call) {
      std::sort(times.begin(), times.end());
      medians.push_back(times[times.size() / 2]);
    }
    return medians;
  }

 private:
  AttentionProblem at(Variant variant) const {
    AttentionProblem problem = problem_;
    problem.variant = variant;
    return problem;
  }

  double turn_ms(Variant variant, int calls) {
    const AttentionProblem problem = at(variant);
    start_.record(stream_.get());
    for (int i = 0; i < calls; ++i) {
      attention_forward_16bit(problem, inputs_, workspace_.get(), workspace_bytes_, stream_.get());
    }
    stop_.record(stream_.get());
    return stop_.elapsed_ms_since(start_);
  }

  AttentionProblem problem_;
  std::vector<Variant> variants_;
  AttentionWorkload workload_;
  AttentionInputs inputs_;
  device::DeviceBuffer workspace_;
  std::size_t workspace_bytes_ = 0;
  device::Stream stream_;
  device::Event start_, stop_;
};

struct Accuracy {
  double relative_l2 = 0;
  // What is wrong with the output against the quantized model, or why it could not run; or "".
  std::string wrong;
};

// The input families a variant's error is the worst of: N(0,1), and keys with channel offsets and
// a few outlier channels in Q and K (where full INT8 at d=64 leaves the floor).
constexpr reference::InputFamily kAccuracyFamilies[] = {
    reference::InputFamily::kNormal, reference::InputFamily::kOffsetsAndOutliers};

// `variant`'s error on the row's head dim and causal flag at up to kAccuracyMaxSeq tokens: the
// worst of kAccuracyFamilies, with the tile config a call would take there (the model steps tile by
// tile as the kernel does).
Accuracy measure_accuracy(const AttentionProblem& timed, Variant variant, DType io_type,
                          const device::DeviceInfo& info) {
  reference::CheckCase check;
  check.problem = timed;
  check.problem.variant = variant;
  check.problem.batch = 1;
  check.problem.heads_q = check.problem.heads_kv = 2;
  check.problem.seq_q = check.problem.seq_kv = std::min(timed.seq_q, kAccuracyMaxSeq);
  check.io_type = io_type;
  Accuracy accuracy;
  try {
    check.options.config = attention::choose_config(
        spec_request(info.arch, check.problem, check.options, io_type), check.problem, info);
    for (reference::InputFamily family : kAccuracyFamilies) {
      check.inputs = family;
      check.seed = reference::fresh_seed();
      const reference::CheckResult result = reference::run_check(check);
      const std::string wrong = wrong_output(result);
      if (!wrong.empty()) return Accuracy{0, reference::family_name(family) + ": " + wrong};
      accuracy.relative_l2 = std::max(accuracy.relative_l2, result.vs_f64.relative_l2);
    }
  } catch (const Error& error) {  // a variant this GPU or head dim does not serve: dropped
    return Accuracy{0, error.what()};
  }
  return accuracy;
}

// Whether `row` was measured as `options` ask: every requested variant, the same floor.
bool measured_as_asked(const tune::VariantRow& row, const VariantTableOptions& options) {
  if (row.accuracy_floor != options.accuracy_floor) return false;
  for (Variant variant : options.variants) {
    const bool measured =
        std::any_of(row.measured.begin(), row.measured.end(),
                    [&](const attention::VariantMeasurement& m) { return m.variant == variant; });
    if (!measured) return false;
  }
  return true;
}

struct RowResult {
  tune::VariantRow row;
  // "tuned", "already tuned", "over budget", "not recorded: ..." (a variant dropped), "error: ..."
  std::string status;
  std::vector<std::string> dropped;  // "half_int8: relative L2 ... against the quantized model"
};

std::string row_name(int head_dim, bool causal, long seq) {
  return "d" + std::to_string(head_dim) + (causal ? " causal" : "") + " seq " + std::to_string(seq);
}

void print_table(const std::vector<RowResult>& results, device::Arch arch) {
  std::printf("\n%-22s %-44s %-10s %-10s\n", "row", "measured (ms, relative L2)", "auto",
              "shipped");
  for (const RowResult& result : results) {
    const tune::VariantRow& row = result.row;
    const std::string name = row_name(row.head_dim, row.causal, row.measured_on.seq);
    if (result.status != "tuned") {
      std::printf("%-22s %s\n", name.c_str(), result.status.c_str());
      continue;
    }
    std::string measured;
    char part[64];
    for (const attention::VariantMeasurement& m : row.measured) {
      std::snprintf(part, sizeof part, "%s%s %.3f %.2f%%", measured.empty() ? "" : ", ",
                    option_name(m.variant), m.median_ms, 100 * m.relative_l2);
      measured += part;
    }
    const attention::VariantChoice shipped = attention::choose_variant(
        arch, row.head_dim, row.measured_on.seq, row.measured_on.seq, row.causal);
    std::printf("%-22s %-44s %-10s %-10s\n", name.c_str(), measured.c_str(),
                option_name(row.variant), option_name(shipped.variant));
  }
}

json::Value results_json(const std::vector<RowResult>& results) {
  json::Value list = json::Value::array();
  for (const RowResult& result : results) {
    const tune::VariantRow& row = result.row;
    json::Value item = json::Value::object();
    item.set("gpu", row.device.gpu_name);
    item.set("head_dim", row.head_dim);
    item.set("causal", row.causal);
    item.set("seq", row.measured_on.seq);
    item.set("status", result.status);
    if (result.status == "tuned") item.set("row", tune::variant_row_json(row));
    json::Value dropped = json::Value::array();
    for (const std::string& reason : result.dropped) dropped.push_back(reason);
    item.set("dropped", std::move(dropped));
    list.push_back(std::move(item));
  }
  return list;
}

// Measures one row: every variant's time and error; the row as recorded, or the status why not.
RowResult measure_row(const VariantTableOptions& options, const device::DeviceInfo& info,
                      int head_dim, bool causal, long seq) {
  RowResult result;
  tune::VariantRow& row = result.row;
  row.device = tune::DeviceKey::of(info);
  row.head_dim = head_dim;
  row.causal = causal;
  row.seq_bucket = tune::seq_bucket(static_cast<int>(seq), static_cast<int>(seq));
  row.accuracy_floor = options.accuracy_floor;
  row.measured_on = tune::MeasuredShape{options.batch, options.heads, static_cast<int>(seq)};
  AttentionProblem problem = grid_point(AttentionProblem{}, Variant::kFullInt8, head_dim, seq,
                                        options.batch, options.heads);
  problem.causal = causal;
  std::vector<Variant> matching;
  std::vector<double> errors;
  for (Variant variant : options.variants) {
    const Accuracy accuracy = measure_accuracy(problem, variant, options.io_type, info);
    if (!accuracy.wrong.empty()) {
      result.dropped.push_back(std::string(option_name(variant)) + ": " + accuracy.wrong);
      continue;
    }
    matching.push_back(variant);
    errors.push_back(accuracy.relative_l2);
  }
  if (!result.dropped.empty()) {  // a kernel bug or a variant this GPU cannot run: no row
    result.status =
        "not recorded: " + std::to_string(result.dropped.size()) + " variant(s) dropped (above)";
    return result;
  }
  EndToEndTimer timer(problem, matching, options.io_type);
  const std::vector<double> medians = timer.median_ms(options.repeats);
  for (std::size_t i = 0; i < matching.size(); ++i) {
    row.measured.push_back(attention::VariantMeasurement{matching[i], medians[i], errors[i]});
  }
  row.variant = attention::pick_variant(row.measured, options.accuracy_floor);
  row.tuned_at = tune::utc_now();
  result.status = "tuned";
  return result;
}

}  // namespace

bool wants_variant_table(const Arguments& arguments) {
  return mode_flag(arguments, "variant-table");
}

int run_variant_table_tune(const Arguments& arguments) {
  const VariantTableOptions options = parse_options(arguments);
  const std::optional<tune::TuningDatabase> read =
      start_tuning_run("intfa tune --variant-table", options.database);
  if (!read) return 1;
  const device::DeviceInfo& info = device::cached_device_info(device::current_device());
  const tune::TuningDatabase& existing = *read;
  const tune::DeviceKey device = tune::DeviceKey::of(info);
  std::printf("measuring variant rows on %s into %s\n", info.to_string().c_str(),
              options.database.c_str());
  std::fflush(stdout);

  const std::size_t total =
      options.head_dims.size() * options.causal_values.size() * options.seqs.size();
  const auto started = std::chrono::steady_clock::now();
  const auto elapsed_s = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  };
  std::vector<RowResult> results;
  bool failed = false;
  for (int head_dim : options.head_dims) {
    for (bool causal : options.causal_values) {
      for (long seq : options.seqs) {
        const std::string step = "[" + std::to_string(results.size() + 1) + "/" +
                                 std::to_string(total) + "] " + row_name(head_dim, causal, seq);
        const int bucket = tune::seq_bucket(static_cast<int>(seq), static_cast<int>(seq));
        const tune::VariantRow* known = existing.lookup_variant(device, head_dim, causal, bucket);
        RowResult result;
        if (!options.force && known != nullptr && known->seq_bucket == bucket &&
            measured_as_asked(*known, options)) {
          result.row = *known;
          result.status = "already tuned";
        } else if (options.budget_s > 0 && elapsed_s() > options.budget_s) {
          result.row.head_dim = head_dim;
          result.row.causal = causal;
          result.row.measured_on.seq = static_cast<int>(seq);
          result.status = "over budget";
        } else {
          try {
            result = measure_row(options, info, head_dim, causal, seq);
          } catch (const std::exception& error) {  // out of memory at this size, say: the others
            result.row.head_dim = head_dim;
            result.row.causal = causal;
            result.row.measured_on.seq = static_cast<int>(seq);
            result.status = std::string("error: ") + error.what();
          }
          for (const std::string& dropped : result.dropped) {
            std::fprintf(stderr, "tune: %s: dropped %s\n", step.c_str(), dropped.c_str());
          }
          if (result.status == "tuned") tune::record_variant_row(options.database, result.row);
          failed = failed || result.status != "tuned";
        }
        std::fprintf(
            stderr, "tune: %s: %s\n", step.c_str(),
            result.status == "tuned" ? result.row.to_string().c_str() : result.status.c_str());
        results.push_back(result);
      }
    }
  }
  print_table(results, info.arch);
  const auto over_budget = std::count_if(
      results.begin(), results.end(), [](const RowResult& r) { return r.status == "over budget"; });
  if (over_budget > 0) {
    std::printf("the %.0f s budget was spent: %ld rows not started (listed above)\n",
                options.budget_s, static_cast<long>(over_budget));
  }
  if (options.json_path) json::write_file(*options.json_path, results_json(results));
  return failed ? 1 : 0;
}

}  // namespace intfa::cli
