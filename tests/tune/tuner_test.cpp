// The tuner's core against a fake GPU: which candidates it tries, which it drops and why, that
// the fastest correct one wins (a wrong one never does, however fast), and that it resumes and
// keeps to its budget.
#include "tune/tuner.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "intfa/errors.hpp"
#include "tune/tune_test_support.hpp"

namespace intfa::tune {
namespace {

using testing::d128_request;
using testing::entry_for;
using testing::h100;

constexpr KernelConfig kFast{128, 128, 8, 2};
constexpr KernelConfig kWrongButFastest{64, 64, 4, 3};
constexpr KernelConfig kSpilling{128, 32, 8, 3};
constexpr KernelConfig kBroken{64, 32, 4, 2};

KernelConfig heuristic() {
  return attention::heuristic_config(d128_request());
}

// Every config the heuristic chooses at some length (at d=128: one for short sequences too); the
// tuner lists and times them all first.
std::vector<KernelConfig> heuristics() { return attention::heuristic_configs(d128_request()); }

std::vector<KernelConfig> heuristics_and(const std::vector<KernelConfig>& more) {
  std::vector<KernelConfig> configs = heuristics();
  configs.insert(configs.end(), more.begin(), more.end());
  return configs;
}

KernelConfig config_of(const attention::AttentionSpec& spec) {
  return KernelConfig{spec.block_m, spec.block_n, spec.warps, spec.stages};
}

bool has(const std::vector<KernelConfig>& configs, const KernelConfig& config) {
  return std::find(configs.begin(), configs.end(), config) != configs.end();
}

// A GPU whose kernels take `ms(config, seq)`, where `wrong` configs compute garbage, `spilling`
// ones spill, `broken` ones do not compile and `untimeable` ones fail when launched. It logs every
// call the tuner makes.
class FakeBackend : public Backend {
 public:
  std::function<double(const KernelConfig&, int seq)> ms = [](const KernelConfig&, int) {
    return 2.0;
  };
  std::vector<KernelConfig> wrong, spilling, broken, untimeable;
  std::function<void()> on_time = [] {};

  int compile_calls = 0;
  std::vector<KernelConfig> compiled, checked, timed;
  int timers = 0;

  void compile(const std::vector<attention::AttentionSpec>& specs) override {
    compile_calls++;
    for (const attention::AttentionSpec& spec : specs) compiled.push_back(config_of(spec));
  }
  KernelResources resources(const attention::AttentionSpec& spec) override {
    const KernelConfig config = config_of(spec);
    if (has(broken, config)) throw CompileError(spec.to_string(), "error: nope", "NVRTC failed");
    // At most what lets one block fit the register file, as __launch_bounds__(threads, 1) makes
    // ptxas report for the 16-warp Hopper kernels (128).
    const int registers = std::min(168, 65536 / (spec.warps * 32));
    return KernelResources{registers, has(spilling, config) ? 64 : 0, 1024};
  }
  std::string check(const attention::SpecRequest&, const KernelConfig& config) override {
    checked.push_back(config);
    return has(wrong, config) ? "relative L2 0.7 against the quantized model" : "";
  }
  Timer timer(const attention::SpecRequest&, const AttentionProblem& problem) override {
    timers++;
    const int seq = problem.seq_q;
    return [this, seq](const KernelConfig& config) {
      timed.push_back(config);
      on_time();
      if (has(untimeable, config))
        throw DriverError("cuLaunchKernel", 700, "CUDA_ERROR_ILLEGAL_ADDRESS");
      return ms(config, seq);
    };
  }
};

TuningPlan plan_for(std::vector<int> seqs, std::vector<KernelConfig> configs) {
  TuningPlan plan;
  plan.device = h100();
  plan.limits = DeviceLimits::of(testing::h100_info());
  plan.kernels = {d128_request()};
  plan.seqs = std::move(seqs);
  plan.batch = 1;
  plan.heads = 8;
  plan.configs = std::move(configs);
  return plan;
}

// Four candidates: the heuristic (2 ms), kFast (1 ms), kWrongButFastest (0.1 ms, wrong output)
// and kSpilling (0.5 ms, spills).
struct Tuning : ::testing::Test {
  Tuning() {
    // The fixture's configs must not be the heuristic's, whatever the heuristic becomes.
    for (const KernelConfig& config : {kFast, kWrongButFastest, kSpilling, kBroken}) {
      EXPECT_FALSE(has(heuristics(), config))
          << "pick another test config than " << config.to_string();
    }
    backend.ms = [](const KernelConfig& config, int) {
      if (config == kFast) return 1.0;
      if (config == kWrongButFastest) return 0.1;
      if (config == kSpilling) return 0.5;
      return 2.0;
    };
    backend.wrong = {kWrongButFastest};
    backend.spilling = {kSpilling};
    hooks.record = [this](const TuningEntry& entry) { recorded.merge(entry); };
    hooks.progress = [this](const std::string& line) { progress.push_back(line); };
  }
  std::vector<BucketResult> run(const TuningPlan& plan) {
    return tune(plan, existing, backend, hooks);
  }
  const CandidateResult& candidate(const BucketResult& result, const KernelConfig& config) {
    for (const CandidateResult& c : result.candidates) {
      if (c.config == config) return c;
    }
    throw std::runtime_error("no candidate " + config.to_string());
  }

