// `intfa bench --jit`: what the JIT path costs. Three numbers per kernel (the quantize kernel and
// the attention kernel the runtime picks for d=128):
//   cold compile   render + key + NVRTC + disk write, into an empty cache directory;
//   disk hit       reading and verifying the cubin and loading it into a context that has never
//                  seen it (a fresh context each time, since the runtime keeps modules loaded);
//   memory hit     host time per attention_forward call above a raw launch of the same kernel
//                  with the same parameters (both enqueue only; the GPU is idle between batches).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "attention/attention_launch.hpp"
#include "attention/config_choice.hpp"
#include "common/json.hpp"
#include "device/device_info.hpp"
#include "device/device_memory.hpp"
#include "device/driver_api.hpp"
#include "families/any_spec.hpp"
#include "intfa/attention_workload.hpp"
#include "intfa/commands.hpp"
#include "intfa/errors.hpp"
#include "launch/kernel_runtime.hpp"
#include "spec/attention_spec.hpp"

namespace intfa::cli {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double milliseconds_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Points the process-wide runtime at a fresh, empty cache directory for as long as it lives.
class FreshCacheDirectory {
 public:
  FreshCacheDirectory() {
    std::string pattern = (fs::temp_directory_path() / "intfa-jit-bench-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw InternalError("cannot create a directory like " + pattern);
    path_ = pattern;
    const char* previous = std::getenv("INTFA_CACHE_DIR");
    if (previous != nullptr) previous_ = previous;
    setenv("INTFA_CACHE_DIR", path_.c_str(), 1);
    launch::KernelRuntime::instance().reset_for_testing();
  }
  ~FreshCacheDirectory() {
    if (previous_.empty()) unsetenv("INTFA_CACHE_DIR");
    else setenv("INTFA_CACHE_DIR", previous_.c_str(), 1);
    launch::KernelRuntime::instance().reset_for_testing();
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  FreshCacheDirectory(const FreshCacheDirectory&) = delete;
  FreshCacheDirectory& operator=(const FreshCacheDirectory&) = delete;

 private:
  fs::path path_;
  std::string previous_;
};

struct JitKernel {
  std::string name;
  families::AnySpec spec;
  unsigned shared_bytes = 0;
};

struct JitTimes {
  std::vector<double> cold_compile_ms;
  std::vector<double> disk_hit_ms;
};

JitTimes time_jit_path(const JitKernel& kernel, int repeats) {
  JitTimes times;
  launch::KernelRuntime& runtime = launch::KernelRuntime::instance();
  for (int i = 0; i < repeats; ++i) {
    FreshCacheDirectory directory;
    const auto compile_start = Clock::now();
    const launch::CompiledKernel compiled = runtime.compile(kernel.spec);
    times.cold_compile_ms.push_back(milliseconds_since(compile_start));
    if (!compiled.compiled_now) throw InternalError("bench --jit: a fresh cache directory was not cold");

    // Forget the cubin so the next lookup reads the disk, and use a context the kernel was never
    // loaded into. Contexts are kept (not destroyed) so that no new one reuses a handle the
    // runtime has a module for.
    runtime.reset_for_testing();
    CUcontext fresh = nullptr;
    INTFA_DRIVER(cuCtxCreate, &fresh, nullptr, 0, device::current_device());
    const auto load_start = Clock::now();
    runtime.load(kernel.spec, fresh, kernel.shared_bytes);
    times.disk_hit_ms.push_back(milliseconds_since(load_start));
    device::use_primary_context();
  }
  return times;
}

// Host microseconds per call of `enqueue`, median over batches; the stream drains between batches
// so that no call waits for queue space.
double host_us_per_call(const std::function<void()>& enqueue, CUstream stream, int batches,
                        int calls_per_batch) {
  std::vector<double> per_call;
  for (int batch = 0; batch < batches; ++batch) {
    INTFA_DRIVER(cuStreamSynchronize, stream);
    const auto start = Clock::now();
    for (int call = 0; call < calls_per_batch; ++call) enqueue();
    per_call.push_back(milliseconds_since(start) * 1000.0 / calls_per_batch);
  }
  INTFA_DRIVER(cuStreamSynchronize, stream);
  return median(per_call);
}

struct CallOverhead {
  double raw_launch_us = 0;
  double api_call_us = 0;
};

CallOverhead time_call_overhead(AttentionWorkload& workload, CUstream stream) {
  const attention::PlannedLaunch planned = attention::plan_launch(
      workload.problem(), workload.tensors(), stream, workload.options());
  CallOverhead overhead;
  auto raw = [&] { launch::launch(*planned.kernel, planned.shape, stream, planned.arguments()); };
  auto api = [&] { workload.attend(stream); };
  for (int round = 0; round < 2; ++round) {  // the first round warms caches and clocks
    overhead.raw_launch_us = host_us_per_call(raw, stream, 50, 200);
    overhead.api_call_us = host_us_per_call(api, stream, 50, 200);
  }
  return overhead;
}

JitKernel quantize_kernel(device::Arch arch) {
  // The spec quantize_qk builds for FP16 rows of head dim 128.
  quantize::QuantizeSpec spec;
  spec.kernel = quantize::QuantizeKernel::kRows;
  spec.arch = arch;
  spec.head_dim = 128;
  spec.input_type = kernels::ElementType::kF16;
  spec.qk_bits = 8;
  return JitKernel{"quantize q/k d128 f16", spec, 0};
}

JitKernel attention_kernel(const AttentionProblem& problem, const device::DeviceInfo& info) {
  attention::SpecRequest request;
  request.arch = info.arch;
  request.head_dim = problem.head_dim;
  const KernelConfig config = attention::choose_config(request, problem, info);
  const attention::AttentionSpec spec = attention::make_spec(request, config);
  return JitKernel{"attention d128 full INT8 " + config.to_string(), spec,
                   static_cast<unsigned>(attention::shared_bytes(spec))};
}

json::Value times_json(const JitKernel& kernel, const JitTimes& times) {
  json::Value object = json::Value::object();
  object.set("kernel", kernel.name);
  object.set("cold_compile_ms_median", median(times.cold_compile_ms));
  object.set("cold_compile_ms_first", times.cold_compile_ms.front());
  object.set("disk_hit_to_launchable_ms_median", median(times.disk_hit_ms));
  return object;
}

}  // namespace

int run_jit_bench(const std::string& json_path, int repeats) {
  device::use_primary_context();
  const device::DeviceInfo& info = device::cached_device_info(device::current_device());
  AttentionProblem problem;
  problem.batch = 1;
  problem.heads_q = problem.heads_kv = 1;
  problem.seq_q = problem.seq_kv = 128;
  problem.head_dim = 128;

  json::Value rows = json::Value::array();
  std::printf("%-60s %12s %12s %14s\n", "kernel", "cold (first)", "cold median", "disk->launch");
  for (const JitKernel& kernel : {quantize_kernel(info.arch), attention_kernel(problem, info)}) {
    const JitTimes times = time_jit_path(kernel, repeats);
    std::printf("%-60s %9.1f ms %9.1f ms %11.2f ms\n", kernel.name.c_str(),
                times.cold_compile_ms.front(), median(times.cold_compile_ms),
                median(times.disk_hit_ms));
    rows.push_back(times_json(kernel, times));
  }

  AttentionWorkload workload(problem, AttentionOptions{}, DType::kF16,
                             reference::InputFamily::kNormal, 1);
  device::Stream stream;
  workload.quantize(stream.get());
  const CallOverhead overhead = time_call_overhead(workload, stream.get());
  std::printf("memory hit: attention_forward %.2f us/call, raw launch %.2f us/call, overhead "
              "%.2f us\n",
              overhead.api_call_us, overhead.raw_launch_us,
              overhead.api_call_us - overhead.raw_launch_us);

  if (!json_path.empty()) {
    json::Value document = json::Value::object();
    document.set("gpu", info.name);
    document.set("kernels", std::move(rows));
    document.set("raw_launch_us", overhead.raw_launch_us);
    document.set("api_call_us", overhead.api_call_us);
    document.set("memory_hit_overhead_us", overhead.api_call_us - overhead.raw_launch_us);
    json::write_file(json_path, document);
  }
  return 0;
}

}  // namespace intfa::cli
