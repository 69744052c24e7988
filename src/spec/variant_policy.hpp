// The variant of intfa.attention's default numerics ("auto"): full or half INT8 per arch, head
// dim, causal flag and sequence bucket, from a table measured end to end (quantize passes, kernel
// and host time: what a caller of intfa.attention waits for). Rotation and K smoothing are not
// the table's: automatic rotation decides per head on the device, K smoothing is always on.
// The shipped table is here; `intfa tune --variant-table` measures rows for one GPU with the same
// rule (pick_variant) into the tuning database, whose rows then come first (intfa::auto_variant).
#pragma once

#include <string>
#include <vector>

#include "device/arch.hpp"
#include "intfa/numerics.hpp"

namespace intfa::attention {

struct VariantChoice {
  Variant variant = Variant::kFullInt8;
  std::string reason;  // one line: the table's row, or why there is none
};

// Speed under an accuracy floor: a row takes the fastest variant within the floor, and the more
// accurate of two within the floor whose speeds are within this share of each other (2%: one
// run's spread; half INT8 has 0.8-0.9% relative L2 where full INT8 has 1.3-1.4% on N(0,1)).
inline constexpr double kAccurateVariantSpeedShare = 0.98;
// The relative L2 (against float64 of the original inputs) a variant must be within on every
// input family measured (`intfa tune --variant-table`: N(0,1) and keys with channel offsets and
// outlier channels) to be chosen for its speed: the default numerics' bound (README, "Accuracy").
inline constexpr double kDefaultAccuracyFloor = 0.015;

// What one variant measured at one shape (`intfa tune --variant-table`).
struct VariantMeasurement {
  Variant variant = Variant::kFullInt8;
  double median_ms = 0;    // attention_forward_16bit: the quantize passes and the kernel
  double relative_l2 = 0;  // against float64 attention of the original inputs (the worst family)
  friend bool operator==(const VariantMeasurement& a, const VariantMeasurement& b) {
    return a.variant == b.variant && a.median_ms == b.median_ms && a.relative_l2 == b.relative_l2;
  }
};

// The rule of every row: among the variants within `accuracy_floor`, the most accurate one that
// is at least kAccurateVariantSpeedShare of the fastest's speed; when none is within the floor,
// the most accurate. Throws InvalidArgument for an empty list or a time that is not positive.
Variant pick_variant(const std::vector<VariantMeasurement>& measured, double accuracy_floor);

// The shipped table's choice for a problem of `head_dim` (the kernel's: 64, 128 or 256), lengths
// seq_q and seq_kv (their tune::seq_bucket) and `causal` on `arch`.
VariantChoice choose_variant(device::Arch arch, int head_dim, int seq_q, int seq_kv, bool causal);

// The table as text, one line per row (`intfa info`).
std::string variant_policy_text(device::Arch arch);

}  // namespace intfa::attention
