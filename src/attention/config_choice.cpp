#include "attention/config_choice.hpp"

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

}  // namespace

KernelConfig choose_config(const SpecRequest& request, const AttentionProblem& problem,
                           const device::DeviceInfo& device) {
  return choose_config(request, problem, device, *tune::process_database());
}

KernelConfig choose_config(const SpecRequest& request, const AttentionProblem& problem,
                           const device::DeviceInfo& device, const tune::TuningDatabase& database) {
  if (const auto tuned = tuned_config(request, problem, device, database)) return *tuned;
  const KernelConfig config = heuristic_config(request);
  if (log::verbose()) log::info("attention config (heuristic): " + config.to_string());
  return config;
}

}  // namespace intfa::attention
