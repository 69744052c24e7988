#include "attention/config_choice.hpp"

#include "common/log.hpp"

namespace intfa::attention {

KernelConfig choose_config(const SpecRequest& request, const AttentionProblem& problem,
                           const device::DeviceInfo& device) {
  (void)problem;
  (void)device;
  const KernelConfig config = heuristic_config(request);
  if (log::verbose()) log::info("attention config (heuristic): " + config.to_string());
  return config;
}

}  // namespace intfa::attention
