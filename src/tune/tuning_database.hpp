// The tuning database: which tile config won, on which GPU, for which problem bucket. A plain value
// (no I/O here: database_file.hpp reads and writes it), serialised as JSON:
//
//   {"schema_version": 1, "entries": [{
//      "gpu": "NVIDIA H100 80GB HBM3", "arch": "sm_90a", "driver_major": 13,
//      "head_dim": 128, "causal": false, "variant": "full_int8", "qk_bits": 8,
//      "output_dtype": "f16",
//      "p_encoding": "u8", "p_scale": "running", "v_granularity": "tensor",       (full INT8)
//      "v_dtype": "f16",                                                          (half INT8)
//      "seq_bucket": 4096,
//      "config": {"block_m": 64, "block_n": 128, "warps": 4, "stages": 2}, "median_ms": 2.51,
//      "runner_ups": [{"config": {...}, "median_ms": 2.63}, ...],   fastest first
//      "measured_on": {"batch": 4, "heads": 32, "seq": 4096},
//      "tuned_at": "2026-11-23T10:41:07Z"}]}
//
// `intfa tune --variant-table` adds rows of variant "auto"'s choice per GPU (schema version 3):
//
//   "variant_rows": [{"gpu": ..., "arch": "sm_90a", "driver_major": 13,
//      "head_dim": 128, "causal": false, "seq_bucket": 4096, "variant": "full_int8",
//      "accuracy_floor": 0.015,
//      "measured": [{"variant": "full_int8", "median_ms": 1.83, "relative_l2": 0.0142},
//                   {"variant": "half_int8", "median_ms": 1.90, "relative_l2": 0.0091}],
//      "measured_on": {"batch": 4, "heads": 32, "seq": 4096}, "tuned_at": "..."}]
//
// Numerics options are written by the names of numerics/option_names.hpp and read by name or alias
// ("running_max" and "tile_max", the spellings of files written before 2026-11-24, still load).
//
// An entry is keyed by the device (GPU name, arch, driver major version) and the problem bucket:
// every request field that selects a different kernel (the numerics fields only for the variant
// that reads them, as make_spec does) and the sequence bucket.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "device/device_info.hpp"
#include "intfa/attention.hpp"
#include "intfa/errors.hpp"
#include "spec/attention_spec.hpp"
#include "spec/seq_bucket.hpp"
#include "spec/variant_policy.hpp"

namespace intfa::tune {

// Why a tuning database cannot be read: not JSON, another schema version, a member missing or out
// of range. field() names the member ("entries[2].config.block_m").
class DatabaseError : public InvalidArgument {
 public:
  DatabaseError(const std::string& field, const std::string& value, std::string expectation)
      : InvalidArgument(field, value, expectation), expectation_(std::move(expectation)) {}
  const std::string& expectation() const noexcept { return expectation_; }
  // The same error placed in `file`: its field becomes "FILE: field".
  DatabaseError in_file(const std::string& file) const {
    return DatabaseError(file + ": " + field(), value(), expectation_);
  }

 private:
  std::string expectation_;
};

struct DeviceKey {
  std::string gpu_name;  // as cuDeviceGetName reports it
  device::Arch arch = device::Arch::kSm80;
  int driver_major = 0;  // 13 for driver version 13000

  static DeviceKey of(const device::DeviceInfo& info);
  std::string to_string() const;  // "NVIDIA H100 80GB HBM3, sm_90a, driver 13"
  friend bool operator==(const DeviceKey& a, const DeviceKey& b);
};

struct ProblemBucket {
  attention::SpecRequest request;  // its arch is the device's
  int seq_bucket = kMinSeqBucket;

