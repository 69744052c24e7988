// Entries and devices for the tuning tests (one H100 and a full-INT8 d128 kernel unless a test
// changes them), and a look into captured log lines.
#pragma once

#include <string>
#include <vector>

#include "device/device_info.hpp"
#include "tune/tuning_database.hpp"

namespace intfa::tune::testing {

// Whether any of `lines` (captured log messages) contains `text`.
inline bool any_contains(const std::vector<std::string>& lines, const std::string& text) {
  for (const std::string& line : lines) {
    if (line.find(text) != std::string::npos) return true;
  }
  return false;
}

inline DeviceKey h100() {
  return DeviceKey{"NVIDIA H100 80GB HBM3", device::Arch::kSm90a, 13};
}

inline device::DeviceInfo h100_info() {
  device::DeviceInfo info;
  info.name = "NVIDIA H100 80GB HBM3";
  info.arch = device::Arch::kSm90a;
  info.compute_major = 9;
  info.driver_version = 13000;
  info.max_shared_bytes_per_block_optin = 232448;
  info.registers_per_sm = 65536;
  return info;
}

inline attention::SpecRequest d128_request(bool causal = false) {
  attention::SpecRequest request;
  request.arch = device::Arch::kSm90a;
  request.head_dim = 128;
  request.causal = causal;
  return request;
}

inline TuningEntry entry_for(const attention::SpecRequest& request, int seq_bucket,
                             const KernelConfig& best, double best_ms = 1.0) {
  TuningEntry entry;
  entry.device = h100();
  entry.bucket = ProblemBucket{request, seq_bucket};
  entry.best = TimedConfig{best, best_ms};
  entry.runner_ups = {TimedConfig{KernelConfig{128, 64, 8, 2}, best_ms * 1.25},
                      TimedConfig{KernelConfig{64, 32, 4, 3}, best_ms * 1.5}};
  entry.measured_on = MeasuredShape{4, 32, seq_bucket};
  entry.tuned_at = "2026-11-23T10:41:07Z";
  return entry;
}

// A variant row of the H100 that chose `chosen` between full INT8 (1 ms, 1.4%) and half INT8
// (1.02 ms, 0.9%): the row's choice is what it says, whatever pick_variant would make of them.
inline VariantRow variant_row_for(int head_dim, bool causal, int seq_bucket,
                                  Variant chosen = Variant::kHalfInt8) {
  VariantRow row;
  row.device = h100();
  row.head_dim = head_dim;
  row.causal = causal;
  row.seq_bucket = seq_bucket;
  row.variant = chosen;
  row.measured = {{Variant::kFullInt8, 1.0, 0.014}, {Variant::kHalfInt8, 1.02, 0.009}};
  row.measured_on = MeasuredShape{4, 32, seq_bucket};
  row.tuned_at = "2026-11-29T11:00:00Z";
  return row;
}

}  // namespace intfa::tune::testing
