#include "intfa/tune_common.hpp"

#include <cstdio>
#include <map>
#include <string>

#include "spec/seq_bucket.hpp"
#include "tune/database_file.hpp"

namespace intfa::cli {

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
