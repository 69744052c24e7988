// The tuning database as a value: its key (device and problem bucket), the sequence bucketing,
// merging, lookup, and parsing that names the bad member of any bad input.
#include "tune/tuning_database.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/json.hpp"
#include "support/timing.hpp"
#include "tune/tune_test_support.hpp"

namespace intfa::tune {
namespace {

using testing::d128_request;
using testing::entry_for;
using testing::h100;
using testing::variant_row_for;

constexpr KernelConfig kFast{64, 128, 4, 2};
constexpr KernelConfig kOther{128, 32, 8, 3};

TuningDatabase two_bucket_database() {
  TuningDatabase database;
  database.merge(entry_for(d128_request(), 1024, kOther));
  database.merge(entry_for(d128_request(), 4096, kFast));
  return database;
}

// The message of the DatabaseError `text` is refused with.
std::string refusal(const std::string& text) {
  try {
    TuningDatabase::parse(text);
  } catch (const DatabaseError& error) {
    return error.what();
  }
  return "(accepted)";
}

// A valid one-entry document with member `name` of entries[0] replaced by `value` (removed when
// `value` is empty).
std::string with_member(const std::string& name, const std::string& value) {
  json::Value document = two_bucket_database().to_json();
  json::Value entries = json::Value::array();
  json::Value entry = json::Value::object();
  for (const auto& [key, member] : document.at("entries").as_array().at(0).as_object()) {
    if (key != name) entry.set(key, member);
  }
  if (!value.empty()) entry.set(name, json::parse(value));
  entries.push_back(entry);
  document.set("entries", entries);
  return document.dump();
}

TEST(SeqBucket, IsTheLongerLengthRoundedUpToAPowerOfTwoBetween1kAnd16k) {
  EXPECT_EQ(seq_bucket(1, 1), 1024);
  EXPECT_EQ(seq_bucket(1024, 17), 1024);
  EXPECT_EQ(seq_bucket(1025, 1), 2048);
  EXPECT_EQ(seq_bucket(100, 4096), 4096);
  EXPECT_EQ(seq_bucket(4097, 4097), 8192);
  EXPECT_EQ(seq_bucket(8193, 8193), 16384);
  EXPECT_EQ(seq_bucket(1 << 20, 1), 16384);
  EXPECT_TRUE(is_seq_bucket(2048));
  EXPECT_FALSE(is_seq_bucket(3072));
  EXPECT_FALSE(is_seq_bucket(512));
  EXPECT_FALSE(is_seq_bucket(32768));
}

TEST(DeviceKey, IsTheGpuNameArchAndDriverMajorVersion) {
  device::DeviceInfo info = testing::h100_info();
  info.driver_version = 13020;
  EXPECT_EQ(DeviceKey::of(info), h100());
  EXPECT_EQ(DeviceKey::of(info).to_string(), "NVIDIA H100 80GB HBM3, sm_90a, driver 13");
}

TEST(TuningDatabase, RoundTripsThroughJsonWithItsSchemaVersion) {
  const TuningDatabase database = two_bucket_database();
  const std::string text = database.dump();
  // No per-block K entry: the version builds before it read.
  EXPECT_EQ(json::parse(text).at("schema_version").as_int(), TuningDatabase::kOldestSchemaVersion);
  EXPECT_EQ(TuningDatabase::parse(text), database);
  EXPECT_EQ(TuningDatabase::parse(text).entries().at(1).runner_ups.size(), 2u);
}

// A per-block K entry is written with its k_granularity and makes the file version 2, which
// builds from before refuse (they would read the entry as a per-token one); it reads back as
// written, and a per-token entry of the same bucket is another entry.
TEST(TuningDatabase, PerBlockKEntriesMakeTheFileVersion2) {
  TuningDatabase database = two_bucket_database();
  attention::SpecRequest per_block = d128_request();
  per_block.numerics.k_granularity = KScaleGranularity::kPerBlock;
  database.merge(entry_for(per_block, 1024, kFast));
  const json::Value document = database.to_json();
  EXPECT_EQ(document.at("schema_version").as_int(), numerics_schema_version());
  EXPECT_EQ(numerics_schema_version(), 2);  // k_granularity's
  std::size_t per_block_entries = 0;
  for (const json::Value& entry : document.at("entries").as_array()) {
    const json::Value* member = entry.find("k_granularity");
    if (member != nullptr && member->as_string() == "block") ++per_block_entries;
  }
  EXPECT_EQ(per_block_entries, 1u);
  const TuningDatabase read = TuningDatabase::parse(database.dump());
  EXPECT_EQ(read, database);
  EXPECT_EQ(read.entries().size(), 3u);
}

// Variant rows (intfa tune --variant-table) make the file version 3, which builds from before
// refuse (they would drop the rows when they re-write it); they read back as written, beside the
// entries, and a file without them is the version its entries need.
TEST(TuningDatabase, VariantRowsRoundTripAndMakeTheFileVersion3) {
  TuningDatabase database = two_bucket_database();
  EXPECT_EQ(database.to_json().find("variant_rows"), nullptr);
  database.merge(variant_row_for(128, false, 4096, Variant::kFullInt8));
  database.merge(variant_row_for(64, true, 1024));
  const json::Value document = database.to_json();
  EXPECT_EQ(document.at("schema_version").as_int(), TuningDatabase::kVariantRowsSchemaVersion);
  EXPECT_EQ(TuningDatabase::kSchemaVersion, 3);
  ASSERT_EQ(document.at("variant_rows").as_array().size(), 2u);
  const json::Value& row = document.at("variant_rows").as_array().at(0);
  EXPECT_EQ(row.at("variant").as_string(), "full_int8");
  EXPECT_EQ(row.at("measured").as_array().at(1).at("variant").as_string(), "half_int8");
  const TuningDatabase read = TuningDatabase::parse(database.dump());
  EXPECT_EQ(read, database);
  EXPECT_EQ(read.entries().size(), 2u);
  EXPECT_EQ(read.variant_rows().size(), 2u);
  TuningDatabase changed = read;
  changed.merge(variant_row_for(128, false, 4096, Variant::kHalfInt8));
  EXPECT_FALSE(changed == read);
}

TEST(TuningDatabase, VariantRowLookupTakesTheBucketElseTheNearestOfTheSameHeadDimAndCausalFlag) {
  TuningDatabase database;
  database.merge(variant_row_for(128, false, 1024, Variant::kHalfInt8));
  database.merge(variant_row_for(128, false, 16384, Variant::kFullInt8));
  database.merge(variant_row_for(64, false, 4096, Variant::kFullInt8));
  EXPECT_EQ(database.lookup_variant(h100(), 128, false, 1024)->variant, Variant::kHalfInt8);
  EXPECT_EQ(database.lookup_variant(h100(), 128, false, 2048)->seq_bucket, 1024);
  // 4k is two steps from each: the longer.
  EXPECT_EQ(database.lookup_variant(h100(), 128, false, 4096)->seq_bucket, 16384);
  EXPECT_EQ(database.lookup_variant(h100(), 64, false, 16384)->seq_bucket, 4096);
  EXPECT_EQ(database.lookup_variant(h100(), 128, true, 1024), nullptr);
  EXPECT_EQ(database.lookup_variant(h100(), 256, false, 1024), nullptr);
  DeviceKey other = h100();
  other.driver_major = 12;
  EXPECT_EQ(database.lookup_variant(other, 128, false, 1024), nullptr);
  // A re-measured row replaces its bucket's.
  database.merge(variant_row_for(128, false, 1024, Variant::kFullInt8));
  EXPECT_EQ(database.variant_rows().size(), 3u);
  EXPECT_EQ(database.lookup_variant(h100(), 128, false, 1024)->variant, Variant::kFullInt8);
  EXPECT_NE(
      database.lookup_variant(h100(), 128, false, 1024)
          ->to_string()
          .find("d128 seq<=1024: full_int8 (full_int8 1.000 ms 1.40%, half_int8 1.020 ms 0.90%"),
      std::string::npos)
      << database.lookup_variant(h100(), 128, false, 1024)->to_string();
}

TEST(TuningDatabaseParse, NamesTheBadMemberOfAVariantRow) {
  const auto with_row_member = [](const std::string& name, const std::string& value) {
    TuningDatabase database;
    database.merge(variant_row_for(128, false, 4096));
    json::Value document = database.to_json();
    json::Value row = json::Value::object();
    for (const auto& [key, member] : document.at("variant_rows").as_array().at(0).as_object()) {
      if (key != name) row.set(key, member);
    }
    if (!value.empty()) row.set(name, json::parse(value));
    json::Value rows = json::Value::array();
    rows.push_back(row);
    document.set("variant_rows", rows);
    return document.dump();
  };
  const struct {
    const char* member;
    const char* value;
    const char* expected;
  } cases[] = {
      {"head_dim", "96", "variant_rows[0].head_dim"},
      {"seq_bucket", "3000", "variant_rows[0].seq_bucket"},
      {"variant", "\"quarter\"", "variant_rows[0].variant"},
      {"variant", "\"fp8\"", "variant_rows[0].variant"},
      {"accuracy_floor", "2", "variant_rows[0].accuracy_floor"},
      {"measured", "[]", "variant_rows[0].measured"},
      {"measured", "[{\"variant\": \"half_int8\", \"median_ms\": -1, \"relative_l2\": 0.01}]",
       "variant_rows[0].measured[0].median_ms"},
      {"measured", "[{\"variant\": \"full_int8\", \"median_ms\": 1}]",
       "variant_rows[0].measured[0].relative_l2"},
      {"tuned_at", "", "variant_rows[0].tuned_at"},
      {"causal", "1", "variant_rows[0].causal"},
  };
  for (const auto& c : cases) {
    const std::string message = refusal(with_row_member(c.member, c.value));
    EXPECT_NE(message.find(c.expected), std::string::npos)
        << c.member << " = " << c.value << ": " << message;
  }
  // A time must be positive (pick_variant's rule); an error past 100% is read as measured.
  EXPECT_NE(refusal(with_row_member(
                        "measured",
                        "[{\"variant\": \"half_int8\", \"median_ms\": 0, \"relative_l2\": 0.01}]"))
                .find("variant_rows[0].measured[0].median_ms"),
            std::string::npos);
  EXPECT_EQ(
      refusal(with_row_member(
          "measured", "[{\"variant\": \"half_int8\", \"median_ms\": 1, \"relative_l2\": 1.5}]")),
      "(accepted)");
  // Rows belong to version 3 files.
  json::Value old_version = json::parse(with_row_member("tuned_at", "\"x\""));
  old_version.set("schema_version", 2);
  EXPECT_NE(refusal(old_version.dump()).find("variant_rows"), std::string::npos)
      << refusal(old_version.dump());
  // The chosen variant must be one of those measured.
  const std::string unmeasured = refusal(with_row_member(
      "measured", "[{\"variant\": \"full_int8\", \"median_ms\": 1, \"relative_l2\": 0.01}]"));
  EXPECT_NE(unmeasured.find("variant_rows[0].variant"), std::string::npos) << unmeasured;
  json::Value document = json::parse(with_row_member("tuned_at", "\"x\""));
  document.set("variant_rows", json::Value::object());
  EXPECT_NE(refusal(document.dump()).find("variant_rows"), std::string::npos);
  // Two rows of one GPU and bucket.
  json::Value twice = json::parse(with_row_member("tuned_at", "\"x\""));
  json::Value rows = twice.at("variant_rows");
  rows.push_back(rows.as_array().at(0));
  twice.set("variant_rows", rows);
  EXPECT_NE(refusal(twice.dump()).find("the same GPU and bucket as variant_rows[0]"),
            std::string::npos)
      << refusal(twice.dump());
}

TEST(TuningDatabase, WritesOnlyTheNumericsTheVariantReads) {
  attention::SpecRequest half = d128_request();
  half.variant = Variant::kHalfInt8;
  half.v_type = DType::kBF16;
  half.output_type = DType::kBF16;
  TuningDatabase database;
  database.merge(entry_for(half, 2048, kFast));
  const json::Value entry = database.to_json().at("entries").as_array().at(0);
  EXPECT_EQ(entry.at("v_dtype").as_string(), "bf16");
  EXPECT_EQ(entry.find("p_encoding"), nullptr);
  EXPECT_EQ(TuningDatabase::parse(database.dump()), database);

  const json::Value full = two_bucket_database().to_json().at("entries").as_array().at(0);
  EXPECT_EQ(full.at("p_encoding").as_string(), "u8");
  EXPECT_EQ(full.find("v_dtype"), nullptr);
}

TEST(TuningDatabase, MergeReplacesTheSameBucketAndKeepsTheOthers) {
  TuningDatabase database = two_bucket_database();
  database.merge(entry_for(d128_request(), 4096, kOther, 0.5));
  ASSERT_EQ(database.entries().size(), 2u);
  EXPECT_EQ(database.find(h100(), {d128_request(), 4096})->best.config, kOther);
  EXPECT_EQ(database.find(h100(), {d128_request(), 1024})->best.config, kOther);

  database.merge(entry_for(d128_request(true), 4096, kFast));
  EXPECT_EQ(database.entries().size(), 3u);
}

TEST(TuningDatabase, MergingADatabaseKeepsItsBucketsAndTakesTheOthersNewer) {
  TuningDatabase mine = two_bucket_database();
  TuningDatabase theirs;
  theirs.merge(entry_for(d128_request(), 1024, kFast, 0.25));
  theirs.merge(entry_for(d128_request(), 8192, kFast));
  mine.merge(theirs);
  EXPECT_EQ(mine.entries().size(), 3u);
  EXPECT_EQ(mine.find(h100(), {d128_request(), 1024})->best.median_ms, 0.25);
}

TEST(TuningDatabase, TheKeyIsTheGpuArchDriverMajorAndBucket) {
  const TuningDatabase database = two_bucket_database();
  const ProblemBucket bucket{d128_request(), 4096};
  EXPECT_NE(database.find(h100(), bucket), nullptr);
  DeviceKey other = h100();
  other.gpu_name = "NVIDIA H100 PCIe";
  EXPECT_EQ(database.find(other, bucket), nullptr);
  other = h100();
  other.driver_major = 12;
  EXPECT_EQ(database.find(other, bucket), nullptr);
  EXPECT_EQ(database.find(h100(), {d128_request(), 2048}), nullptr);
  EXPECT_EQ(database.find(h100(), {d128_request(true), 4096}), nullptr);
  attention::SpecRequest bf16 = d128_request();
  bf16.output_type = DType::kBF16;
  EXPECT_EQ(database.find(h100(), {bf16, 4096}), nullptr);
  attention::SpecRequest int4 = d128_request();
  int4.qk_bits = 4;
  EXPECT_EQ(database.find(h100(), {int4, 4096}), nullptr);
}

TEST(TuningDatabase, NumericsSplitBucketsOnlyWhenTheySelectAnotherKernel) {
  TuningDatabase database;
  attention::SpecRequest half = d128_request();
  half.variant = Variant::kHalfInt8;
  database.merge(entry_for(half, 4096, kFast));
  database.merge(entry_for(d128_request(), 4096, kOther));

  attention::SpecRequest half_s8 = half;
  half_s8.numerics.p_encoding = PEncoding::kSigned127;  // half INT8 does not quantize P
  ASSERT_NE(database.find(h100(), {half_s8, 4096}), nullptr);
  EXPECT_EQ(database.find(h100(), {half_s8, 4096})->best.config, kFast);

  attention::SpecRequest full_s8 = d128_request();
  full_s8.numerics.p_encoding = PEncoding::kSigned127;
  EXPECT_EQ(database.find(h100(), {full_s8, 4096}), nullptr);
  attention::SpecRequest per_block = d128_request();
  per_block.numerics.v_granularity = VScaleGranularity::kPerBlock;
  EXPECT_EQ(database.find(h100(), {per_block, 4096}), nullptr);
  attention::SpecRequest full_bf16_v = d128_request();
  full_bf16_v.v_type = DType::kBF16;  // full INT8 reads V as INT8
  EXPECT_NE(database.find(h100(), {full_bf16_v, 4096}), nullptr);
}

TEST(TuningDatabase, LookupTakesTheBucketElseTheNearestTunedLengthOfTheSameKernel) {
  const TuningDatabase database = two_bucket_database();  // 1024: kOther, 4096: kFast
  EXPECT_EQ(database.lookup(h100(), {d128_request(), 4096})->best.config, kFast);
  EXPECT_EQ(database.lookup(h100(), {d128_request(), 16384})->best.config, kFast);
  EXPECT_EQ(database.lookup(h100(), {d128_request(), 1024})->best.config, kOther);
  // 2048 is one step from both: the longer one wins.
  EXPECT_EQ(database.lookup(h100(), {d128_request(), 2048})->best.config, kFast);
  EXPECT_EQ(database.lookup(h100(), {d128_request(true), 4096}), nullptr);
  DeviceKey other = h100();
  other.driver_major = 14;
  EXPECT_EQ(database.lookup(other, {d128_request(), 4096}), nullptr);
}

TEST(TuningDatabaseParse, RefusesAnotherSchemaVersionNamingIt) {
  for (int version : {0, TuningDatabase::kSchemaVersion + 1}) {
    json::Value document = two_bucket_database().to_json();
    document.set("schema_version", version);
    try {
      TuningDatabase::parse(document.dump());
      FAIL() << "accepted schema version " << version;
    } catch (const DatabaseError& error) {
      EXPECT_EQ(error.field(), "schema_version");
      EXPECT_EQ(error.value(), std::to_string(version));
    }
  }
}

TEST(TuningDatabaseParse, RefusesTextThatIsNotJsonWithTheOffset) {
  EXPECT_NE(refusal("{\"schema_version\": 1,").find("byte"), std::string::npos);
  EXPECT_NE(refusal(""), "(accepted)");
  EXPECT_NE(refusal("[]").find("tuning database"), std::string::npos);
}

TEST(TuningDatabaseParse, NamesTheBadMemberOfAnEntry) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"gpu", ""},
      {"gpu", "\"\""},
      {"arch", "\"sm_75\""},
      {"driver_major", "0"},
      {"head_dim", "96"},
      {"causal", "1"},
      {"variant", "\"int8\""},
      {"qk_bits", "6"},
      {"output_dtype", "\"f32\""},
      {"p_encoding", "\"u4\""},
      {"p_scale", "1"},
      {"v_granularity", "\"row\""},
      {"seq_bucket", "3000"},
      {"seq_bucket", "65536"},
      {"config", "[64, 128, 4, 2]"},
      {"config", "{\"block_m\": 64, \"block_n\": 128, \"warps\": 4}"},
      {"config", "{\"block_m\": 64.5, \"block_n\": 128, \"warps\": 4, \"stages\": 2}"},
      {"config", "{\"block_m\": 1e300, \"block_n\": 128, \"warps\": 4, \"stages\": 2}"},
      {"median_ms", "-1"},
      {"median_ms", "\"fast\""},
      {"runner_ups", "{}"},
      {"runner_ups", "[{\"config\": {}, \"median_ms\": 1}]"},
      {"measured_on", "{\"batch\": 4, \"heads\": 0, \"seq\": 4096}"},
      {"tuned_at", "20261123"},
  };
  for (const auto& [name, value] : cases) {
    const std::string message = refusal(with_member(name, value));
    EXPECT_NE(message.find("entries[0]." + name), std::string::npos)
        << name << " = " << value << ": " << message;
  }
}

