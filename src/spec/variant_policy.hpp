// The variant of intfa.attention's default numerics ("auto"): full or half INT8 per arch, head
// dim, causal flag and sequence bucket, from a table measured end to end (quantize passes, kernel
// and host time: what a caller of intfa.attention waits for). Rotation and K smoothing are not
// the table's: automatic rotation decides per head on the device, K smoothing is always on.
#pragma once

#include <string>

#include "device/arch.hpp"
#include "intfa/numerics.hpp"

namespace intfa::attention {

struct VariantChoice {
  Variant variant = Variant::kFullInt8;
  std::string reason;  // one line: the table's row, or why there is none
};

// The choice for a problem of `head_dim` (the kernel's: 64, 128 or 256), lengths seq_q and
// seq_kv (their tune::seq_bucket) and `causal` on `arch`.
VariantChoice choose_variant(device::Arch arch, int head_dim, int seq_q, int seq_kv, bool causal);

// The table as text, one line per row (`intfa info`).
std::string variant_policy_text(device::Arch arch);

}  // namespace intfa::attention
