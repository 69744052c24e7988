// `intfa tune`: measures the candidate tile configs of each problem bucket on this GPU and records
// the fastest correct one in the tuning database. The loop is src/tune/tuner.hpp; this file is
// its GPU backend (NVRTC in parallel, the loaded function's attributes, the quantized-model check,
// CUDA-event timing) and the command line around it.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/json.hpp"
#include "common/strings.hpp"
#include "device/device_info.hpp"
#include "device/device_memory.hpp"
#include "device/driver_api.hpp"
#include "intfa/args.hpp"
#include "intfa/attention_workload.hpp"
#include "intfa/commands.hpp"
#include "intfa/parallel.hpp"
#include "intfa/problem_options.hpp"
#include "intfa/tune_common.hpp"
#include "launch/kernel_runtime.hpp"
#include "reference/attention_check.hpp"
#include "tune/database_file.hpp"
#include "tune/tuner.hpp"

namespace intfa::cli {

const char* const kTuneUsage =
    "usage: intfa tune [options]\n\n"
    "On this GPU, for each problem bucket (head dim, causal, variant, numerics, and the sequence\n"
    "length rounded up to a power of two in [1k, 16k+]): compiles every candidate tile config in\n"
    "parallel, drops those that spill more than 32 bytes per thread or exceed the register file,\n"
    "checks each one's output against the quantized CPU model, times the others with CUDA events\n"
    "(3 warm-up runs, median of --repeats, inputs rotated past the L2) and records the fastest,\n"
    "with the others' times, in the tuning database. attention_forward then uses it on this\n"
    "GPU (INTFA_LOG=1 says so).\n"
    "Buckets the database already has for this GPU are skipped unless --force.\n\n"
    "  --head-dims LIST (64,128)     --seq LIST (1k,4k,16k): the length timed for each bucket\n"
    "  --causal[=off,on] (both)      --variants full,half (full)\n"
    "  --batch B (4) --heads H (32)  the problem each bucket is timed on\n"
    "  --repeats R (20)              timed runs per candidate\n"
    "  --budget-s S                  start no bucket after S seconds (those left are listed)\n"
    "  --force                       re-tune buckets the database already has\n"
    "  --configs M,N,W,S;...         try only these configs (and the heuristic's)\n"
    "  --tuning-db FILE              default: $INTFA_TUNE_DB, else tuning.json in the cache dir\n"
    "  --json FILE                   every candidate's outcome and time, as JSON\n"
    "  --decode                      instead: the paged KV cache's split counts (and tile\n"
    "                                configs), with their own options (intfa tune --decode "
    "--help)\n"
    "  --variant-table               instead: which variant intfa.attention's default (\"auto\")\n"
    "                                runs on this GPU, measured end to end (intfa tune\n"
    "                                --variant-table --help)\n\n"
    "Numerics (one value each; each selects other kernels): --dtype f16|bf16, --qk-bits 8|4, and\n"
    "the numerics options below\n"
    "How Q and K are quantized for the checks and timings (the same attention kernel, so the\n"
    "same buckets): --smooth-k[=BOOL] (on by default), --rotate[=BOOL|auto] (auto)\n\n"
    "Prints a line per candidate on stderr and a table of the chosen configs with their speedup\n"
    "over the heuristic's. Exit 1 when a bucket had no correct candidate, or on an error.\n\n"
    "A flag is on alone, or takes a value: --force=no, --causal=off (1/0, true/false, on/off,\n"
    "yes/no); --causal also takes a list: --causal=off,on. Integers take a k suffix (4k = 4096).\n";

namespace {

namespace fs = std::filesystem;

constexpr int kWarmupRuns = 3;
constexpr int kMaxInputCopies = 64;

// --- The command line ---

struct TuneOptions : TuneGrid {
  std::vector<KernelConfig> configs;
  AttentionProblem numerics_problem;  // qk_bits
  AttentionOptions numerics;          // p_encoding, p_scale, v_granularity, smooth_k, rotate_qk
  DType io_type = DType::kF16;
};

TuneOptions parse_options(const Arguments& arguments) {
  Grammar grammar;
  grammar.values = tune_grid_values();
  for (const char* name : {"configs", "dtype", "qk-bits"}) grammar.values.push_back(name);
  for (const std::string& name : numerics_flag_names()) grammar.values.push_back(name);
  grammar.flags = qk_transform_flag_names();
  grammar.auto_flags = qk_transform_auto_flag_names();
  grammar.flags.push_back("force");
  grammar.flags.push_back("variant-table");  // --variant-table=no: this verb
  grammar.switch_lists = {"causal"};
  const Args args(arguments, grammar);
  TuneOptions options;
  static_cast<TuneGrid&>(options) = parse_tune_grid(args, {"full"});
  for (const std::string& entry : args.get_entries("configs")) {
    options.configs.push_back(parse_config(entry));
  }
  parse_numerics(args, options.numerics_problem, options.numerics, options.io_type);
  parse_qk_transforms(args, options.numerics);
  // Each problem as a launch checks it (--qk-bits 4 with --k-scale block said "needs a GPU").
  validate_grid(options.numerics_problem, options.numerics, options.variants, options.head_dims,
                options.seqs, options.batch, options.heads);
  return options;
}

tune::TuningPlan make_plan(const TuneOptions& options, const device::DeviceInfo& info) {
  tune::TuningPlan plan;
  plan.device = tune::DeviceKey::of(info);
  plan.limits = tune::DeviceLimits::of(info);
  for (Variant variant : options.variants) {
    for (int head_dim : options.head_dims) {
      for (bool causal : options.causal_values) {
        AttentionProblem problem = options.numerics_problem;
        problem.variant = variant;
        problem.head_dim = head_dim;
        problem.causal = causal;
        plan.kernels.push_back(spec_request(info.arch, problem, options.numerics, options.io_type));
      }
    }
  }
  for (long seq : options.seqs) plan.seqs.push_back(static_cast<int>(seq));
  plan.batch = options.batch;
  plan.heads = options.heads;
  plan.configs = options.configs;
  plan.budget_s = options.budget_s;
  plan.force = options.force;
  return plan;
}

// --- The GPU backend ---

// The numerics of `request`'s kernel, with Q and K quantized as `transforms` says (smooth_k,
// rotate_qk: they select quantize kernels, not the attention kernel, so no bucket has them).
AttentionOptions numerics_of(const attention::SpecRequest& request,
                             const AttentionOptions& transforms) {
  AttentionOptions options;
  options.smooth_k = transforms.smooth_k;
  options.rotate_qk = transforms.rotate_qk;
  options.numerics = request.numerics;
  return options;
}

// Bytes one attention call reads and writes: Q, K, V and the output.
std::size_t attention_bytes(const AttentionProblem& problem) {
  const std::size_t q =
      static_cast<std::size_t>(problem.batch) * problem.heads_q * problem.seq_q * problem.head_dim;
  const std::size_t kv = static_cast<std::size_t>(problem.batch) * problem.heads_kv *
                         problem.seq_kv * problem.head_dim;
  const std::size_t v =
      problem.variant == Variant::kFullInt8
          ? v_int8_bytes(problem.batch, problem.heads_kv, problem.seq_kv, problem.head_dim)
          : kv * 2;
  return (q + kv) * static_cast<std::size_t>(problem.qk_bits) / 8 + v + q * 2;
}

// Copies of one problem's inputs, together at least twice the L2, used in turn: each timed run
// then reads its inputs from memory, as a call in a model does, not from what the previous run
// left in the L2. A long sequence needs one copy (and its random inputs take seconds to draw on
// the host, so no more are made).
class RotatingInputs {
 public:
  RotatingInputs(const AttentionProblem& problem, const AttentionOptions& numerics, DType io_type,
                 int l2_bytes) {
    const std::size_t per_copy = attention_bytes(problem);
    const std::size_t wanted = (2 * static_cast<std::size_t>(l2_bytes) + per_copy - 1) / per_copy;
    const std::size_t copies = std::clamp<std::size_t>(wanted, 1, kMaxInputCopies);
    const std::uint64_t seed = reference::fresh_seed();
    for (std::size_t i = 0; i < copies; ++i) {
      copies_.push_back(std::make_unique<AttentionWorkload>(
          problem, numerics, io_type, reference::InputFamily::kNormal, seed + 3 * i));
      copies_.back()->quantize(stream_.get());
    }
    stream_.synchronize();
  }

