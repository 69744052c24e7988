// `intfa bench`: times attention (and quantization, separately) over a grid of problems and tile
// configs with CUDA events; prints a table and optionally writes JSON rows.
#include <algorithm>
#include <cstdio>
#include <thread>
#include <vector>

#include "attention/config_choice.hpp"
#include "common/json.hpp"
#include "common/strings.hpp"
#include "device/device_info.hpp"
#include "device/device_memory.hpp"
#include "device/driver_api.hpp"
#include "families/any_spec.hpp"
#include "intfa/args.hpp"
#include "intfa/attention_workload.hpp"
#include "intfa/commands.hpp"
#include "intfa/errors.hpp"
#include "intfa/parallel.hpp"
#include "intfa/problem_options.hpp"
#include "launch/kernel_runtime.hpp"
#include "spec/attention_spec.hpp"

namespace intfa::cli {

const char* const kBenchUsage =
    "usage: intfa bench [options]\n\n"
    "Times intfa attention over a grid of problems (CUDA events, warm-up, median of --repeats\n"
    "runs) and prints ms and TOPS (4*B*H*Nq*Nkv*D / t, halved for causal). Quantization is timed\n"
    "separately and reported in its own columns (--smooth-k and --rotate, below, choose how Q\n"
    "and K are quantized).\n\n"
    "  --head-dims 64,128 (128)   --seq 1k,2k,4k,8k,16k (4k)   --batch B (4)   --heads H (32)\n"
    "  --causal[=off,on] (off)    --variants full,half (full)  --repeats R (20)\n"
    "  --configs M,N,W,S;...      tile configs to time (default: the chosen one); 'all' times\n"
    "                             every candidate config of the tuner\n"
    "  --json FILE                write every row as JSON\n"
    "  --jit                      instead: time the JIT path (cold NVRTC compile, disk hit to\n"
    "                             launchable, per-call host overhead above a raw launch)\n"
    "  --decode                   instead: the paged KV cache's decode and append, with their\n"
    "                             own options (intfa bench --decode --help)\n\n"
    "A flag is on alone, or takes a value: --causal=off (1/0, true/false, on/off, yes/no); a\n"
    "list sweeps it: --causal=off,on (or --causal off,on). Integers take a k suffix (4k = 4096).\n";

namespace {

struct BenchRow {
  AttentionProblem problem;
  AttentionOptions options;
  KernelConfig config;
  Timing attention;
  Timing quantize;
  double tops = 0;
  double quantize_gbps = 0;
};

// The configs --configs names: none (the heuristic's for each length), "all" (the tuner's
// candidates, which need the device), or a list.
struct ConfigChoice {
  bool all = false;
  std::vector<KernelConfig> listed;
};

ConfigChoice parse_configs(const Args& args) {
  ConfigChoice choice;
  const std::string text = args.get_or("configs", "");
  if (text == "all") {
    choice.all = true;
  } else {
    for (const std::string& entry : args.get_entries("configs")) {
      choice.listed.push_back(parse_config(entry));
    }
  }
  return choice;
}

std::vector<KernelConfig> configs_for(const ConfigChoice& choice,
                                      const attention::SpecRequest& request,
                                      const device::DeviceInfo& info) {
  if (!choice.all) return choice.listed;  // empty: the heuristic's config for each length
  return attention::fitting_configs(request, attention::candidate_configs(request),
                                    info.max_shared_bytes_per_block_optin);
}

json::Value row_json(const BenchRow& row, const std::string& gpu) {
  json::Value object = json::Value::object();
  object.set("gpu", gpu);
  object.set("variant", row.problem.variant == Variant::kFullInt8 ? "full_int8" : "half_int8");
  object.set("numerics", describe_numerics(row.problem, row.options));
  object.set("batch", row.problem.batch);
  object.set("heads", row.problem.heads_q);
  object.set("seq", row.problem.seq_q);
  object.set("head_dim", row.problem.head_dim);
  object.set("causal", row.problem.causal);
  object.set("config", row.config.to_string());
  object.set("attention_ms", row.attention.median_ms);
  object.set("attention_min_ms", row.attention.min_ms);
  object.set("tops", row.tops);
  object.set("quantize_ms", row.quantize.median_ms);
  object.set("quantize_gbps", row.quantize_gbps);
  return object;
}

}  // namespace

int run_bench(const Arguments& arguments) {
  if (wants_decode(arguments)) return run_decode_bench(arguments);
  Grammar grammar;
  grammar.values = {"head-dims", "seq", "batch", "heads", "variants", "repeats", "configs", "json"};
  for (const std::string& name : numerics_option_names()) grammar.values.push_back(name);
  grammar.flags = qk_transform_flag_names();
  grammar.auto_flags = qk_transform_auto_flag_names();
  grammar.flags.push_back("jit");
  grammar.switch_lists = {"causal"};
  // The whole command line, problems included, is checked before anything looks for a GPU.
  const Args args(arguments, grammar);
  const bool jit = args.flag("jit");
  const auto head_dims = parse_head_dims(args, {128});
  const auto seqs = args.get_int_list("seq", {4096}, 1, 1 << 20);
  const int batch = static_cast<int>(args.get_int("batch", 4, 1, 4096));
  const int heads = static_cast<int>(args.get_int("heads", 32, 1, 4096));
  const int repeats = static_cast<int>(args.get_int("repeats", jit ? 5 : 20, 1, 10000));
  const std::vector<bool> causal_values = parse_causal_list(args, {false});
  const std::vector<Variant> variants = parse_variant_list(args, {"full"});
  AttentionProblem base;
  AttentionOptions options;
  DType io_type = DType::kF16;
  parse_numerics(args, base, options, io_type);
  parse_qk_transforms(args, options);
  const ConfigChoice config_choice = parse_configs(args);
  validate_grid(base, options, variants, head_dims, seqs, batch, heads);
  if (jit && repeats > 100) throw UsageError("--repeats: --jit takes at most 100");

  std::string reason;
  if (!device::driver_available(&reason)) {
    std::fprintf(stderr, "intfa bench: needs a GPU (%s)\n", reason.c_str());
    return 1;
  }
  if (jit) return run_jit_bench(args.get_or("json", ""), repeats);
  device::use_primary_context();
  const device::DeviceInfo& info = device::cached_device_info(device::current_device());

  // Every problem with the configs to time on it; all their specs compile in parallel first.
  struct Job {
    AttentionProblem problem;
    std::vector<KernelConfig> configs;
  };
  std::vector<Job> jobs;
  std::vector<families::AnySpec> specs;
  for (Variant variant : variants)
    for (int head_dim : head_dims)
      for (bool causal : causal_values) {
        AttentionProblem shape = base;
        shape.variant = variant;
        shape.head_dim = head_dim;
        shape.causal = causal;
        const attention::SpecRequest request =
            attention::request_for(info.arch, shape, options, io_type);
        const std::vector<KernelConfig> configs = configs_for(config_choice, request, info);
        for (long seq : seqs) {
          const AttentionProblem problem = grid_point(shape, variant, head_dim, seq, batch, heads);
          const std::vector<KernelConfig> job_configs =
              !configs.empty()
                  ? configs
                  : std::vector<KernelConfig>{attention::heuristic_config_for(request, problem)};
          for (const KernelConfig& config : job_configs) {
            const families::AnySpec spec = attention::make_spec(request, config);
            if (std::find(specs.begin(), specs.end(), spec) == specs.end()) specs.push_back(spec);
          }
          jobs.push_back({problem, job_configs});
        }
      }
  const CompileSummary compiled = compile_in_parallel(specs, "bench");
  for (const std::string& failure : compiled.failures) std::printf("compile failed: %s\n", failure.c_str());

  std::printf("%s, %s\n", info.to_string().c_str(), describe_numerics(base, options).c_str());
  std::printf("%-9s %4s %6s %6s %-40s %9s %8s %9s %8s\n", "variant", "d", "seq", "causal",
              "config", "attn ms", "TOPS", "quant ms", "GB/s");
  json::Value rows = json::Value::array();
  device::Stream stream;
  for (const Job& job : jobs) {
    AttentionOptions job_options = options;
    job_options.config = job.configs.front();
    AttentionWorkload workload(job.problem, job_options, io_type, reference::InputFamily::kNormal,
                               reference::fresh_seed());
    const Timing quantize = time_on_stream([&](CUstream s) { workload.quantize(s); },
                                           stream.get(), 2, std::max(3, repeats / 4));
    workload.quantize(stream.get());
    for (const KernelConfig& config : job.configs) {
      job_options.config = config;
      workload.use_config(config);
      BenchRow row{job.problem, job_options, config, {}, quantize, 0, 0};
      try {
        row.attention =
            time_on_stream([&](CUstream s) { workload.attend(s); }, stream.get(), 3, repeats);
      } catch (const Error& error) {
        std::printf("%-9s %4d %6d %6s %-40s failed: %s\n",
                    job.problem.variant == Variant::kFullInt8 ? "full" : "half",
                    job.problem.head_dim, job.problem.seq_q, job.problem.causal ? "on" : "off",
                    config.to_string().c_str(), error.what());
        continue;
      }
      row.tops = workload.operations() / row.attention.median_ms / 1e9;
      row.quantize_gbps =
          static_cast<double>(workload.quantize_bytes_moved()) / row.quantize.median_ms / 1e6;
      std::printf("%-9s %4d %6d %6s %-40s %9.3f %8.1f %9.3f %8.0f\n",
                  job.problem.variant == Variant::kFullInt8 ? "full" : "half",
                  job.problem.head_dim, job.problem.seq_q, job.problem.causal ? "on" : "off",
                  config.to_string().c_str(), row.attention.median_ms, row.tops,
                  row.quantize.median_ms, row.quantize_gbps);
      std::fflush(stdout);
      rows.push_back(row_json(row, info.name));
    }
  }
  if (const auto path = args.get("json")) json::write_file(*path, rows);
  return 0;
}

}  // namespace intfa::cli
