#include "tune/tuner.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <exception>

namespace intfa::tune {

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm parts{};
  gmtime_r(&now, &parts);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &parts);
  return text;
}

namespace {

// Registers are allocated to a warp in units of 256 (CUDA Occupancy Calculator, "register
// allocation unit size", sm_80 through sm_90).
constexpr int kRegisterAllocationUnit = 256;
constexpr int kWarpSize = 32;

int registers_per_block(int registers_per_thread, int threads_per_block) {
  const int warps = (threads_per_block + kWarpSize - 1) / kWarpSize;
  const int per_warp = (registers_per_thread * kWarpSize + kRegisterAllocationUnit - 1) /
                       kRegisterAllocationUnit * kRegisterAllocationUnit;
  return warps * per_warp;
}

std::string milliseconds_text(double ms) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4f ms", ms);
  return text;
}

// One call of tune(): the plan, what it has measured so far, and where it reports.
class TuningRun {
 public:
  TuningRun(const TuningPlan& plan, const TuningDatabase& existing, Backend& backend,
            const TunerHooks& hooks)
      : plan_(plan), existing_(existing), backend_(backend), hooks_(hooks) {
    if (!hooks_.elapsed_s) {
      const auto started = std::chrono::steady_clock::now();
      hooks_.elapsed_s = [started] {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      };
    }
  }

  std::vector<BucketResult> run() {
    for (const attention::SpecRequest& kernel : plan_.kernels) tune_kernel(kernel);
    return std::move(results_);
  }

 private:
  // Compiling, pruning and checking happen once per kernel, before its first bucket that is
  // measured; the buckets then time the survivors at their own lengths.
  void tune_kernel(attention::SpecRequest request) {
    request.arch = plan_.device.arch;
    std::optional<std::vector<CandidateResult>> prepared;
    for (int seq : plan_.seqs) {
      BucketResult result;
      result.bucket = ProblemBucket{request, seq_bucket(seq, seq)};
      result.shape = MeasuredShape{plan_.batch, plan_.heads, seq};
      if (!plan_.force && existing_.find(plan_.device, result.bucket) != nullptr) {
        result.status = BucketStatus::kAlreadyTuned;
        say(result.bucket.to_string() + ": already tuned (--force tunes it again)");
      } else if (over_budget()) {
        result.status = BucketStatus::kOverBudget;
        say(result.bucket.to_string() + ": skipped, the time budget is spent");
      } else {
        if (!prepared) prepared = prepare(request);
        result.candidates = *prepared;
        measure(request, result);
      }
      results_.push_back(std::move(result));
    }
  }

