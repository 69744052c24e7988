#include "intfa/tune_common.hpp"

#include <cstdio>
#include <map>
#include <string>

#include "device/device_memory.hpp"
#include "device/driver_api.hpp"
#include "intfa/problem_options.hpp"
#include "spec/seq_bucket.hpp"
#include "tune/database_file.hpp"

namespace intfa::cli {

namespace {

std::vector<long> parse_bucket_seqs(const Args& args) {
  std::vector<long> seqs = args.get_int_list("seq", {1024, 4096, 16384}, 1, 1 << 20);
  std::map<int, long> seq_of_bucket;
  for (long seq : seqs) {
    const int bucket = tune::seq_bucket(static_cast<int>(seq), static_cast<int>(seq));
    const auto [other, inserted] = seq_of_bucket.emplace(bucket, seq);
    if (!inserted) {
      throw UsageError("--seq: " + std::to_string(other->second) + " and " + std::to_string(seq) +
                       " fall in one bucket (" + std::to_string(bucket) + ")");
    }
  }
  return seqs;
}

std::filesystem::path tuning_database_path(const Args& args) {
  if (const auto path = args.get("tuning-db")) return std::filesystem::path(*path);
  const auto path = tune::default_database_path();
  if (!path) throw UsageError("no place for the tuning database: pass --tuning-db FILE");
  return *path;
}

}  // namespace

std::vector<std::string> tune_grid_values() {
  return {"head-dims", "seq",      "variants",  "batch", "heads",
          "repeats",   "budget-s", "tuning-db", "json"};
}

TuneGrid parse_tune_grid(const Args& args, const std::vector<std::string>& default_variants) {
  TuneGrid grid;
  grid.head_dims = parse_head_dims(args, {64, 128});
  grid.seqs = parse_bucket_seqs(args);
  grid.causal_values = parse_causal_list(args, {false, true});
  grid.variants = parse_variant_list(args, default_variants);
  grid.batch = static_cast<int>(args.get_int("batch", 4, 1, 4096));
  grid.heads = static_cast<int>(args.get_int("heads", 32, 1, 4096));
  grid.repeats = static_cast<int>(args.get_int("repeats", 20, 1, 10000));
  grid.budget_s = args.get_double("budget-s", 0);
  if (!(grid.budget_s >= 0)) throw UsageError("--budget-s: expected seconds >= 0");
  grid.force = args.flag("force");
  grid.database = tuning_database_path(args);
  grid.json_path = args.get("json");
  return grid;
}

std::optional<tune::TuningDatabase> start_tuning_run(const char* command,
                                                     const std::filesystem::path& path) {
  std::string reason;
  if (!device::driver_available(&reason)) {
    std::fprintf(stderr, "%s: needs a GPU (%s)\n", command, reason.c_str());
    return std::nullopt;
  }
  device::use_primary_context();
  try {
    return tune::read_database_file(path).value_or(tune::TuningDatabase{});
  } catch (const tune::DatabaseError& error) {
    std::fprintf(stderr,
                 "intfa tune: will not overwrite a file that is not a tuning database this build "
                 "reads: %s\n(move it away, or pass --tuning-db FILE)\n",
                 error.what());
    return std::nullopt;
  }
}

namespace {

constexpr double kModelRelativeL2 = 1e-3;
constexpr double kLseAbsoluteError = 1e-3;

}  // namespace

std::string wrong_output(const reference::CheckResult& result) {
  char text[160];
  if (result.unwritten_outputs > 0) {
    std::snprintf(text, sizeof text, "%zu output elements never written", result.unwritten_outputs);
  } else if (result.vs_model.non_finite > 0) {
    std::snprintf(text, sizeof text, "%zu non-finite outputs", result.vs_model.non_finite);
  } else if (!(result.vs_model.relative_l2 <= kModelRelativeL2)) {
    std::snprintf(text, sizeof text, "relative L2 %.3g against the quantized model (> %g)",
                  result.vs_model.relative_l2, kModelRelativeL2);
  } else if (result.lse_infinity_mismatches > 0) {
    std::snprintf(text, sizeof text, "%zu rows with a wrong infinite LSE",
                  result.lse_infinity_mismatches);
  } else if (!(result.lse_max_abs_error <= kLseAbsoluteError)) {
    std::snprintf(text, sizeof text, "LSE off by %.3g (> %g)", result.lse_max_abs_error,
                  kLseAbsoluteError);
  } else {
    return "";
  }
  return text;
}

}  // namespace intfa::cli
