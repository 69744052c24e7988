// `intfa tune` on a GPU, end to end (skipped without one): one small bucket tuned into a fresh
// database; the runtime then launches the tuned config and says so, and in the tuner's own
// measurements the tuned config was no slower than the heuristic's. `intfa tune --variant-table`
// likewise: one row measured, pick_variant's choice recorded, and intfa::auto_variant takes it.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "common/log.hpp"
#include "device/device_info.hpp"
#include "intfa/attention.hpp"
#include "numerics/option_names.hpp"
#include "spec/attention_spec.hpp"
#include "spec/variant_policy.hpp"
#include "support/cli.hpp"
#include "support/gpu.hpp"
#include "support/temp_dir.hpp"
#include "tune/database_file.hpp"

namespace intfa::tune {
namespace {

namespace fs = std::filesystem;
using intfa::testing::CliResult;
using intfa::testing::DeviceBuffer;
using intfa::testing::mentions;
using intfa::testing::run_cli;
using intfa::testing::ScopedEnv;
using intfa::testing::TempDir;

constexpr int kSeq = 2048;
constexpr const char* kTuneOneBucket =
    "tune --head-dims 128 --seq 2048 --causal off --variants full --batch 1 --heads 8 "
    "--repeats 10 --configs '128,64,8,2;64,64,4,2;128,128,8,2' --tuning-db ";

// The heuristic config's time in `entry` (the winner's or a runner-up's); negative when absent.
double heuristic_ms(const TuningEntry& entry) {
  const KernelConfig heuristic = attention::heuristic_config(entry.bucket.request);
  if (entry.best.config == heuristic) return entry.best.median_ms;
  for (const TimedConfig& timed : entry.runner_ups) {
    if (timed.config == heuristic) return timed.median_ms;
  }
  return -1;
}

// One attention_forward of the tuned bucket's shape; the runtime chooses the config unless
// `options` names one. Returns the captured log lines.
std::vector<std::string> attend(const AttentionOptions& options = {}) {
  AttentionProblem problem;
  problem.heads_q = problem.heads_kv = 8;
  problem.seq_q = problem.seq_kv = kSeq;
  const TensorShape shape{1, 8, kSeq, 128};
  const std::size_t elements = std::size_t{8} * kSeq * 128;
  DeviceBuffer q(elements), k(elements), v(v_int8_bytes(1, 8, kSeq, 128)), out(elements * 2);
  DeviceBuffer q_scale(8 * kSeq * sizeof(float)), k_scale(8 * kSeq * sizeof(float));
  DeviceBuffer v_scale(v_scale_count(VScaleGranularity::kPerTensor, 1, 8, kSeq, 128) *
                       sizeof(float));
  for (DeviceBuffer* buffer : {&q, &k, &v}) buffer->fill_bytes(1);
  for (DeviceBuffer* scales : {&q_scale, &k_scale, &v_scale}) {
    scales->upload(std::vector<float>(scales->bytes() / sizeof(float), 0.01f));
  }
  AttentionTensors tensors;
  tensors.q = TensorView::dense(q.get(), DType::kI8, Layout::kBHND, shape);
  tensors.k = TensorView::dense(k.get(), DType::kI8, Layout::kBHND, shape);
  tensors.v = v_int8_view(v.get(), 1, 8, kSeq, 128);
  tensors.q_scale = q_scale.as<float>();
  tensors.k_scale = k_scale.as<float>();
  tensors.v_scale = v_scale.as<float>();
  tensors.out = TensorView::dense(out.get(), DType::kF16, Layout::kBHND, shape);
  device::Stream stream;
  const log::ScopedCapture capture;
  attention_forward(problem, tensors, stream.get(), options);
  stream.synchronize();
  return capture.infos();
}

bool logs_tuned(const std::vector<std::string>& lines, const KernelConfig& config) {
  for (const std::string& line : lines) {
    if (line.find("attention config (tuned for") != std::string::npos &&
        line.find(config.to_string()) != std::string::npos) {
      return true;
    }
  }
  return false;
}

TEST(TuneGpu, TheRuntimeUsesTheTunedConfigWhichIsNoSlowerThanTheHeuristics) {
  INTFA_REQUIRE_GPU();
  const TempDir directory;
  const fs::path database = directory.path() / "tuning.json";
  const CliResult tuned = run_cli(kTuneOneBucket + database.string());
  ASSERT_EQ(tuned.exit_code, 0) << tuned.output;
  std::printf("%s", tuned.output.c_str());

  const auto written = read_database_file(database);
  ASSERT_TRUE(written);
  ASSERT_EQ(written->entries().size(), 1u);
  const TuningEntry& entry = written->entries()[0];
  EXPECT_EQ(entry.device, DeviceKey::of(device::cached_device_info(device::current_device())));
  EXPECT_EQ(entry.bucket.seq_bucket, kSeq);
  ASSERT_GE(heuristic_ms(entry), 0) << "the heuristic's config was not timed";
  EXPECT_LE(entry.best.median_ms, heuristic_ms(entry));

  {
    const ScopedEnv pointed("INTFA_TUNE_DB", database.c_str());
    const ScopedEnv logging("INTFA_LOG", "1");
    reset_process_database_for_testing();
    EXPECT_TRUE(logs_tuned(attend(), entry.best.config))
        << "no log line names the tuned config " << entry.best.config.to_string();
    AttentionOptions explicit_config;  // overrides the database
    explicit_config.config = attention::heuristic_config(entry.bucket.request);
    EXPECT_FALSE(logs_tuned(attend(explicit_config), entry.best.config));
    reset_process_database_for_testing();
  }

  const CliResult again = run_cli(kTuneOneBucket + database.string());
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_TRUE(mentions(again, "already tuned")) << again.output;
}

TEST(TuneGpu, TheVariantTableRowIsMeasuredRecordedAndTakenByAutoVariant) {
  INTFA_REQUIRE_GPU();
  const TempDir directory;
  const fs::path database = directory.path() / "tuning.json";
  const std::string command =
      "tune --variant-table --head-dims 64 --seq 1024 --causal on --batch 1 --heads 8 "
      "--repeats 3 --tuning-db " +
      database.string();
  const CliResult measured = run_cli(command);
  ASSERT_EQ(measured.exit_code, 0) << measured.output;
  std::printf("%s", measured.output.c_str());
  const auto written = read_database_file(database);
  ASSERT_TRUE(written);
  ASSERT_EQ(written->variant_rows().size(), 1u);
  const VariantRow& row = written->variant_rows()[0];
  const device::DeviceInfo& info = device::cached_device_info(device::current_device());
  EXPECT_EQ(row.device, DeviceKey::of(info));
  EXPECT_EQ(row.head_dim, 64);
  EXPECT_TRUE(row.causal);
  EXPECT_EQ(row.seq_bucket, 1024);
  ASSERT_EQ(row.measured.size(), 2u);  // full and half INT8, both matching the model
  for (const attention::VariantMeasurement& m : row.measured) {
    EXPECT_GT(m.median_ms, 0) << option_name(m.variant);
    // Quantization error against float64, not a wrong kernel: the bound and then some.
    EXPECT_GT(m.relative_l2, 0) << option_name(m.variant);
    EXPECT_LT(m.relative_l2, 0.03) << option_name(m.variant);
  }
  EXPECT_EQ(row.variant, attention::pick_variant(row.measured, row.accuracy_floor));
  {
    const ScopedEnv pointed("INTFA_TUNE_DB", database.c_str());
    reset_process_database_for_testing();
    AttentionProblem problem;
    problem.head_dim = 64;
    problem.seq_q = problem.seq_kv = 2000;  // bucket 2k: the nearest row, 1k's
    problem.causal = true;
    const AutoVariant chosen = auto_variant(problem);
    EXPECT_EQ(chosen.variant, row.variant);
    EXPECT_NE(chosen.reason.find("tuned on this GPU"), std::string::npos) << chosen.reason;
    reset_process_database_for_testing();
  }
  const CliResult again = run_cli(command);
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_TRUE(mentions(again, "already tuned")) << again.output;
}

}  // namespace
}  // namespace intfa::tune
