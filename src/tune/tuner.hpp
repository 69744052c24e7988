// The autotuner's core: which tile configs to try for a kernel, which compiled ones are not worth
// timing, and the loop that checks and times the rest per problem bucket and keeps the winner.
// Everything that needs a GPU (compiling and loading, checking an output, timing) goes through
// Backend, so the loop runs the same against a fake in tests and against the device in
// `intfa tune` (tools/intfa/cmd_tune.cpp).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "device/device_info.hpp"
#include "intfa/attention.hpp"
#include "spec/attention_spec.hpp"
#include "tune/tuning_database.hpp"

namespace intfa::tune {

// What a compiled kernel uses, read from the loaded function (CU_FUNC_ATTRIBUTE_NUM_REGS,
// LOCAL_SIZE_BYTES, MAX_THREADS_PER_BLOCK).
struct KernelResources {
  int registers_per_thread = 0;
  int local_bytes_per_thread = 0;  // > 0: registers spill to local memory
  int max_threads_per_block = 0;   // the most this function can be launched with
};

struct DeviceLimits {
  int max_shared_bytes_per_block = 0;  // opt-in
  int registers_per_sm = 0;
  static DeviceLimits of(const device::DeviceInfo& info);
};

// A few spilled words are often loop-invariant values parked outside the main loop (the H100's
// fastest d128 full-INT8 config spills 16 bytes), so only more than this is pruned untimed.
inline constexpr int kTolerableSpillBytes = 32;

// Why a compiled candidate is not worth timing, or "" when it is: it spills more than
// kTolerableSpillBytes (local memory traffic in the inner loop), it cannot be launched with
// `threads_per_block`, or one block needs more registers than the SM has (registers are
// allocated per warp in units of 256).
std::string resource_rejection(const KernelResources& resources, int threads_per_block,
                               int registers_per_sm);

// The configs to try for `request`: `requested` when given, else every candidate_configs(),
// keeping those that fit `max_shared_bytes`; the heuristic's configs (attention::heuristic_configs)
// always come first (when they fit), so every bucket is measured against its own.
std::vector<KernelConfig> tuning_candidates(const attention::SpecRequest& request,
                                            int max_shared_bytes,
                                            const std::vector<KernelConfig>& requested = {});

// Median milliseconds of one config on the problem the timer was made for.
using Timer = std::function<double(const KernelConfig& config)>;

// What the tuner needs from a GPU. Any call may throw; the tuner then drops that candidate.
class Backend {
 public:
  virtual ~Backend() = default;
  // Compiles `specs` ahead of the calls below (in parallel where it can); a failure surfaces
  // from resources() of that spec.
  virtual void compile(const std::vector<attention::AttentionSpec>& specs) = 0;
  // The compiled kernel's resources (compiling and loading it if compile() did not).
  virtual KernelResources resources(const attention::AttentionSpec& spec) = 0;
  // "" when the kernel with `config` computes what the quantized model does on random data, else
  // what is wrong with its output.
  virtual std::string check(const attention::SpecRequest& request, const KernelConfig& config) = 0;
  // A timer for `problem`; its inputs live as long as the timer.
  virtual Timer timer(const attention::SpecRequest& request, const AttentionProblem& problem) = 0;
};

struct TuningPlan {
  DeviceKey device;
  DeviceLimits limits;
  std::vector<attention::SpecRequest> kernels;  // each tuned for every length in seqs
  std::vector<int> seqs;  // one per sequence bucket: the length timed for it (seq_q = seq_kv)
  int batch = 4;
  int heads = 32;
  std::vector<KernelConfig> configs;  // restricts the candidates (empty: all of them)
  double budget_s = 0;                // > 0: no bucket starts after this many seconds
  bool force = false;                 // re-tune buckets the database already has
};

enum class CandidateStatus {
  kTimed,
  kCompileFailed,  // or failed to load
  kTooCostly,      // resource_rejection
  kWrong,          // its output does not match the quantized model (or the check failed)
  kTimingFailed,
};
std::string status_name(CandidateStatus status);

struct CandidateResult {
  KernelConfig config;
  bool heuristic = false;  // a config the heuristic chooses (at some sequence length)
  CandidateStatus status = CandidateStatus::kTimed;
  std::string reason;  // why it was dropped
  double median_ms = 0;
};

enum class BucketStatus {
  kTuned,
  kAlreadyTuned,  // in the database and no --force
  kOverBudget,    // not started: the budget was spent
  kNoCandidate,   // every candidate was dropped: nothing recorded
};
std::string status_name(BucketStatus status);

struct BucketResult {
  ProblemBucket bucket;
  MeasuredShape shape;
  BucketStatus status = BucketStatus::kTuned;
  std::vector<CandidateResult> candidates;  // empty unless the bucket was measured
  std::optional<TuningEntry> entry;         // what was recorded (kTuned)
  std::optional<double> heuristic_ms;       // the heuristic config's time, when it was timed
};

struct TunerHooks {
  // Seconds since tuning began, for the budget (default: a steady clock started by tune()).
  std::function<double()> elapsed_s;
  // One line per step and candidate ("[3/12] ..."); default: dropped.
  std::function<void(const std::string& line)> progress;
  // Called with each bucket's entry as soon as it is measured (persist it: an interrupted run
  // keeps what it finished).
  std::function<void(const TuningEntry& entry)> record;
};

// Tunes every (kernel, seq) bucket of `plan` in order, skipping those `existing` holds for the
// plan's device unless plan.force. Per kernel, candidates are compiled, pruned by resources and
// checked once; then each bucket times the survivors and records the fastest, with the others
// as runner-ups. A candidate whose check fails is never timed, so it is never chosen.
std::vector<BucketResult> tune(const TuningPlan& plan, const TuningDatabase& existing,
                               Backend& backend, const TunerHooks& hooks = {});

// Now, in ISO 8601 UTC ("2026-11-29T10:41:07Z"): when an entry or row was tuned.
std::string utc_now();

// The problem a bucket of `request` is timed on.
AttentionProblem timing_problem(const attention::SpecRequest& request, int batch, int heads,
                                int seq);

}  // namespace intfa::tune
