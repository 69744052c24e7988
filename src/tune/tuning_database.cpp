#include "tune/tuning_database.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <utility>

#include "common/json.hpp"
#include "common/json_members.hpp"
#include "numerics/numerics.hpp"

namespace intfa::tune {
namespace {

// --- Names of the public enums in the file: the numerics options by their tables
// (numerics/option_names.hpp: written by name, read by name or alias), the output types here ---

template <typename Enum>
struct Named {
  Enum value;
  const char* name;
};

constexpr Named<DType> kOutputTypes[] = {{DType::kF16, "f16"}, {DType::kBF16, "bf16"}};

template <typename Enum, std::size_t N>
std::string name_of(Enum value, const Named<Enum> (&names)[N]) {
  for (const Named<Enum>& named : names) {
    if (named.value == value) return named.name;
  }
  throw InternalError("a tuning database value has no name");
}

template <typename Enum, std::size_t N>
std::string names_text(const Named<Enum> (&names)[N]) {
  std::string text;
  for (const Named<Enum>& named : names)
    text += (text.empty() ? "" : ", ") + std::string(named.name);
  return text;
}

// --- Reading members; every failure names the member's path ---

constexpr std::size_t kMaxNameChars = 256;
constexpr int kMaxConfigValue = 1024;
constexpr int kMaxShapeValue = 1 << 28;

[[noreturn]] void fail(const json::MemberProblem& problem) {
  throw DatabaseError(problem.path, problem.missing ? "(missing)" : problem.shown,
                      problem.expectation);
}

// The shared member checks (common/json_members.hpp), raising DatabaseError.
const json::MemberReader kReader(fail);

std::string shown(const json::Value& value) { return json::MemberReader::shown(value); }

void require_object(const json::Value& value, const std::string& field) {
  kReader.require_object(value, field);
}

const json::Value& member(const json::Value& object, const std::string& where, const char* name) {
  return kReader.member(object, where, name);
}

int integer_member(const json::Value& object, const std::string& where, const char* name,
                   int min_value, int max_value) {
  return static_cast<int>(kReader.integer(object, where, name, min_value, max_value));
}

double milliseconds_member(const json::Value& object, const std::string& where, const char* name) {
  return kReader.non_negative(object, where, name);
}

bool bool_member(const json::Value& object, const std::string& where, const char* name) {
  return kReader.boolean(object, where, name);
}

std::string string_member(const json::Value& object, const std::string& where, const char* name) {
  return kReader.string(object, where, name, kMaxNameChars, true);
}

template <typename Enum, std::size_t N>
Enum enum_member(const json::Value& object, const std::string& where, const char* name,
                 const Named<Enum> (&names)[N]) {
  const json::Value& value = member(object, where, name);
  if (value.is_string()) {
    for (const Named<Enum>& named : names) {
      if (value.as_string() == named.name) return named.value;
    }
  }
  throw DatabaseError(where + name, shown(value), "expected one of " + names_text(names));
}

template <typename Enum>
Enum option_member(const json::Value& object, const std::string& where, const char* name) {
  const json::Value& value = member(object, where, name);
  if (value.is_string()) {
    if (const auto parsed = parse_option<Enum>(value.as_string())) return *parsed;
  }
  throw DatabaseError(where + name, shown(value), "expected one of " + option_names_text<Enum>(", "));
}

device::Arch arch_member(const json::Value& object, const std::string& where) {
  const json::Value& value = member(object, where, "arch");
  if (value.is_string()) {
    if (const auto arch = device::parse_arch(value.as_string())) return *arch;
  }
  throw DatabaseError(where + "arch", shown(value), "expected " + device::arch_names());
}

// --- Entry members ---

KernelConfig config_from_json(const json::Value& value, const std::string& field) {
  require_object(value, field);
  const std::string where = field + ".";
  KernelConfig config;
  config.block_m = integer_member(value, where, "block_m", 1, kMaxConfigValue);
  config.block_n = integer_member(value, where, "block_n", 1, kMaxConfigValue);
  config.warps = integer_member(value, where, "warps", 1, kMaxConfigValue);
  config.stages = integer_member(value, where, "stages", 1, kMaxConfigValue);
  // Absent in databases written before the Hopper kernel existed: those are portable configs.
  if (const json::Value* path = value.find("path")) {
    if (!path->is_string() || (path->as_string() != "wgmma" && path->as_string() != "mma_sync")) {
      throw DatabaseError(where + "path", shown(*path), "expected \"mma_sync\" or \"wgmma\"");
    }
    config.path = path->as_string() == "wgmma" ? KernelPath::kWgmma : KernelPath::kMmaSync;
  }
  return config;
}

json::Value config_to_json(const KernelConfig& config) {
  json::Value object = json::Value::object();
  object.set("block_m", config.block_m);
  object.set("block_n", config.block_n);
  object.set("warps", config.warps);
  object.set("stages", config.stages);
  object.set("path", config.path == KernelPath::kWgmma ? "wgmma" : "mma_sync");
  return object;
}

TimedConfig timed_from_json(const json::Value& object, const std::string& where) {
  return TimedConfig{config_from_json(member(object, where, "config"), where + "config"),
                     milliseconds_member(object, where, "median_ms")};
}

void write_timed(json::Value& object, const TimedConfig& timed) {
  object.set("config", config_to_json(timed.config));
  object.set("median_ms", timed.median_ms);
}

std::vector<TimedConfig> runner_ups_from_json(const json::Value& object, const std::string& where) {
  const json::Value& list = member(object, where, "runner_ups");
  if (!list.is_array()) throw DatabaseError(where + "runner_ups", shown(list), "expected an array");
  std::vector<TimedConfig> runner_ups;
  for (const json::Value& item : list.as_array()) {
    const std::string field = where + "runner_ups[" + std::to_string(runner_ups.size()) + "]";
    require_object(item, field);
    runner_ups.push_back(timed_from_json(item, field + "."));
  }
  return runner_ups;
}

MeasuredShape shape_from_json(const json::Value& object, const std::string& where) {
  const json::Value& value = member(object, where, "measured_on");
  require_object(value, where + "measured_on");
  const std::string inner = where + "measured_on.";
  return MeasuredShape{integer_member(value, inner, "batch", 1, kMaxShapeValue),
                       integer_member(value, inner, "heads", 1, kMaxShapeValue),
                       integer_member(value, inner, "seq", 1, kMaxShapeValue)};
}

json::Value shape_to_json(const MeasuredShape& shape) {
  json::Value object = json::Value::object();
  object.set("batch", shape.batch);
  object.set("heads", shape.heads);
  object.set("seq", shape.seq);
  return object;
}

int head_dim_member(const json::Value& object, const std::string& where) {
  const int head_dim = integer_member(object, where, "head_dim", 1, kMaxConfigValue);
  if (head_dim != 64 && head_dim != 128 && head_dim != 256) {
    throw DatabaseError(where + "head_dim", std::to_string(head_dim), "expected 64, 128 or 256");
  }
  return head_dim;
}

int seq_bucket_member(const json::Value& object, const std::string& where) {
  const int bucket = integer_member(object, where, "seq_bucket", kMinSeqBucket, kMaxSeqBucket);
  if (!is_seq_bucket(bucket)) {
    throw DatabaseError(where + "seq_bucket", std::to_string(bucket),
                        "expected a power of two in [1024, 16384]");
  }
  return bucket;
}

DeviceKey device_from_json(const json::Value& object, const std::string& where) {
  DeviceKey device;
  device.gpu_name = string_member(object, where, "gpu");
  device.arch = arch_member(object, where);
  device.driver_major = integer_member(object, where, "driver_major", 1, 1000);
  return device;
}

void write_device(json::Value& object, const DeviceKey& device) {
  object.set("gpu", device.gpu_name);
  object.set("arch", device::arch_name(device.arch));
  object.set("driver_major", device.driver_major);
}

// The request fields make_spec reads for the entry's variant; the others keep their defaults.
attention::SpecRequest request_from_json(const json::Value& object, const std::string& where,
                                         device::Arch arch) {
  attention::SpecRequest request;
  request.arch = arch;
  request.head_dim = head_dim_member(object, where);
  request.causal = bool_member(object, where, "causal");
  request.variant = option_member<Variant>(object, where, "variant");
  request.qk_bits = integer_member(object, where, "qk_bits", 4, 8);
  if (request.qk_bits != 4 && request.qk_bits != 8) {
    throw DatabaseError(where + "qk_bits", std::to_string(request.qk_bits), "expected 4 or 8");
  }
  request.output_type = enum_member(object, where, "output_dtype", kOutputTypes);
  if (request.variant == Variant::kHalfInt8) {
    request.v_type = enum_member(object, where, "v_dtype", kOutputTypes);
  }
  // The numerics the variant reads (absent: the default; k_granularity is written only when per
  // block, as in every file before it existed).
  request.numerics =
      numerics_read_by(request.variant, numerics::read_json<DatabaseError>(object, where));
  return request;
}

void write_request(json::Value& object, const attention::SpecRequest& request) {
  object.set("head_dim", request.head_dim);
  object.set("causal", request.causal);
  object.set("variant", option_name(request.variant));
  object.set("qk_bits", request.qk_bits);
  object.set("output_dtype", name_of(request.output_type, kOutputTypes));
  if (request.variant == Variant::kHalfInt8) {
    object.set("v_dtype", name_of(request.v_type, kOutputTypes));
  }
  numerics::write_json(object, request.numerics, request.variant);
}

TuningEntry entry_from_json(const json::Value& value, const std::string& field) {
  require_object(value, field);
  const std::string where = field + ".";
  TuningEntry entry;
  entry.device = device_from_json(value, where);
  entry.bucket.request = request_from_json(value, where, entry.device.arch);
  entry.bucket.seq_bucket = seq_bucket_member(value, where);
  entry.best = timed_from_json(value, where);
  entry.runner_ups = runner_ups_from_json(value, where);
  entry.measured_on = shape_from_json(value, where);
  entry.tuned_at = string_member(value, where, "tuned_at");
  return entry;
}

json::Value entry_to_json(const TuningEntry& entry) {
  json::Value object = json::Value::object();
  write_device(object, entry.device);
  write_request(object, entry.bucket.request);
  object.set("seq_bucket", entry.bucket.seq_bucket);
  write_timed(object, entry.best);
  json::Value runner_ups = json::Value::array();
  for (const TimedConfig& timed : entry.runner_ups) {
    json::Value item = json::Value::object();
    write_timed(item, timed);
    runner_ups.push_back(std::move(item));
  }
  object.set("runner_ups", std::move(runner_ups));
  object.set("measured_on", shape_to_json(entry.measured_on));
  object.set("tuned_at", entry.tuned_at);
  return object;
}

// --- Variant rows ---

// The floor: a relative error in [0, 1].
double floor_member(const json::Value& object, const std::string& where, const char* name) {
  const double value = kReader.non_negative(object, where, name);
  if (!(value <= 1)) {
    throw DatabaseError(where + name, shown(member(object, where, name)),
                        "expected a relative error in [0, 1]");
  }
  return value;
}

// What pick_variant takes: a positive time, a finite error >= 0 (a variant past 100% is recorded
// as measured, as pick_variant took it).
attention::VariantMeasurement measurement_from_json(const json::Value& item,
                                                    const std::string& where) {
  attention::VariantMeasurement measurement;
  measurement.variant = option_member<Variant>(item, where, "variant");
  measurement.median_ms = milliseconds_member(item, where, "median_ms");
  if (!(measurement.median_ms > 0)) {
    throw DatabaseError(where + "median_ms", shown(member(item, where, "median_ms")),
                        "expected a positive time");
  }
  measurement.relative_l2 = kReader.non_negative(item, where, "relative_l2");
  return measurement;
}

VariantRow variant_row_from_json(const json::Value& value, const std::string& field) {
  require_object(value, field);
  const std::string where = field + ".";
  VariantRow row;
  row.device = device_from_json(value, where);
  row.head_dim = head_dim_member(value, where);
  row.causal = bool_member(value, where, "causal");
  row.seq_bucket = seq_bucket_member(value, where);
  row.variant = option_member<Variant>(value, where, "variant");
  row.accuracy_floor = floor_member(value, where, "accuracy_floor");
  const json::Value& list = member(value, where, "measured");
  if (!list.is_array() || list.as_array().empty()) {
    throw DatabaseError(where + "measured", shown(list), "expected a non-empty array");
  }
  bool chosen_measured = false;
  for (const json::Value& item : list.as_array()) {
    const std::string item_field = where + "measured[" + std::to_string(row.measured.size()) + "]";
    require_object(item, item_field);
    const attention::VariantMeasurement measurement = measurement_from_json(item, item_field + ".");
    chosen_measured = chosen_measured || measurement.variant == row.variant;
    row.measured.push_back(measurement);
  }
  if (!chosen_measured) {
    throw DatabaseError(where + "variant", option_name(row.variant),
                        "expected one of the variants in \"measured\"");
  }
  row.measured_on = shape_from_json(value, where);
  row.tuned_at = string_member(value, where, "tuned_at");
  return row;
}

}  // namespace

json::Value variant_row_json(const VariantRow& row) {
  json::Value object = json::Value::object();
  write_device(object, row.device);
  object.set("head_dim", row.head_dim);
  object.set("causal", row.causal);
  object.set("seq_bucket", row.seq_bucket);
  object.set("variant", option_name(row.variant));
  object.set("accuracy_floor", row.accuracy_floor);
  json::Value list = json::Value::array();
  for (const attention::VariantMeasurement& measurement : row.measured) {
    json::Value item = json::Value::object();
    item.set("variant", option_name(measurement.variant));
    item.set("median_ms", measurement.median_ms);
    item.set("relative_l2", measurement.relative_l2);
    list.push_back(std::move(item));
  }
  object.set("measured", std::move(list));
  object.set("measured_on", shape_to_json(row.measured_on));
  object.set("tuned_at", row.tuned_at);
  return object;
}

namespace {

bool same_variant_bucket(const VariantRow& a, const VariantRow& b) {
  return a.device == b.device && a.head_dim == b.head_dim && a.causal == b.causal &&
         a.seq_bucket == b.seq_bucket;
}

// Equal exactly for entries of one device and bucket (the bucket text names every field that
// same_kernel compares but the arch, which the device text names).
std::pair<std::string, std::string> key_of(const TuningEntry& entry) {
  return {entry.device.gpu_name, device::arch_name(entry.device.arch) + " " +
                                     std::to_string(entry.device.driver_major) + " " +
                                     entry.bucket.to_string()};
}

int log2_of(int power_of_two) {
  int steps = 0;
  while ((1 << steps) < power_of_two) ++steps;
  return steps;
}

// The item `matches` takes whose sequence bucket is nearest to `seq_bucket` (the larger of two
// equally near), or nullptr.
template <typename Item, typename Matches, typename BucketOf>
const Item* nearest_bucket(const std::vector<Item>& items, int seq_bucket, Matches matches,
                           BucketOf bucket_of) {
  const Item* nearest = nullptr;
  int nearest_distance = 0;
  for (const Item& item : items) {
    if (!matches(item)) continue;
    const int distance = std::abs(log2_of(bucket_of(item)) - log2_of(seq_bucket));
    const bool nearer = nearest == nullptr || distance < nearest_distance ||
                        (distance == nearest_distance && bucket_of(item) > bucket_of(*nearest));
    if (nearer) {
      nearest = &item;
      nearest_distance = distance;
    }
  }
  return nearest;
}

}  // namespace

// --- Keys ---

DeviceKey DeviceKey::of(const device::DeviceInfo& info) {
  return DeviceKey{info.name, info.arch, info.driver_version / 1000};
}

std::string DeviceKey::to_string() const {
  return gpu_name + ", " + device::arch_name(arch) + ", driver " + std::to_string(driver_major);
}

bool operator==(const DeviceKey& a, const DeviceKey& b) {
  return a.arch == b.arch && a.driver_major == b.driver_major && a.gpu_name == b.gpu_name;
}

std::string kernel_name(const attention::SpecRequest& request) {
  std::string text = "d" + std::to_string(request.head_dim) + (request.causal ? " causal" : "") +
                     " " + option_name(request.variant) + " qk" +
                     std::to_string(request.qk_bits) + " " +
                     name_of(request.output_type, kOutputTypes);
  if (request.variant == Variant::kHalfInt8) text += " v=" + name_of(request.v_type, kOutputTypes);
  return text + numerics::text(request.numerics, request.variant);
}

std::string ProblemBucket::to_string() const {
  return kernel_name(request) + (seq_bucket >= kMaxSeqBucket
                                     ? " seq>" + std::to_string(kMaxSeqBucket / 2)
                                     : " seq<=" + std::to_string(seq_bucket));
}

bool same_kernel(const attention::SpecRequest& a, const attention::SpecRequest& b) {
  return attention::make_spec(a, KernelConfig{}) == attention::make_spec(b, KernelConfig{});
}

bool same_bucket(const ProblemBucket& a, const ProblemBucket& b) {
  return a.seq_bucket == b.seq_bucket && same_kernel(a.request, b.request);
}

bool operator==(const TimedConfig& a, const TimedConfig& b) {
  return a.config == b.config && a.median_ms == b.median_ms;
}

bool operator==(const MeasuredShape& a, const MeasuredShape& b) {
  return a.batch == b.batch && a.heads == b.heads && a.seq == b.seq;
}

std::string VariantRow::to_string() const {
  std::string text = "d" + std::to_string(head_dim) + (causal ? " causal" : "") +
                     (seq_bucket >= kMaxSeqBucket ? " seq>" + std::to_string(kMaxSeqBucket / 2)
                                                  : " seq<=" + std::to_string(seq_bucket)) +
                     ": " + option_name(variant) + " (";
  char part[96];
  for (std::size_t i = 0; i < measured.size(); ++i) {
    std::snprintf(part, sizeof part, "%s%s %.3f ms %.2f%%", i == 0 ? "" : ", ",
                  option_name(measured[i].variant), measured[i].median_ms,
                  100 * measured[i].relative_l2);
    text += part;
  }
  std::snprintf(part, sizeof part, "; floor %.2f%%)", 100 * accuracy_floor);
  return text + part;
}

bool operator==(const VariantRow& a, const VariantRow& b) {
  return same_variant_bucket(a, b) && a.variant == b.variant &&
         a.accuracy_floor == b.accuracy_floor && a.measured == b.measured &&
         a.measured_on == b.measured_on && a.tuned_at == b.tuned_at;
}

bool operator==(const TuningEntry& a, const TuningEntry& b) {
  return a.device == b.device && same_bucket(a.bucket, b.bucket) && a.best == b.best &&
         a.runner_ups == b.runner_ups && a.measured_on == b.measured_on && a.tuned_at == b.tuned_at;
}

// --- The database ---

TuningDatabase TuningDatabase::parse(const std::string& text) {
  json::Value document;
  try {
    document = json::parse(text);
  } catch (const json::ParseError& error) {
    throw DatabaseError("tuning database", "(byte " + std::to_string(error.offset()) + ")",
                        std::string("expected JSON: ") + error.what());
  }
  require_object(document, "tuning database");
  const int version = integer_member(document, "", "schema_version", 0, 1 << 30);
  if (version < kOldestSchemaVersion || version > kSchemaVersion) {
    throw DatabaseError("schema_version", std::to_string(version),
                        "this build reads versions " + std::to_string(kOldestSchemaVersion) +
                            " to " + std::to_string(kSchemaVersion));
  }
  const std::string top_level;  // named, not a temporary: GCC 13 flags a reference returned
                                // from a call with a temporary argument as dangling
  const json::Value& entries = member(document, top_level, "entries");
  if (!entries.is_array()) throw DatabaseError("entries", shown(entries), "expected an array");
  TuningDatabase database;
  std::map<std::pair<std::string, std::string>, std::size_t> seen;
  for (const json::Value& value : entries.as_array()) {
    const std::size_t index = database.entries_.size();
    const std::string field = "entries[" + std::to_string(index) + "]";
    TuningEntry entry = entry_from_json(value, field);
    const auto [previous, inserted] = seen.emplace(key_of(entry), index);
    if (!inserted) {
      throw DatabaseError(
          field, entry.bucket.to_string(),
          "the same GPU and bucket as entries[" + std::to_string(previous->second) + "]");
    }
    database.entries_.push_back(std::move(entry));
  }
  // Version 3 on: absent means none; in an older version's file, not a file this build wrote.
  if (const json::Value* rows = document.find("variant_rows")) {
    if (version < kVariantRowsSchemaVersion) {
      throw DatabaseError("variant_rows", "(present)",
                          "absent below schema_version " +
                              std::to_string(kVariantRowsSchemaVersion) + " (this file says " +
                              std::to_string(version) + ")");
    }
    if (!rows->is_array()) throw DatabaseError("variant_rows", shown(*rows), "expected an array");
    for (const json::Value& value : rows->as_array()) {
      const std::size_t index = database.variant_rows_.size();
      const std::string field = "variant_rows[" + std::to_string(index) + "]";
      VariantRow row = variant_row_from_json(value, field);
      for (std::size_t other = 0; other < index; ++other) {
        if (same_variant_bucket(database.variant_rows_[other], row)) {
          throw DatabaseError(
              field, row.to_string(),
              "the same GPU and bucket as variant_rows[" + std::to_string(other) + "]");
        }
      }
      database.variant_rows_.push_back(std::move(row));
    }
  }
  return database;
}

json::Value TuningDatabase::to_json() const {
  json::Value document = json::Value::object();
  int version = kOldestSchemaVersion;
  for (const TuningEntry& e : entries_) {
    version = std::max(
        version, numerics::schema_version(e.bucket.request.numerics, e.bucket.request.variant));
  }
  // Builds before variant rows would drop them when they re-write the file: they refuse it.
  if (!variant_rows_.empty()) version = std::max(version, kVariantRowsSchemaVersion);
  document.set("schema_version", version);
  json::Value list = json::Value::array();
  for (const TuningEntry& entry : entries_) list.push_back(entry_to_json(entry));
  document.set("entries", std::move(list));
  if (!variant_rows_.empty()) {
    json::Value rows = json::Value::array();
    for (const VariantRow& row : variant_rows_) rows.push_back(variant_row_json(row));
    document.set("variant_rows", std::move(rows));
  }
  return document;
}

std::string TuningDatabase::dump() const {
  return to_json().dump() + "\n";
}

void TuningDatabase::merge(const TuningEntry& entry) {
  TuningEntry normalized = entry;
  normalized.bucket.request.arch = entry.device.arch;
  for (TuningEntry& existing : entries_) {
    if (existing.device == normalized.device && same_bucket(existing.bucket, normalized.bucket)) {
      existing = std::move(normalized);
      return;
    }
  }
  entries_.push_back(std::move(normalized));
}

void TuningDatabase::merge(const VariantRow& row) {
  for (VariantRow& existing : variant_rows_) {
    if (same_variant_bucket(existing, row)) {
      existing = row;
      return;
    }
  }
  variant_rows_.push_back(row);
}

void TuningDatabase::merge(const TuningDatabase& other) {
  for (const TuningEntry& entry : other.entries_) merge(entry);
  for (const VariantRow& row : other.variant_rows_) merge(row);
}

const TuningEntry* TuningDatabase::find(const DeviceKey& device,
                                        const ProblemBucket& bucket) const {
  for (const TuningEntry& entry : entries_) {
    if (entry.device == device && same_bucket(entry.bucket, bucket)) return &entry;
  }
  return nullptr;
}

const TuningEntry* TuningDatabase::lookup(const DeviceKey& device,
                                          const ProblemBucket& bucket) const {
  return nearest_bucket(
      entries_, bucket.seq_bucket,
      [&](const TuningEntry& entry) {
        return entry.device == device && same_kernel(entry.bucket.request, bucket.request);
      },
      [](const TuningEntry& entry) { return entry.bucket.seq_bucket; });
}

const VariantRow* TuningDatabase::lookup_variant(const DeviceKey& device, int head_dim, bool causal,
                                                 int seq_bucket) const {
  return nearest_bucket(
      variant_rows_, seq_bucket,
      [&](const VariantRow& row) {
        return row.device == device && row.head_dim == head_dim && row.causal == causal;
      },
      [](const VariantRow& row) { return row.seq_bucket; });
}

}  // namespace intfa::tune
