// intfa::auto_variant: the variant of a problem on a GPU: the tuning database's row for that GPU
// (`intfa tune --variant-table`) where it has one, else the shipped table of
// src/spec/variant_policy.cpp.
#include <mutex>
#include <set>
#include <string>

#include "attention/config_choice.hpp"
#include "common/log.hpp"
#include "device/device_info.hpp"
#include "intfa/attention.hpp"
#include "numerics/option_names.hpp"
#include "spec/attention_spec.hpp"
#include "tune/database_file.hpp"

namespace intfa {

AutoVariant auto_variant(const AttentionProblem& problem, CUdevice device) {
  const int head_dim = attention::kernel_head_dim(problem.head_dim, "problem.head_dim");
  const attention::VariantChoice choice = attention::choose_auto_variant(
      problem, head_dim, device::cached_device_info(device), *tune::process_database());
  // Said once per row of the table (INTFA_LOG=1), not once per call.
  static std::mutex mutex;
  static std::set<std::string> said;
  {
    const std::lock_guard<std::mutex> lock(mutex);
    if (said.insert(choice.reason).second) {
      log::info(std::string("variant auto: ") + option_name(choice.variant) + " (" + choice.reason +
                ")");
    }
  }
  return AutoVariant{choice.variant, choice.reason};
}

AutoVariant auto_variant(const AttentionProblem& problem) {
  return auto_variant(problem, device::current_device());
}

}  // namespace intfa
