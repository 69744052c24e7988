// What `intfa tune` and `intfa tune --variant-table` share: their --seq and --tuning-db options
// and the check of a kernel's output against the quantized model.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "intfa/args.hpp"
#include "intfa/numerics.hpp"
#include "reference/attention_check.hpp"
#include "tune/tuning_database.hpp"

namespace intfa::cli {

// The grid and the run that both modes of `intfa tune` take: --head-dims, --seq (one length per
// sequence bucket), --causal, --variants, --batch, --heads, --repeats, --budget-s, --force,
// --tuning-db (default: tune::default_database_path()), --json.
struct TuneGrid {
  std::vector<int> head_dims;
  std::vector<long> seqs;
  std::vector<bool> causal_values;
  std::vector<Variant> variants;
  int batch = 4;
  int heads = 32;
  int repeats = 20;
  double budget_s = 0;
  bool force = false;
  std::filesystem::path database;
  std::optional<std::string> json_path;
};

// The grammar of TuneGrid's options: these values, the flag "force", the switch list "causal".
std::vector<std::string> tune_grid_values();

// TuneGrid from `args` (its variants `default_variants` when --variants is absent); a bad value is
// a UsageError naming its option.
TuneGrid parse_tune_grid(const Args& args, const std::vector<std::string>& default_variants);

// The start of a tuning run: a GPU (its primary context made current) and the database at `path`
// to add to (empty where there is no file); nullopt after saying on stderr, as `command`
// ("intfa tune"), why not: no GPU, or a file there that is not a tuning database this build
// reads (never overwritten).
std::optional<tune::TuningDatabase> start_tuning_run(const char* command,
                                                     const std::filesystem::path& path);

// What is wrong with a checked output against the quantized model (a kernel bug, not rounding:
// the bounds of tests/attention/attention_gpu_test.cpp), or "".
std::string wrong_output(const reference::CheckResult& result);

}  // namespace intfa::cli