  // Every candidate, with the ones not worth timing marked and why. The rest keep kTimed: they
  // are the ones measure() times.
  std::vector<CandidateResult> prepare(const attention::SpecRequest& request) {
    const std::vector<KernelConfig> heuristic = attention::heuristic_configs(request);
    std::vector<CandidateResult> candidates;
    std::vector<attention::AttentionSpec> specs;
    for (const KernelConfig& config :
         tuning_candidates(request, plan_.limits.max_shared_bytes_per_block, plan_.configs)) {
      CandidateResult candidate;
      candidate.config = config;
      candidate.heuristic =
          std::find(heuristic.begin(), heuristic.end(), config) != heuristic.end();
      candidates.push_back(candidate);
      specs.push_back(attention::make_spec(request, config));
    }
    say(kernel_name(request) + ": compiling " + std::to_string(specs.size()) + " candidates");
    backend_.compile(specs);
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      screen(request, specs[i], candidates[i]);
      say_candidate(kernel_name(request), i + 1, candidates.size(), candidates[i],
                    candidates[i].reason.empty() ? "correct" : candidates[i].reason);
    }
    return candidates;
  }

  // Drops `candidate` when it cannot be built, costs too much, or computes a wrong output.
  void screen(const attention::SpecRequest& request, const attention::AttentionSpec& spec,
              CandidateResult& candidate) {
    KernelResources resources;
    try {
      resources = backend_.resources(spec);
    } catch (const std::exception& error) {
      drop(candidate, CandidateStatus::kCompileFailed, error.what());
      return;
    }
    const std::string costly = resource_rejection(resources, candidate.config.warps * kWarpSize,
                                                  plan_.limits.registers_per_sm);
    if (!costly.empty()) {
      drop(candidate, CandidateStatus::kTooCostly, costly);
      return;
    }
    std::string wrong;
    try {
      wrong = backend_.check(request, candidate.config);
    } catch (const std::exception& error) {
      wrong = std::string("the check failed: ") + error.what();
    }
    if (!wrong.empty()) drop(candidate, CandidateStatus::kWrong, wrong);
  }

  void measure(const attention::SpecRequest& request, BucketResult& result) {
    const AttentionProblem problem =
        timing_problem(request, plan_.batch, plan_.heads, result.shape.seq);
    Timer timer;
    try {
      timer = backend_.timer(request, problem);
    } catch (const std::exception& error) {
      for (CandidateResult& candidate : result.candidates) {
        if (candidate.status == CandidateStatus::kTimed) {
          drop(candidate, CandidateStatus::kTimingFailed, error.what());
        }
      }
    }
    const std::size_t total =
        std::count_if(result.candidates.begin(), result.candidates.end(),
                      [](const CandidateResult& c) { return c.status == CandidateStatus::kTimed; });
    std::size_t done = 0;
    const KernelConfig heuristic = attention::heuristic_config(request, result.bucket.seq_bucket);
    for (CandidateResult& candidate : result.candidates) {
      if (candidate.status != CandidateStatus::kTimed) continue;
      time_one(timer, candidate);
      if (candidate.config == heuristic && candidate.status == CandidateStatus::kTimed) {
        result.heuristic_ms = candidate.median_ms;
      }
      say_candidate(
          result.bucket.to_string(), ++done, total, candidate,
          candidate.reason.empty() ? milliseconds_text(candidate.median_ms) : candidate.reason);
    }
    record(result);
  }

  static void time_one(const Timer& timer, CandidateResult& candidate) {
    try {
      candidate.median_ms = timer(candidate.config);
    } catch (const std::exception& error) {
      drop(candidate, CandidateStatus::kTimingFailed, error.what());
    }
  }

  // The fastest timed candidate becomes the entry (the heuristic, listed first, wins ties).
  void record(BucketResult& result) {
    std::vector<TimedConfig> timed;
    for (const CandidateResult& candidate : result.candidates) {
      if (candidate.status == CandidateStatus::kTimed) {
        timed.push_back(TimedConfig{candidate.config, candidate.median_ms});
      }
    }
    if (timed.empty()) {
      result.status = BucketStatus::kNoCandidate;
      say(result.bucket.to_string() + ": no candidate passed; nothing recorded");
      return;
    }
    std::stable_sort(timed.begin(), timed.end(), [](const TimedConfig& a, const TimedConfig& b) {
      return a.median_ms < b.median_ms;
    });
    TuningEntry entry;
    entry.device = plan_.device;
    entry.bucket = result.bucket;
    entry.best = timed.front();
    entry.runner_ups.assign(timed.begin() + 1, timed.end());
    entry.measured_on = result.shape;
    entry.tuned_at = utc_now();
    if (hooks_.record) hooks_.record(entry);
    result.entry = std::move(entry);
    result.status = BucketStatus::kTuned;
  }

  static void drop(CandidateResult& candidate, CandidateStatus status, const std::string& why) {
    candidate.status = status;
    candidate.reason = status_name(status) + ": " + why;
  }

  // "<what> [3/12] block_m=64 ... (heuristic): <outcome>  (12.5 s)"
  void say_candidate(const std::string& what, std::size_t index, std::size_t total,
                     const CandidateResult& candidate, const std::string& outcome) const {
    char elapsed[32];
    std::snprintf(elapsed, sizeof elapsed, "%.1f s", hooks_.elapsed_s());
    say(what + " [" + std::to_string(index) + "/" + std::to_string(total) + "] " +
        candidate.config.to_string() + (candidate.heuristic ? " (heuristic)" : "") + ": " +
        outcome + "  (" + elapsed + ")");
  }

  bool over_budget() const { return plan_.budget_s > 0 && hooks_.elapsed_s() >= plan_.budget_s; }

  void say(const std::string& line) const {
    if (hooks_.progress) hooks_.progress(line);
  }

  const TuningPlan& plan_;
  const TuningDatabase& existing_;
  Backend& backend_;
  TunerHooks hooks_;
  std::vector<BucketResult> results_;
};

}  // namespace

