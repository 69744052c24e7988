// The runtime's config choice: the tuning database's entry for this GPU and bucket first, the
// heuristic second, INTFA_LOG=1 saying which; a database that cannot be used never fails a call.
#include "attention/config_choice.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "common/json.hpp"
#include "common/log.hpp"
#include "support/temp_dir.hpp"
#include "tune/database_file.hpp"
#include "tune/tune_test_support.hpp"

namespace intfa::attention {
namespace {

namespace fs = std::filesystem;
using intfa::testing::ScopedEnv;
using intfa::testing::TempDir;
using tune::testing::any_contains;
using tune::testing::d128_request;
using tune::testing::entry_for;
using tune::testing::h100_info;

constexpr KernelConfig kTuned{128, 128, 8, 3};

AttentionProblem problem_of_length(int seq) {
  AttentionProblem problem;
  problem.batch = 2;
  problem.heads_q = problem.heads_kv = 16;
  problem.seq_q = problem.seq_kv = seq;
  return problem;
}

tune::TuningDatabase database_with_4k_entry() {
  tune::TuningDatabase database;
  database.merge(entry_for(d128_request(), 4096, kTuned));
  return database;
}

class ConfigChoice : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NE(kTuned, heuristic_config(d128_request())); }
  void TearDown() override { tune::reset_process_database_for_testing(); }

  // Points the process-wide database at a file holding `text`.
  void use_database_file(const std::string& text) {
    std::ofstream(path(), std::ios::trunc) << text;
    database_env_.emplace("INTFA_TUNE_DB", path().c_str());
    tune::reset_process_database_for_testing();
  }
  fs::path path() const { return directory_.path() / "tuning.json"; }

  const ScopedEnv logging_{"INTFA_LOG", "1"};
  TempDir directory_;
  std::optional<ScopedEnv> database_env_;
};

TEST_F(ConfigChoice, TakesTheDatabaseEntryForThisGpuAndBucketAndLogsIt) {
  const log::ScopedCapture capture;
  const KernelConfig config =
      choose_config(d128_request(), problem_of_length(3000), h100_info(), database_with_4k_entry());
  EXPECT_EQ(config, kTuned);
  EXPECT_TRUE(any_contains(capture.infos(), "attention config (tuned for d128 full_int8"))
      << (capture.infos().empty() ? "" : capture.infos().back());
  EXPECT_TRUE(any_contains(capture.infos(), kTuned.to_string()));
  EXPECT_TRUE(capture.warnings().empty());
}

TEST_F(ConfigChoice, UsesTheHeuristicOnAnotherGpuOrDriverAndLogsIt) {
  device::DeviceInfo other = h100_info();
  other.name = "NVIDIA H100 PCIe";
  device::DeviceInfo newer_driver = h100_info();
  newer_driver.driver_version = 14000;
  for (const device::DeviceInfo& device : {other, newer_driver}) {
    const log::ScopedCapture capture;
    EXPECT_EQ(
        choose_config(d128_request(), problem_of_length(4096), device, database_with_4k_entry()),
        heuristic_config(d128_request()));
    EXPECT_TRUE(any_contains(capture.infos(), "attention config (heuristic)"));
  }
}

TEST_F(ConfigChoice, UsesTheHeuristicForAKernelTheDatabaseDoesNotHave) {
  EXPECT_EQ(choose_config(d128_request(true), problem_of_length(4096), h100_info(),
                          database_with_4k_entry()),
            heuristic_config(d128_request(true)));
}

// Without a tuned entry the heuristic sees the problem's length bucket: on sm_90a, d=128 takes
// its short-sequence config up to 1k tokens and its long one beyond.
TEST_F(ConfigChoice, TheHeuristicSeesTheProblemsSequenceBucket) {
  const tune::TuningDatabase empty;
  for (int seq : {1, 1000, 1024, 1025, 4096, 20000}) {
    const AttentionProblem problem = problem_of_length(seq);
    const KernelConfig expected = heuristic_config(d128_request(), tune::seq_bucket(seq, seq));
    EXPECT_EQ(heuristic_config_for(d128_request(), problem), expected) << seq;
    EXPECT_EQ(choose_config(d128_request(), problem, h100_info(), empty), expected) << seq;
  }
  EXPECT_NE(heuristic_config_for(d128_request(), problem_of_length(1000)),
            heuristic_config_for(d128_request(), problem_of_length(4096)));
}

TEST_F(ConfigChoice, ATunedConfigThatDoesNotFitThisDeviceFallsBackWithOneWarning) {
  device::DeviceInfo small = h100_info();
  small.max_shared_bytes_per_block_optin = shared_bytes(make_spec(d128_request(), kTuned)) - 1;
  const log::ScopedCapture capture;
  for (int call = 0; call < 3; ++call) {
    EXPECT_EQ(
        choose_config(d128_request(), problem_of_length(4096), small, database_with_4k_entry()),
        heuristic_config(d128_request()));
  }
  ASSERT_EQ(capture.warnings().size(), 1u);
  EXPECT_NE(capture.warnings()[0].find(kTuned.to_string()), std::string::npos);
  EXPECT_NE(capture.warnings()[0].find("shared memory"), std::string::npos);
}

