#include "attention/config_choice.hpp"

#include <cstdint>
#include <optional>

#include "common/log.hpp"
#include "tune/database_file.hpp"

namespace intfa::attention {
namespace {

std::optional<KernelConfig> tuned_config(const SpecRequest& request,
                                         const AttentionProblem& problem,
                                         const device::DeviceInfo& device,
                                         const tune::TuningDatabase& database) {
  if (database.empty()) return std::nullopt;
  const tune::DeviceKey key = tune::DeviceKey::of(device);
  const tune::ProblemBucket bucket{request, tune::seq_bucket(problem.seq_q, problem.seq_kv)};
  const tune::TuningEntry* entry = database.lookup(key, bucket);
  if (entry == nullptr) return std::nullopt;
  const KernelConfig& config = entry->best.config;
  try {
    validate_config(make_spec(request, config), device.max_shared_bytes_per_block_optin);
  } catch (const Error& error) {
    log::warn_once("tune:unfit:" + entry->bucket.to_string() + config.to_string(),
                   "the tuned config " + config.to_string() + " for " + entry->bucket.to_string() +
                       " cannot run on " + key.to_string() + " (" + error.what() +
                       "); the heuristic's config is used instead");
    return std::nullopt;
  }
  if (log::verbose()) {
    log::info("attention config (tuned for " + entry->bucket.to_string() + " on " +
              key.to_string() + "): " + config.to_string());
  }
  return config;
}

bool same_request(const SpecRequest& a, const SpecRequest& b) {
  return a.arch == b.arch && a.head_dim == b.head_dim && a.variant == b.variant &&
         a.qk_bits == b.qk_bits && a.causal == b.causal && a.varlen == b.varlen &&
         a.v_type == b.v_type && a.output_type == b.output_type && a.numerics == b.numerics;
}

// The last choice of this thread. A serving loop repeats one problem, and the database lookup
// (lock, device key strings, bucket search) would otherwise cost most of a microsecond per call.
struct ChoiceMemo {
  bool valid = false;
  SpecRequest request;
  int seq_bucket = 0;
  const device::DeviceInfo* device = nullptr;
  std::uint64_t database_generation = 0;
  KernelConfig config;
};

}  // namespace

KernelConfig heuristic_config_for(const SpecRequest& request, const AttentionProblem& problem) {
  return heuristic_config(request, tune::seq_bucket(problem.seq_q, problem.seq_kv));
}

KernelConfig choose_config(const SpecRequest& request, const AttentionProblem& problem,
                           const device::DeviceInfo& device) {
  thread_local ChoiceMemo memo;
  const int bucket = tune::seq_bucket(problem.seq_q, problem.seq_kv);
  const std::uint64_t generation = tune::process_database_generation();
  if (memo.valid && memo.device == &device && memo.seq_bucket == bucket &&
      memo.database_generation == generation && same_request(memo.request, request)) {
    return memo.config;
  }
  const KernelConfig config = choose_config(request, problem, device, *tune::process_database());
  memo = ChoiceMemo{true, request, bucket, &device, generation, config};
  return config;
}

KernelConfig choose_config(const SpecRequest& request, const AttentionProblem& problem,
                           const device::DeviceInfo& device, const tune::TuningDatabase& database) {
  if (const auto tuned = tuned_config(request, problem, device, database)) return *tuned;
  const KernelConfig config = heuristic_config_for(request, problem);
  if (log::verbose()) log::info("attention config (heuristic): " + config.to_string());
  return config;
}

VariantChoice choose_auto_variant(const AttentionProblem& problem, int head_dim,
                                  const device::DeviceInfo& device,
                                  const tune::TuningDatabase& database) {
  const int bucket = tune::seq_bucket(problem.seq_q, problem.seq_kv);
  const tune::VariantRow* row =
      database.lookup_variant(tune::DeviceKey::of(device), head_dim, problem.causal, bucket);
  // A row speaks for its bucket and the next one either side (the lengths `intfa tune
  // --variant-table` times by default, 1k, 4k and 16k, so cover every bucket); further away the
  // shipped table, measured there, does.
  if (row != nullptr && row->seq_bucket <= 2 * bucket && bucket <= 2 * row->seq_bucket) {
    return VariantChoice{row->variant, "tuned on this GPU " + row->tuned_at + ": " +
                                           row->to_string() + " for bucket " +
                                           std::to_string(bucket / 1024) + "k"};
  }
  return choose_variant(device.arch, head_dim, problem.seq_q, problem.seq_kv, problem.causal);
}

}  // namespace intfa::attention