  // "d128 causal full_int8 qk8 f16 p=u8 p-scale=running v-scale=tensor seq<=4096"
  std::string to_string() const;
};

// The kernel a request selects, as bucket descriptions and progress lines name it:
// "d128 causal full_int8 qk8 f16 p=u8 p-scale=running v-scale=tensor".
std::string kernel_name(const attention::SpecRequest& request);

// Whether `a` and `b` select one kernel (every request field make_spec reads is equal).
bool same_kernel(const attention::SpecRequest& a, const attention::SpecRequest& b);
bool same_bucket(const ProblemBucket& a, const ProblemBucket& b);

struct TimedConfig {
  KernelConfig config;
  double median_ms = 0;
  friend bool operator==(const TimedConfig& a, const TimedConfig& b);
};

// The problem the times were measured on (the bucket's representative).
struct MeasuredShape {
  int batch = 0;
  int heads = 0;
  int seq = 0;
  friend bool operator==(const MeasuredShape& a, const MeasuredShape& b);
};

struct TuningEntry {
  DeviceKey device;
  ProblemBucket bucket;
  TimedConfig best;
  std::vector<TimedConfig> runner_ups;  // fastest first
  MeasuredShape measured_on;
  std::string tuned_at;  // ISO 8601 UTC
  friend bool operator==(const TuningEntry& a, const TuningEntry& b);
};

// Which variant "auto" runs on one GPU for a head dim, causal flag and sequence bucket
// (attention::pick_variant over what each variant measured there), in place of the shipped table.
struct VariantRow {
  DeviceKey device;
  int head_dim = 128;
  bool causal = false;
  int seq_bucket = kMinSeqBucket;
  Variant variant = Variant::kFullInt8;  // the choice
  double accuracy_floor = attention::kDefaultAccuracyFloor;
  std::vector<attention::VariantMeasurement> measured;  // one per variant timed
  MeasuredShape measured_on;
  std::string tuned_at;  // ISO 8601 UTC

  // "d128 causal seq<=4096: full_int8 (full_int8 1.830 ms 1.42%, half_int8 1.900 ms 0.91%;
  // floor 1.50%)"
  std::string to_string() const;
  friend bool operator==(const VariantRow& a, const VariantRow& b);
};

// A variant row as the database file holds it (`intfa tune --variant-table --json` too).
json::Value variant_row_json(const VariantRow& row);

class TuningDatabase {
 public:
  // The schema's version is the highest of the numerics options' since_schema (include/intfa/
  // numerics.hpp: version 2 added k_granularity) and the variant rows' (3). A database is written
  // as the version its entries need (the highest since_schema of the options they name; 3 with
  // variant rows), so that older builds read
  // it while it names nothing they do not know, and refuse it once it does (they would take the
  // option for its default). This build reads every version up to its own; a member absent is
  // its option's default.
  // Variant rows came with version 3. A numerics option added after them takes version 4 or later
  // (since_schema), so that files naming it are refused by this build, not read as its default.
  static constexpr int kVariantRowsSchemaVersion = 3;
  static_assert(numerics_schema_version() != kVariantRowsSchemaVersion,
                "schema version 3 is the variant rows': give the new numerics option 4");
  static constexpr int kSchemaVersion = numerics_schema_version() > kVariantRowsSchemaVersion
                                            ? numerics_schema_version()
                                            : kVariantRowsSchemaVersion;
  static constexpr int kOldestSchemaVersion = 1;

  // The database `text` describes. Pure (no I/O, no global state): whatever `text` holds, it
  // returns or throws DatabaseError, nothing else.
  static TuningDatabase parse(const std::string& text);
  json::Value to_json() const;
  std::string dump() const;  // pretty JSON with a final newline

  const std::vector<TuningEntry>& entries() const { return entries_; }
  const std::vector<VariantRow>& variant_rows() const { return variant_rows_; }
  bool empty() const { return entries_.empty() && variant_rows_.empty(); }

  // Replaces the entry (row) of the same device and bucket (a re-tune), else appends.
  void merge(const TuningEntry& entry);
  void merge(const VariantRow& row);
  void merge(const TuningDatabase& other);

  // The entry of exactly this device and bucket, or nullptr.
  const TuningEntry* find(const DeviceKey& device, const ProblemBucket& bucket) const;
  // For a call: the entry of this device and bucket, else the one of the same device and kernel
  // whose sequence bucket is nearest (the larger of two equally near), else nullptr. A config
  // tuned at another length beats the untuned heuristic for the same kernel.
  const TuningEntry* lookup(const DeviceKey& device, const ProblemBucket& bucket) const;

  // The variant row of this device, head dim and causal flag whose sequence bucket is nearest to
  // `seq_bucket` (the larger of two equally near), or nullptr.
  const VariantRow* lookup_variant(const DeviceKey& device, int head_dim, bool causal,
                                   int seq_bucket) const;

  friend bool operator==(const TuningDatabase& a, const TuningDatabase& b) {
    return a.entries_ == b.entries_ && a.variant_rows_ == b.variant_rows_;
  }

 private:
  std::vector<TuningEntry> entries_;
  std::vector<VariantRow> variant_rows_;
};

}  // namespace intfa::tune
