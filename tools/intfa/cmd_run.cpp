// `intfa run`: the demo. Random FP16 Q, K, V -> quantize -> JIT -> attention on the GPU, checked
// against float64 attention of the original inputs and the quantized model, and timed. Without a
// GPU it says so, compiles and caches the kernels it would launch, and exits 0.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "attention/config_choice.hpp"
#include "device/arch.hpp"
#include "device/device_memory.hpp"
#include "device/driver_api.hpp"
#include "families/any_spec.hpp"
#include "intfa/args.hpp"
#include "intfa/attention_workload.hpp"
#include "intfa/commands.hpp"
#include "intfa/problem_options.hpp"
#include "launch/kernel_runtime.hpp"
#include "reference/attention_check.hpp"
#include "spec/attention_spec.hpp"
#include "spec/quantize_specs.hpp"

namespace intfa::cli {

const char* const kRunUsage =
    "usage: intfa run [options]\n\n"
    "Quantizes random inputs, JIT-compiles and launches INT8 attention, checks it against a\n"
    "float64 reference of the original inputs (and the quantized model), and times it.\n"
    "Without a GPU: compiles and caches the kernels it would launch (for INTFA_ARCH, else for\n"
    "sm_80, sm_86, sm_87, sm_89, sm_90a, sm_100a, sm_120 and sm_121; a --config only for the\n"
    "archs that can run it, naming the others) and exits 0.\n\n"
    "  --batch B (1)  --heads H (8)  --heads-kv H (= heads)  --seq N (1024)  --seq-kv N (= seq)\n"
    "  --head-dim D (128)  --causal  --seed S (fresh each run)  --repeats R (20)\n\n"
    "A flag is on alone, or takes a value: --causal=off (1/0, true/false, on/off, yes/no).\n"
    "Integers take a k suffix: --seq 4k is 4096.\n";

namespace {

struct Demo {
  AttentionProblem problem;
  AttentionOptions options;
  DType io_type = DType::kF16;
  reference::InputFamily inputs = reference::InputFamily::kNormal;
  std::uint64_t seed = 0;
  int repeats = 20;
};

Demo parse_demo(const Arguments& arguments) {
  Grammar grammar;
  grammar.values = {"batch", "heads", "heads-kv", "seq", "seq-kv", "head-dim", "seed", "repeats"};
  for (const std::string& name : numerics_option_names()) grammar.values.push_back(name);
  grammar.flags = qk_transform_flag_names();
  grammar.auto_flags = qk_transform_auto_flag_names();
  grammar.switch_lists = {"causal"};
  const Args args(arguments, grammar);
  Demo demo;
  demo.problem.batch = static_cast<int>(args.get_int("batch", 1, 1, 1024));
  demo.problem.heads_q = static_cast<int>(args.get_int("heads", 8, 1, 1024));
  demo.problem.heads_kv = static_cast<int>(args.get_int("heads-kv", demo.problem.heads_q, 1, 1024));
  demo.problem.seq_q = static_cast<int>(args.get_int("seq", 1024, 1, 1 << 20));
  demo.problem.seq_kv = static_cast<int>(args.get_int("seq-kv", demo.problem.seq_q, 1, 1 << 20));
  demo.problem.head_dim = static_cast<int>(args.get_int("head-dim", 128, 1, 1024));
  const std::vector<bool> causal = parse_causal_list(args, {false});
  if (causal.size() != 1) throw UsageError("--causal: run takes one value (on or off)");
  demo.problem.causal = causal.front();
  parse_numerics(args, demo.problem, demo.options, demo.io_type);
  parse_qk_transforms(args, demo.options);
  demo.inputs = parse_input_family(args);
  demo.seed = static_cast<std::uint64_t>(args.get_int("seed", 0, 0, 1L << 62));
  if (demo.seed == 0) demo.seed = reference::fresh_seed();
  demo.repeats = static_cast<int>(args.get_int("repeats", 20, 1, 100000));
  // As a launch checks them, with or without a GPU; then that this machine holds the inputs.
  validate_problem_options(demo.problem, demo.options);
  const AttentionProblem& problem = demo.problem;
  require_host_memory(
      AttentionWorkload::host_bytes(problem),
      "--batch " + std::to_string(problem.batch) + " --heads " + std::to_string(problem.heads_q) +
          " --seq " + std::to_string(problem.seq_q) + " --seq-kv " +
          std::to_string(problem.seq_kv) + " --head-dim " + std::to_string(problem.head_dim));
  return demo;
}

attention::SpecRequest spec_request(const Demo& demo, device::Arch arch) {
  return attention::request_for(arch, demo.problem, demo.options, demo.io_type);
}

// The specs one call of this demo launches on `arch` (without a GPU: the heuristic's config).
std::vector<families::AnySpec> demo_specs(const Demo& demo, device::Arch arch) {
  const attention::SpecRequest request = spec_request(demo, arch);
  const KernelConfig config =
      demo.options.config ? *demo.options.config
                          : attention::heuristic_config_for(request, demo.problem);
  const std::vector<quantize::QuantizeSpec> quantize_specs =
      quantize::call_specs(request, demo.io_type, demo.options);
  std::vector<families::AnySpec> specs(quantize_specs.begin(), quantize_specs.end());
  specs.push_back(attention::make_spec(request, config));
  return specs;
}

// Whether `--config` applies to `arch`, checked as a launch there would check it. A bad field is
// an error on every arch and propagates; a config the arch cannot run (the Hopper path off sm_90a,
// more shared memory than it allows) is skipped there, with the reason.
bool config_applies(const Demo& demo, device::Arch arch, std::exception_ptr& skipped) {
  if (!demo.options.config) return true;
  try {
    attention::validate_config(attention::make_spec(spec_request(demo, arch), *demo.options.config),
                               device::default_max_shared_bytes(arch));
    return true;
  } catch (const Unsupported& unsupported) {
    std::printf("  skipped for %s: %s\n", device::arch_name(arch).c_str(), unsupported.what());
    if (!skipped) skipped = std::current_exception();
    return false;
  }
}

int compile_only(const Demo& demo, const std::string& reason) {
  std::printf("no GPU (%s)\n", reason.c_str());
  std::vector<device::Arch> archs;
  if (const auto forced = device::arch_override_from_env()) {
    archs.push_back(*forced);
  } else {
    archs = device::all_archs();
  }
  std::printf("compiling and caching the kernels this run would launch:\n");
  std::exception_ptr skipped;  // why the first arch the config does not apply to was skipped
  int compiled_archs = 0;
  for (device::Arch arch : archs) {
    if (!config_applies(demo, arch, skipped)) continue;
    ++compiled_archs;
    for (const families::AnySpec& spec : demo_specs(demo, arch)) {
      const launch::CompiledKernel compiled = launch::KernelRuntime::instance().compile(spec);
      std::printf("  %-72s %s (%zu B cubin, key %s)\n", spec.to_string().c_str(),
                  compiled.compiled_now
                      ? ("compiled in " + std::to_string(static_cast<int>(compiled.cubin->compile_ms)) +
                         " ms").c_str()
                      : "cached",
                  compiled.cubin->image.size(), compiled.key.hex().substr(0, 12).c_str());
    }
  }
  if (compiled_archs == 0) std::rethrow_exception(skipped);
  std::printf("run this on a machine with a GPU to launch and check them.\n");
  return 0;
}

}  // namespace

int run_demo(const Arguments& arguments) {
  const Demo demo = parse_demo(arguments);
  std::string reason;
  if (!device::driver_available(&reason)) return compile_only(demo, reason);
  // The launches ignore INTFA_ARCH (the library warns); a malformed value is still an error here.
  device::arch_override_from_env();
  device::use_primary_context();

  const AttentionProblem& p = demo.problem;
  std::printf("intfa run: %s\n  B=%d Hq=%d Hkv=%d Nq=%d Nkv=%d D=%d%s %s, %s inputs, seed %llu\n",
              describe_numerics(p, demo.options).c_str(), p.batch, p.heads_q, p.heads_kv, p.seq_q,
              p.seq_kv, p.head_dim, p.causal ? " causal" : "", dtype_name(demo.io_type).c_str(),
              reference::family_description(demo.inputs).c_str(),
              static_cast<unsigned long long>(demo.seed));

  reference::CheckCase check;
  check.problem = p;
  check.options = demo.options;
  if (!check.options.config) {
    // The config attention_forward would choose (tuned or heuristic), pinned so that the model
    // steps through the same key tiles and the timing measures the checked kernel.
    const device::DeviceInfo& info = device::cached_device_info(device::current_device());
    check.options.config = attention::choose_config(spec_request(demo, info.arch), p, info);
  }
  check.io_type = demo.io_type;
  check.inputs = demo.inputs;
  check.seed = demo.seed;
  const reference::CheckResult result = reference::run_check(check);
  std::printf("\naccuracy vs float64 attention of the original inputs (all %lld elements):\n"
              "  relative L2 %.4f%%   cosine %.6f   mean relative error %.4f%%\n",
              static_cast<long long>(p.batch) * p.heads_q * p.seq_q * p.head_dim,
              result.vs_f64.relative_l2 * 100, result.vs_f64.cosine,
              result.vs_f64.mean_relative_error * 100);
  std::printf("kernel vs the quantized model (bugs, not quantization): relative L2 %.2e\n",
              result.vs_model.relative_l2);
  const bool correct = result.unwritten_outputs == 0 && result.vs_model.relative_l2 <= 1e-3 &&
                       result.q_mismatches == 0 && result.k_mismatches == 0 &&
                       result.v_mismatches == 0 && result.scale_mismatches == 0 &&
                       result.mean_mismatches == 0 && result.lse_term_mismatches == 0 &&
                       result.lse_infinity_mismatches == 0;

  AttentionOptions timed_options = demo.options;
  timed_options.config = check.options.config;
  AttentionWorkload workload(p, timed_options, demo.io_type, demo.inputs, demo.seed);
  device::Stream stream;
  const Timing quantize_time = time_on_stream(
      [&](CUstream s) { workload.quantize(s); }, stream.get(), 3, demo.repeats);
  workload.quantize(stream.get());
  const Timing attention_time =
      time_on_stream([&](CUstream s) { workload.attend(s); }, stream.get(), 5, demo.repeats);
  std::printf("\ntime (median of %d, CUDA events):\n", demo.repeats);
  std::printf("  attention  %.3f ms  %.1f TOPS\n", attention_time.median_ms,
              workload.operations() / attention_time.median_ms / 1e9);
  std::printf("  quantize   %.3f ms  %.0f GB/s (bytes read + written)\n", quantize_time.median_ms,
              static_cast<double>(workload.quantize_bytes_moved()) / quantize_time.median_ms / 1e6);
  std::printf("  total      %.3f ms\n", attention_time.median_ms + quantize_time.median_ms);
  std::printf("\n%s\n", correct ? "PASS" : "FAIL: the kernel does not match the quantized model");
  if (!correct) std::printf("  %s\n", result.to_string().c_str());
  return correct ? 0 : 1;
}

}  // namespace intfa::cli