  double median_ms(const KernelConfig& config, int repeats) {
    for (auto& copy : copies_) copy->use_config(config);
    std::size_t next = 0;
    const auto attend_next = [&](CUstream stream) {
      copies_[next++ % copies_.size()]->attend(stream);
    };
    return time_on_stream(attend_next, stream_.get(), kWarmupRuns, repeats).median_ms;
  }

 private:
  device::Stream stream_;
  std::vector<std::unique_ptr<AttentionWorkload>> copies_;
};

// Checked on a small problem with tails in both lengths, several key tiles, GQA and (for causal)
// bottom-right alignment with seq_q < seq_kv; the model runs on the CPU in well under a second.
AttentionProblem check_problem(const attention::SpecRequest& request) {
  AttentionProblem problem = tune::timing_problem(request, 1, 2, 300);
  problem.heads_kv = 1;
  problem.seq_kv = 700;
  return problem;
}

class GpuBackend final : public tune::Backend {
 public:
  GpuBackend(const device::DeviceInfo& info, int repeats, const AttentionOptions& transforms)
      : info_(info),
        repeats_(repeats),
        transforms_(transforms),
        context_(launch::launch_context(nullptr)) {}

  void compile(const std::vector<attention::AttentionSpec>& specs) override {
    // Failures surface again from resources().
    compile_in_parallel(std::vector<families::AnySpec>(specs.begin(), specs.end()),
                        "tune: compile");
  }