TEST_F(ConfigChoice, ReadsTheDatabaseThatIntfaTuneDbNames) {
  use_database_file(database_with_4k_entry().dump());
  EXPECT_EQ(choose_config(d128_request(), problem_of_length(4096), h100_info()), kTuned);
}

TEST_F(ConfigChoice, ACorruptDatabaseFileIsOneWarningAndTheHeuristic) {
  use_database_file("{\"schema_version\": 1, \"entries\": [{\"gpu\": \"NVIDIA");
  const log::ScopedCapture capture;
  for (int call = 0; call < 3; ++call) {
    EXPECT_EQ(choose_config(d128_request(), problem_of_length(4096), h100_info()),
              heuristic_config(d128_request()));
  }
  ASSERT_EQ(capture.warnings().size(), 1u);
  EXPECT_NE(capture.warnings()[0].find(path().string()), std::string::npos);
  EXPECT_TRUE(any_contains(capture.infos(), "attention config (heuristic)"));
}

TEST_F(ConfigChoice, ADatabaseOfAnotherSchemaVersionIsOneWarningAndTheHeuristic) {
  json::Value document = database_with_4k_entry().to_json();
  document.set("schema_version", tune::TuningDatabase::kSchemaVersion + 1);
  use_database_file(document.dump());
  const log::ScopedCapture capture;
  EXPECT_EQ(choose_config(d128_request(), problem_of_length(4096), h100_info()),
            heuristic_config(d128_request()));
  ASSERT_EQ(capture.warnings().size(), 1u);
  EXPECT_NE(capture.warnings()[0].find("schema_version"), std::string::npos);
}

// Variant "auto": this GPU's tuned row for the head dim and causal flag (nearest bucket, at most
// one away) before the shipped table, which serves another GPU, driver, head dim or causal flag.
TEST_F(ConfigChoice, AutoVariantTakesThisGpusTunedRowBeforeTheShippedTable) {
  tune::TuningDatabase database;
  // The shipped sm_90a table takes half INT8 at d=128 up to 2k tokens: the rows say otherwise.
  database.merge(tune::testing::variant_row_for(128, false, 1024, Variant::kFullInt8));
  database.merge(tune::testing::variant_row_for(128, false, 16384, Variant::kHalfInt8));
  const auto choice_at = [&](int seq, bool causal, const device::DeviceInfo& device) {
    AttentionProblem problem = problem_of_length(seq);
    problem.causal = causal;
    return choose_auto_variant(problem, 128, device, database);
  };
  const VariantChoice short_one = choice_at(1000, false, h100_info());
  EXPECT_EQ(short_one.variant, Variant::kFullInt8);
  EXPECT_NE(short_one.reason.find("tuned on this GPU 2026-11-29T11:00:00Z: d128 seq<=1024"),
            std::string::npos)
      << short_one.reason;
  EXPECT_EQ(choice_at(2048, false, h100_info()).variant, Variant::kFullInt8);  // nearest: 1k
  // Two buckets from either row: the shipped table (full INT8 at d=128 4k).
  const VariantChoice between = choice_at(4096, false, h100_info());
  EXPECT_EQ(between.variant, Variant::kFullInt8);
  EXPECT_EQ(between.reason.find("tuned"), std::string::npos) << between.reason;
  const VariantChoice long_one = choice_at(9000, false, h100_info());
  EXPECT_EQ(long_one.variant, Variant::kHalfInt8);
  EXPECT_NE(long_one.reason.find("for bucket 16k"), std::string::npos) << long_one.reason;
  // No row for causal: the shipped table (half INT8 up to 8k there).
  EXPECT_EQ(choice_at(1000, true, h100_info()).variant, Variant::kHalfInt8);
  EXPECT_EQ(choice_at(1000, true, h100_info()).reason.find("tuned"), std::string::npos);
  device::DeviceInfo other = h100_info();
  other.name = "NVIDIA H200";
  EXPECT_EQ(choice_at(1000, false, other).variant, Variant::kHalfInt8);
  // Another head dim has its own rows: d=256 none (the shipped table), d=64 its own.
  database.merge(tune::testing::variant_row_for(64, false, 1024, Variant::kFullInt8));
  AttentionProblem d256 = problem_of_length(1000);
  EXPECT_EQ(choose_auto_variant(d256, 256, h100_info(), database).reason.find("tuned"),
            std::string::npos);
  database.merge(tune::testing::variant_row_for(128, false, 1024, Variant::kHalfInt8));
  EXPECT_EQ(choose_auto_variant(d256, 64, h100_info(), database).variant, Variant::kFullInt8);
  EXPECT_EQ(choose_auto_variant(d256, 128, h100_info(), database).variant, Variant::kHalfInt8);
}

}  // namespace
}  // namespace intfa::attention