  FakeBackend backend;
  TunerHooks hooks;
  TuningDatabase existing;
  TuningDatabase recorded;
  std::vector<std::string> progress;
  const std::vector<KernelConfig> four = {kFast, kWrongButFastest, kSpilling};
};

// --- Pruning by resources (pure) ---

TEST(ResourceRejection, KeepsAKernelThatFitsTheRegisterFileWithoutSpills) {
  EXPECT_EQ(resource_rejection({128, 0, 1024}, 256, 65536), "");
  EXPECT_EQ(resource_rejection({255, 0, 1024}, 256, 65536), "");  // 8 warps x 8192 = 65536
}

TEST(ResourceRejection, KeepsAKernelThatSpillsAFewWords) {
  EXPECT_EQ(resource_rejection({96, kTolerableSpillBytes, 1024}, 128, 65536), "");
}

TEST(ResourceRejection, DropsAKernelThatSpillsMore) {
  EXPECT_NE(resource_rejection({96, kTolerableSpillBytes + 4, 1024}, 128, 65536)
                .find("spills " + std::to_string(kTolerableSpillBytes + 4) + " bytes"),
            std::string::npos);
}

TEST(ResourceRejection, DropsABlockNeedingMoreRegistersThanTheSmHas) {
  const std::string reason = resource_rejection({255, 0, 1024}, 512, 65536);
  EXPECT_NE(reason.find("255 registers x 512 threads"), std::string::npos) << reason;
  EXPECT_NE(reason.find("65536"), std::string::npos) << reason;
}

TEST(ResourceRejection, CountsRegistersInTheWarpAllocationUnit) {
  // 169 x 384 = 64896 fits, but each warp is given 176 x 32 registers: 12 x 5632 = 67584.
  EXPECT_NE(resource_rejection({169, 0, 1024}, 384, 65536), "");
  EXPECT_EQ(resource_rejection({168, 0, 1024}, 384, 65536), "");
}

TEST(ResourceRejection, DropsABlockLargerThanTheFunctionAllows) {
  EXPECT_NE(resource_rejection({64, 0, 128}, 256, 65536).find("allows 128"), std::string::npos);
}

// --- Candidates ---

TEST(TuningCandidates, AreTheFittingCandidateConfigsWithTheHeuristicFirst) {
  const std::vector<KernelConfig> all = tuning_candidates(d128_request(), 232448);
  ASSERT_FALSE(all.empty());
  EXPECT_EQ(all.front(), heuristic());
  EXPECT_EQ(all.size(), attention::candidate_configs(d128_request()).size());

  const int small = 40 * 1024;
  const std::vector<KernelConfig> fitting = tuning_candidates(d128_request(), small);
  EXPECT_LT(fitting.size(), all.size());
  for (const KernelConfig& config : fitting) {
    EXPECT_LE(attention::shared_bytes(attention::make_spec(d128_request(), config)), small)
        << config.to_string();
  }
}

TEST(TuningCandidates, RequestedConfigsReplaceTheSearchSpaceButKeepTheHeuristic) {
  const std::vector<KernelConfig> configs =
      tuning_candidates(d128_request(), 232448, {kFast, kFast, heuristic()});
  EXPECT_EQ(configs, heuristics_and({kFast}));
  EXPECT_THROW(tuning_candidates(d128_request(), 232448, {{100, 64, 4, 2}}), InvalidArgument);
}

// --- The loop ---

TEST_F(Tuning, ChoosesTheFastestCorrectCandidateWithTheOthersAsRunnerUps) {
  const std::vector<BucketResult> results = run(plan_for({4096}, four));
  ASSERT_EQ(results.size(), 1u);
  const BucketResult& result = results[0];
  EXPECT_EQ(result.status, BucketStatus::kTuned);
  ASSERT_TRUE(result.entry);
  EXPECT_EQ(result.entry->best.config, kFast);
  EXPECT_EQ(result.entry->best.median_ms, 1.0);
  // The heuristic's configs, 2 ms each; the one for this length first.
  ASSERT_EQ(result.entry->runner_ups.size(), heuristics().size());
  EXPECT_EQ(result.entry->runner_ups[0].config, heuristic());
  EXPECT_EQ(result.heuristic_ms, 2.0);
  EXPECT_EQ(result.entry->bucket.seq_bucket, 4096);
  EXPECT_EQ(result.entry->measured_on, (MeasuredShape{1, 8, 4096}));
  EXPECT_EQ(recorded.find(h100(), {d128_request(), 4096})->best.config, kFast);
}

TEST_F(Tuning, NeverTimesOrChoosesACandidateWhoseOutputIsWrong) {
  const BucketResult result = run(plan_for({4096}, four)).at(0);
  EXPECT_EQ(candidate(result, kWrongButFastest).status, CandidateStatus::kWrong);
  EXPECT_NE(candidate(result, kWrongButFastest).reason.find("relative L2"), std::string::npos);
  EXPECT_FALSE(has(backend.timed, kWrongButFastest));
  for (const TimedConfig& timed : result.entry->runner_ups)
    EXPECT_NE(timed.config, kWrongButFastest);
}

TEST_F(Tuning, DropsASpillingCandidateBeforeCheckingOrTimingIt) {
  const BucketResult result = run(plan_for({4096}, four)).at(0);
  EXPECT_EQ(candidate(result, kSpilling).status, CandidateStatus::kTooCostly);
  EXPECT_FALSE(has(backend.checked, kSpilling));
  EXPECT_FALSE(has(backend.timed, kSpilling));
}

TEST_F(Tuning, ACandidateThatFailsToCompileOrRunIsDroppedAlone) {
  backend.broken = {kBroken};
  backend.untimeable = heuristics();
  const BucketResult result = run(plan_for({4096}, {kFast, kBroken})).at(0);
  EXPECT_EQ(candidate(result, kBroken).status, CandidateStatus::kCompileFailed);
  EXPECT_NE(candidate(result, kBroken).reason.find("NVRTC failed"), std::string::npos);
  EXPECT_FALSE(has(backend.checked, kBroken));
  EXPECT_EQ(candidate(result, heuristic()).status, CandidateStatus::kTimingFailed);
  EXPECT_NE(candidate(result, heuristic()).reason.find("CUDA_ERROR_ILLEGAL_ADDRESS"),
            std::string::npos);
  EXPECT_FALSE(result.heuristic_ms);
  ASSERT_TRUE(result.entry);
  EXPECT_EQ(result.entry->best.config, kFast);
  EXPECT_TRUE(result.entry->runner_ups.empty());
}

TEST_F(Tuning, RecordsNothingWhenNoCandidateIsCorrect) {
  backend.wrong = heuristics_and({kFast});
  const BucketResult result = run(plan_for({4096}, {kFast})).at(0);
  EXPECT_EQ(result.status, BucketStatus::kNoCandidate);
  EXPECT_FALSE(result.entry);
  EXPECT_TRUE(recorded.empty());
  EXPECT_TRUE(backend.timed.empty());
}

TEST_F(Tuning, CompilesAndChecksOncePerKernelAndTimesEachBucketAtItsLength) {
  backend.ms = [](const KernelConfig& config, int seq) {
    // kFast wins the short bucket only.
    return config == kFast ? (seq <= 1024 ? 1.0 : 3.0) : 2.0;
  };
  const std::vector<BucketResult> results = run(plan_for({1000, 4096, 16384}, four));
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(backend.compile_calls, 1);
  // The heuristic's, kFast, kWrongButFastest.
  EXPECT_EQ(backend.checked.size(), heuristics().size() + 2);
  EXPECT_EQ(backend.timers, 3);
  EXPECT_EQ(results[0].entry->bucket.seq_bucket, 1024);
  EXPECT_EQ(results[0].entry->best.config, kFast);
  EXPECT_EQ(results[1].entry->best.config, heuristic());
  EXPECT_EQ(results[2].entry->bucket.seq_bucket, 16384);
  EXPECT_EQ(recorded.entries().size(), 3u);
}

TEST_F(Tuning, SkipsBucketsTheDatabaseHasForThisGpuUnlessForced) {
  existing.merge(entry_for(d128_request(), 4096, kFast));
  TuningEntry other_gpu = entry_for(d128_request(), 1024, kFast);
  other_gpu.device.gpu_name = "NVIDIA A100-SXM4-80GB";
  existing.merge(other_gpu);

  const std::vector<BucketResult> resumed = run(plan_for({1024, 4096}, four));
  EXPECT_EQ(resumed[0].status, BucketStatus::kTuned);
  EXPECT_EQ(resumed[1].status, BucketStatus::kAlreadyTuned);
  EXPECT_EQ(backend.timers, 1);

  TuningPlan forced = plan_for({4096}, four);
  forced.force = true;
  EXPECT_EQ(run(forced).at(0).status, BucketStatus::kTuned);
}

TEST_F(Tuning, CompilesNothingWhenEveryBucketIsAlreadyTuned) {
  existing.merge(entry_for(d128_request(), 4096, kFast));
  EXPECT_EQ(run(plan_for({4096}, four)).at(0).status, BucketStatus::kAlreadyTuned);
  EXPECT_EQ(backend.compile_calls, 0);
}

TEST_F(Tuning, StartsNoBucketOnceTheBudgetIsSpent) {
  double now_s = 0;
  hooks.elapsed_s = [&now_s] { return now_s; };
  backend.on_time = [&now_s] { now_s += 1.0; };  // each timed candidate takes a second
  TuningPlan plan = plan_for({1024, 2048, 4096}, four);
  // t timed candidates per bucket (the heuristic's and kFast): starts at 0 s and t s, not at 2t s.
  const int timed_per_bucket = static_cast<int>(heuristics().size()) + 1;
  plan.budget_s = 2 * timed_per_bucket - 1;
  const std::vector<BucketResult> results = run(plan);
  EXPECT_EQ(results[0].status, BucketStatus::kTuned);
  EXPECT_EQ(results[1].status, BucketStatus::kTuned);
  EXPECT_EQ(results[2].status, BucketStatus::kOverBudget);
  EXPECT_FALSE(results[2].entry);
  EXPECT_EQ(recorded.entries().size(), 2u);
}

TEST_F(Tuning, ReportsEachCandidateWithItsCountAndTheElapsedTime) {
  run(plan_for({4096}, four));
  const auto line_with = [this](const std::string& text) {
    return std::any_of(progress.begin(), progress.end(), [&](const std::string& line) {
      return line.find(text) != std::string::npos;
    });
  };
  const std::string listed = std::to_string(heuristics().size() + 3);
  const std::string timed = std::to_string(heuristics().size() + 1);
  EXPECT_TRUE(line_with("[1/" + listed + "] " + heuristic().to_string() + " (heuristic): correct"));
  EXPECT_TRUE(line_with("[" + std::to_string(heuristics().size() + 2) + "/" + listed + "] " +
                        kWrongButFastest.to_string() + ": wrong: relative L2"));
  EXPECT_TRUE(line_with("seq<=4096 [" + timed + "/" + timed + "] " + kFast.to_string() +
                        ": 1.0000 ms"));
  EXPECT_TRUE(line_with(" s)"));
}

}  // namespace
}  // namespace intfa::tune
