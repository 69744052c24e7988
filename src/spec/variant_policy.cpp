#include "spec/variant_policy.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "intfa/errors.hpp"
#include "spec/seq_bucket.hpp"

namespace intfa::attention {
namespace {

// One row: half INT8 up to `half_up_to` tokens (a sequence bucket; 0: never), full INT8 beyond:
// pick_variant's rule on the measurements below. Full INT8 is outside the 1.5% floor at d=64 on
// keys with outlier channels (1.56-1.61% with automatic rotation; half INT8 1.32-1.38%), within
// it at d=128 and d=256.
struct ShippedRow {
  int head_dim;
  bool causal;
  int half_up_to;
};

// sm_90a on the H200, intfa.attention end to end (bench/history/2026-11-29.md, third and fourth
// sessions; ms or TOPS, full / half INT8):
//   d=64:  half everywhere (full INT8 is outside the floor); half / full speed 1.11 at 1k, 1.00
//          at 4k, 0.98 at 16k; causal 1.16, 1.06, 1.05 (`intfa tune --variant-table`, 11:08).
//   d=128: 1k 314/356 TOPS, 4k 613/599, 16k 743/682 (compare_sdpa.py, 08:25): half to 2k;
//          causal 183/219, 471/501, 654/646: half to 8k. At 16k causal half INT8 measured
//          0.965-0.988 of full's speed over three runs (08:25, 11:08, 11:28), two of them
//          inside the rule's 2%: a tie the table leaves at full INT8, the default before.
//   d=256: half faster everywhere: 1.12-1.19x non-causal, 1.12-1.23x causal (tune, 11:08).
constexpr ShippedRow kSm90aRows[] = {
    {64, false, tune::kMaxSeqBucket},
    {64, true, tune::kMaxSeqBucket},
    {128, false, 2048},
    {128, true, 8192},
    {256, false, tune::kMaxSeqBucket},
    {256, true, tune::kMaxSeqBucket},
};

std::string bucket_text(int tokens) {
  return std::to_string(tokens / 1024) + "k";
}

std::string row_text(const ShippedRow& row) {
  const std::string where = "d=" + std::to_string(row.head_dim) + (row.causal ? " causal" : "");
  if (row.half_up_to == 0) return where + ": full INT8";
  if (row.half_up_to >= tune::kMaxSeqBucket) return where + ": half INT8";
  return where + ": half INT8 up to " + bucket_text(row.half_up_to) + " tokens, full INT8 beyond";
}

}  // namespace

Variant pick_variant(const std::vector<VariantMeasurement>& measured, double accuracy_floor) {
  if (measured.empty()) throw InvalidArgument("measured", "(empty)", "expected a variant's times");
  for (const VariantMeasurement& m : measured) {
    if (!(m.median_ms > 0) || !std::isfinite(m.median_ms)) {
      throw InvalidArgument("measured.median_ms", std::to_string(m.median_ms),
                            "expected a positive time");
    }
    if (!(m.relative_l2 >= 0) || !std::isfinite(m.relative_l2)) {
      throw InvalidArgument("measured.relative_l2", std::to_string(m.relative_l2),
                            "expected a finite error >= 0");
    }
  }
  const auto more_accurate = [](const VariantMeasurement& a, const VariantMeasurement& b) {
    return a.relative_l2 < b.relative_l2;
  };
  std::vector<VariantMeasurement> within;
  for (const VariantMeasurement& m : measured) {
    if (m.relative_l2 <= accuracy_floor) within.push_back(m);
  }
  if (within.empty()) {
    return std::min_element(measured.begin(), measured.end(), more_accurate)->variant;
  }
  double fastest_ms = within.front().median_ms;
  for (const VariantMeasurement& m : within) fastest_ms = std::min(fastest_ms, m.median_ms);
  // Speed is 1 / time: at least the share of the fastest's speed.
  std::vector<VariantMeasurement> fast_enough;
  for (const VariantMeasurement& m : within) {
    if (kAccurateVariantSpeedShare * m.median_ms <= fastest_ms) fast_enough.push_back(m);
  }
  return std::min_element(fast_enough.begin(), fast_enough.end(), more_accurate)->variant;
}

VariantChoice choose_variant(device::Arch arch, int head_dim, int seq_q, int seq_kv, bool causal) {
  VariantChoice choice;
  if (arch != device::Arch::kSm90a) {
    choice.reason = "no table for " + device::arch_name(arch) + ": full INT8";
    return choice;
  }
  const int bucket = tune::seq_bucket(seq_q, seq_kv);
  for (const ShippedRow& row : kSm90aRows) {
    if (row.head_dim != head_dim || row.causal != causal) continue;
    choice.variant = bucket <= row.half_up_to ? Variant::kHalfInt8 : Variant::kFullInt8;
    choice.reason = "sm_90a " + row_text(row) + " (bucket " + bucket_text(bucket) + ")";
    return choice;
  }
  choice.reason = "sm_90a d=" + std::to_string(head_dim) + ": not in the table, full INT8";
  return choice;
}

std::string variant_policy_text(device::Arch arch) {
  if (arch != device::Arch::kSm90a) {
    return "variant auto on " + device::arch_name(arch) + ": full INT8 (no table)\n";
  }
  std::string text;
  for (const ShippedRow& row : kSm90aRows) text += "variant auto on sm_90a " + row_text(row) + "\n";
  return text;
}

}  // namespace intfa::attention
