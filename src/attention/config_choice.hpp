// Which tile config serves a call: the tuning database's entry for this GPU and problem bucket
// when there is one, else the heuristic. INTFA_LOG=1 says which.
#pragma once

#include "attention/attention_spec.hpp"
#include "device/device_info.hpp"
#include "intfa/attention.hpp"

namespace intfa::attention {

KernelConfig choose_config(const SpecRequest& request, const AttentionProblem& problem,
                           const device::DeviceInfo& device);

}  // namespace intfa::attention