  tune::KernelResources resources(const attention::AttentionSpec& spec) override {
    const launch::LoadedKernel& kernel = launch::KernelRuntime::instance().load(
        spec, context_, static_cast<unsigned>(attention::shared_bytes(spec)));
    return tune::KernelResources{kernel.registers_per_thread, kernel.local_bytes_per_thread,
                                 kernel.max_threads_per_block};
  }

  std::string check(const attention::SpecRequest& request, const KernelConfig& config) override {
    reference::CheckCase check;
    check.problem = check_problem(request);
    check.options = numerics_of(request, transforms_);
    check.options.config = config;
    check.io_type = request.output_type;
    check.seed = reference::fresh_seed();
    check.compare_to_f64 = false;
    return wrong_output(reference::run_check(check));
  }

  tune::Timer timer(const attention::SpecRequest& request,
                    const AttentionProblem& problem) override {
    auto inputs = std::make_shared<RotatingInputs>(problem, numerics_of(request, transforms_),
                                                   request.output_type, info_.l2_bytes);
    const int repeats = repeats_;
    return [inputs, repeats](const KernelConfig& config) {
      return inputs->median_ms(config, repeats);
    };
  }

 private:
  const device::DeviceInfo& info_;
  int repeats_;
  AttentionOptions transforms_;
  CUcontext context_;
};

// --- The report ---

std::string speedup_text(const tune::BucketResult& result) {
  if (!result.entry || !result.heuristic_ms) return "-";
  char text[32];
  std::snprintf(text, sizeof text, "%.2fx", *result.heuristic_ms / result.entry->best.median_ms);
  return text;
}

void print_table(const std::vector<tune::BucketResult>& results) {
  std::printf("\n%-64s %-42s %10s %12s %8s\n", "bucket", "config", "ms", "heuristic ms", "speedup");
  for (const tune::BucketResult& result : results) {
    const std::string bucket = result.bucket.to_string();
    if (!result.entry) {
      std::printf("%-64s %s\n", bucket.c_str(), status_name(result.status).c_str());
      continue;
    }
    char heuristic[32] = "-";
    if (result.heuristic_ms)
      std::snprintf(heuristic, sizeof heuristic, "%.4f", *result.heuristic_ms);
    std::printf("%-64s %-42s %10.4f %12s %8s\n", bucket.c_str(),
                result.entry->best.config.to_string().c_str(), result.entry->best.median_ms,
                heuristic, speedup_text(result).c_str());
  }
}

json::Value candidate_json(const tune::CandidateResult& candidate) {
  json::Value object = json::Value::object();
  object.set("config", candidate.config.to_string());
  object.set("heuristic", candidate.heuristic);
  object.set("status", status_name(candidate.status));
  if (candidate.status == tune::CandidateStatus::kTimed) {
    object.set("median_ms", candidate.median_ms);
  } else {
    object.set("reason", candidate.reason);
  }
  return object;
}

json::Value results_json(const std::vector<tune::BucketResult>& results,
                         const device::DeviceInfo& info) {
  json::Value rows = json::Value::array();
  for (const tune::BucketResult& result : results) {
    json::Value row = json::Value::object();
    row.set("gpu", info.name);
    row.set("bucket", result.bucket.to_string());
    row.set("batch", result.shape.batch);
    row.set("heads", result.shape.heads);
    row.set("seq", result.shape.seq);
    row.set("status", status_name(result.status));
    if (result.entry) {
      row.set("config", result.entry->best.config.to_string());
      row.set("median_ms", result.entry->best.median_ms);
    }
    if (result.heuristic_ms) row.set("heuristic_ms", *result.heuristic_ms);
    json::Value candidates = json::Value::array();
    for (const tune::CandidateResult& candidate : result.candidates) {
      candidates.push_back(candidate_json(candidate));
    }
    row.set("candidates", std::move(candidates));
    rows.push_back(std::move(row));
  }
  return rows;
}

void print_budget_note(const std::vector<tune::BucketResult>& results, double budget_s) {
  std::size_t skipped = 0;
  for (const tune::BucketResult& result : results) {
    if (result.status == tune::BucketStatus::kOverBudget) skipped++;
  }
  if (skipped > 0) {
    std::printf("the %.0f s budget was spent: %zu buckets not started (listed above)\n", budget_s,
                skipped);
  }
}

}  // namespace

int run_tune(const Arguments& arguments) {
  if (wants_decode(arguments) && wants_variant_table(arguments)) {
    throw UsageError("--decode and --variant-table are two modes of tune: give one of them");
  }
  if (wants_decode(arguments)) return run_decode_tune(arguments);
  if (wants_variant_table(arguments)) return run_variant_table_tune(arguments);
  const TuneOptions options = parse_options(arguments);
  const std::optional<tune::TuningDatabase> read = start_tuning_run("intfa tune", options.database);
  if (!read) return 1;
  const device::DeviceInfo& info = device::cached_device_info(device::current_device());
  const tune::TuningDatabase& existing = *read;
  std::printf("tuning on %s into %s\n", info.to_string().c_str(), options.database.c_str());
  std::fflush(stdout);

  GpuBackend backend(info, options.repeats, options.numerics);
  tune::TunerHooks hooks;
  hooks.progress = [](const std::string& line) {
    std::fprintf(stderr, "tune: %s\n", line.c_str());
  };
  hooks.record = [&options](const tune::TuningEntry& entry) {
    tune::record_entry(options.database, entry);
  };
  const std::vector<tune::BucketResult> results =
      tune::tune(make_plan(options, info), existing, backend, hooks);

  print_table(results);
  print_budget_note(results, options.budget_s);
  if (options.json_path) json::write_file(*options.json_path, results_json(results, info));
  for (const tune::BucketResult& result : results) {
    if (result.status == tune::BucketStatus::kNoCandidate) return 1;
  }
  return 0;
}

}  // namespace intfa::cli