// A numerics member absent is its option's default (include/intfa/numerics.hpp), present or not
// in the file; another value is another bucket.
TEST(TuningDatabaseParse, ANumericsMemberAbsentIsItsDefault) {
  const TuningDatabase written = two_bucket_database();
  const attention::SpecRequest& request = written.entries().at(0).bucket.request;
  ASSERT_EQ(request.variant, Variant::kFullInt8);
  ASSERT_EQ(request.numerics.p_scale, AttentionNumerics{}.p_scale);
  const TuningDatabase without = TuningDatabase::parse(with_member("p_scale", ""));
  EXPECT_EQ(without.entries().at(0).bucket.request.numerics, request.numerics);
  const TuningDatabase running = TuningDatabase::parse(with_member("p_scale", "\"running\""));
  EXPECT_EQ(running.entries().at(0).bucket.request.numerics.p_scale, PScaleReference::kRunningMax);
}

// The runtime reads the database on the first attention_forward: a 2 MiB file once stalled it for
// 75 s. One of 1 MiB, an entry of 55,200 members, is refused within the parser's budget.
TEST(TuningDatabaseParse, AMebibyteFileIsReadWithinTheBudget) {
  const std::string text =
      "{\"schema_version\": 1, \"entries\": [" + intfa::testing::wide_json_object(55200) + "]}";
  ASSERT_GE(text.size(), std::size_t{1} << 20);
  const double ms = intfa::testing::least_ms([&] { EXPECT_NE(refusal(text), "(accepted)"); });
  EXPECT_LT(ms, 50 * intfa::testing::kSanitizerSlowdown);
}

