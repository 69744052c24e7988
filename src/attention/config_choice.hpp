// Which tile config serves a call: the tuning database's entry for this GPU and problem bucket
// when there is one (tune::TuningDatabase::lookup: the bucket, else the nearest tuned length of the
// same kernel), else the heuristic. INTFA_LOG=1 says which. A tuned config that does not fit this
// device (a database copied from another machine, a driver that lowered a limit) is passed over
// with one warning. Variant "auto" is chosen the same way: this GPU's tuned variant row first, the
// shipped table second.
#pragma once

#include "device/device_info.hpp"
#include "intfa/attention.hpp"
#include "spec/attention_spec.hpp"
#include "spec/variant_policy.hpp"
#include "tune/tuning_database.hpp"

namespace intfa::attention {

// The heuristic's config for `problem`'s sequence bucket (tune::seq_bucket): what choose_config
// falls back to, and what the tools time and compile when no config is named.
KernelConfig heuristic_config_for(const SpecRequest& request, const AttentionProblem& problem);

// Reads the process-wide database (tune::process_database()).
KernelConfig choose_config(const SpecRequest& request, const AttentionProblem& problem,
                           const device::DeviceInfo& device);

KernelConfig choose_config(const SpecRequest& request, const AttentionProblem& problem,
                           const device::DeviceInfo& device, const tune::TuningDatabase& database);

// Variant "auto" for `problem` (its kernel head dim `head_dim`): the database's variant row for
// this GPU, head dim and causal flag nearest to the problem's sequence bucket, if at most one
// bucket away (`intfa tune --variant-table`), else the shipped table (choose_variant). The reason
// names the row.
VariantChoice choose_auto_variant(const AttentionProblem& problem, int head_dim,
                                  const device::DeviceInfo& device,
                                  const tune::TuningDatabase& database);

}  // namespace intfa::attention