DeviceLimits DeviceLimits::of(const device::DeviceInfo& info) {
  return DeviceLimits{info.max_shared_bytes_per_block_optin, info.registers_per_sm};
}

std::string resource_rejection(const KernelResources& resources, int threads_per_block,
                               int registers_per_sm) {
  if (resources.local_bytes_per_thread > kTolerableSpillBytes) {
    return "spills " + std::to_string(resources.local_bytes_per_thread) +
           " bytes per thread to local memory (more than " +
           std::to_string(kTolerableSpillBytes) + ")";
  }
  if (resources.max_threads_per_block > 0 && threads_per_block > resources.max_threads_per_block) {
    return "launches " + std::to_string(threads_per_block) + " threads per block; the function " +
           "allows " + std::to_string(resources.max_threads_per_block);
  }
  const int needed = registers_per_block(resources.registers_per_thread, threads_per_block);
  if (registers_per_sm > 0 && needed > registers_per_sm) {
    return std::to_string(resources.registers_per_thread) + " registers x " +
           std::to_string(threads_per_block) + " threads need " + std::to_string(needed) +
           " registers per block; the SM has " + std::to_string(registers_per_sm);
  }
  return "";
}

std::vector<KernelConfig> tuning_candidates(const attention::SpecRequest& request,
                                            int max_shared_bytes,
                                            const std::vector<KernelConfig>& requested) {
  std::vector<KernelConfig> configs = attention::heuristic_configs(request);
  for (const KernelConfig& config :
       requested.empty() ? attention::candidate_configs(request) : requested) {
    if (std::find(configs.begin(), configs.end(), config) == configs.end()) {
      configs.push_back(config);
    }
  }
  return attention::fitting_configs(request, configs, max_shared_bytes);
}

std::string status_name(CandidateStatus status) {
  switch (status) {
    case CandidateStatus::kTimed:
      return "timed";
    case CandidateStatus::kCompileFailed:
      return "compile failed";
    case CandidateStatus::kTooCostly:
      return "pruned";
    case CandidateStatus::kWrong:
      return "wrong";
    case CandidateStatus::kTimingFailed:
      return "timing failed";
  }
  return "unknown";
}

std::string status_name(BucketStatus status) {
  switch (status) {
    case BucketStatus::kTuned:
      return "tuned";
    case BucketStatus::kAlreadyTuned:
      return "already tuned";
    case BucketStatus::kOverBudget:
      return "skipped (budget spent)";
    case BucketStatus::kNoCandidate:
      return "no correct candidate";
  }
  return "unknown";
}

std::vector<BucketResult> tune(const TuningPlan& plan, const TuningDatabase& existing,
                               Backend& backend, const TunerHooks& hooks) {
  return TuningRun(plan, existing, backend, hooks).run();
}

AttentionProblem timing_problem(const attention::SpecRequest& request, int batch, int heads,
                                int seq) {
  AttentionProblem problem;
  problem.batch = batch;
  problem.heads_q = problem.heads_kv = heads;
  problem.seq_q = problem.seq_kv = seq;
  problem.head_dim = request.head_dim;
  problem.causal = request.causal;
  problem.variant = request.variant;
  problem.qk_bits = request.qk_bits;
  return problem;
}

}  // namespace intfa::tune