TEST(TuningDatabaseParse, RefusesTwoEntriesForOneBucket) {
  json::Value document = two_bucket_database().to_json();
  json::Value entries = document.at("entries");
  entries.push_back(entries.as_array().at(0));
  document.set("entries", entries);
  const std::string message = refusal(document.dump());
  EXPECT_NE(message.find("entries[2]"), std::string::npos) << message;
  EXPECT_NE(message.find("entries[0]"), std::string::npos) << message;
}

TEST(TuningDatabaseParse, ThrowsOnlyDatabaseErrorForAnyPrefixOrByteFlipOfAValidFile) {
  const std::string text = two_bucket_database().dump();
  // Every proper prefix of the document (dump() ends it with a newline, which is not part of it).
  const std::size_t document_size = text.size() - 1;
  for (std::size_t length = 0; length < document_size; length += 7) {
    EXPECT_THROW(TuningDatabase::parse(text.substr(0, length)), DatabaseError) << length;
  }
  for (std::size_t at = 0; at < text.size(); at += 3) {
    std::string flipped = text;
    flipped[at] = static_cast<char>(flipped[at] ^ 0x5A);
    try {
      TuningDatabase::parse(flipped);
    } catch (const DatabaseError&) {
    } catch (const std::exception& other) {
      ADD_FAILURE() << "byte " << at << ": " << other.what();
    }
  }
}

}  // namespace
}  // namespace intfa::tune
