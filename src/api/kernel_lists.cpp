#include "api/kernel_lists.hpp"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

#include "device/arch.hpp"
#include "families/paged_family.hpp"
#include "spec/quantize_specs.hpp"

namespace intfa::aot {

std::vector<families::AnySpec> attention_call_specs(const attention::SpecRequest& request,
                                                    DType dtype, const AttentionOptions& numerics,
                                                    const std::vector<KernelConfig>& configs) {
  // attention_forward_16bit's request: Hopper configs quantize Q in the kernel, and Q's own
  // pass is listed only where some config does not.
  const attention::SpecRequest call_request = attention::with_q_in_kernel(request, numerics, dtype);
  const int max_shared_bytes = device::default_max_shared_bytes(request.arch);
  std::vector<attention::AttentionSpec> attention_specs;
  bool q_rows_pass = false;
  for (const KernelConfig& config : configs) {
    attention::AttentionSpec spec = attention::make_spec(call_request, config);
    attention::validate_config(spec, max_shared_bytes);
    q_rows_pass = q_rows_pass || !spec.quantizes_q;
    attention_specs.push_back(std::move(spec));
  }
  const std::vector<quantize::QuantizeSpec> quantize_specs =
      quantize::call_specs(request, dtype, numerics, q_rows_pass);
  std::vector<families::AnySpec> specs(quantize_specs.begin(), quantize_specs.end());
  specs.insert(specs.end(), attention_specs.begin(), attention_specs.end());
  return specs;
}

std::vector<families::AnySpec> attention_call_specs(const attention::SpecRequest& request,
                                                    DType dtype, const AttentionOptions& numerics) {
  return attention_call_specs(request, dtype, numerics, attention::heuristic_configs(request));
}

std::vector<families::AnySpec> paged_specs(device::Arch arch, int head_dim, int bits, DType dtype) {
  const std::vector<paged::PagedSpec> specs = paged::family_specs(arch, head_dim, bits, dtype);
  for (const paged::PagedSpec& spec : specs) {
    // Every config of the list fits the arch (checked without a device).
    if (spec.kernel == paged::PagedKernel::kDecode) {
      paged::check_decode_config(spec, device::default_max_shared_bytes(arch));
    }
  }
  std::vector<families::AnySpec> all(specs.begin(), specs.end());
  // paged_prefill's attention: the varlen half INT8 kernel, causal or not, with the cache's K
  // smoothed or not, nothing rotated (and Q's own pass where the kernel does not quantize Q);
  // the call's K and V passes are the gather's, so the quantize kernels of K and V are left out.
  for (bool causal : {true, false}) {
    for (bool smooth_k : {true, false}) {
      attention::SpecRequest request;
      request.arch = arch;
      request.head_dim = head_dim;
      request.variant = Variant::kHalfInt8;
      request.causal = causal;
      request.varlen = true;
      request.v_type = request.output_type = dtype;
      AttentionOptions options;
      options.smooth_k = smooth_k;
      options.rotate_qk = QKRotation::kOff;
      bool q_rows_pass = false;
      for (const families::AnySpec& spec : attention_call_specs(request, dtype, options)) {
        if (const auto* attention = spec.get_if<attention::AttentionSpec>()) {
          q_rows_pass = q_rows_pass || !attention->quantizes_q;
          all.push_back(spec);
        }
      }
      if (q_rows_pass) {
        for (const quantize::QuantizeSpec& spec :
             quantize::call_specs(request, dtype, options, true)) {
          if (spec.kernel == quantize::QuantizeKernel::kRows) all.push_back(spec);
        }
      }
    }
  }
  return all;
}

CompileSummary compile_in_parallel(const std::vector<families::AnySpec>& specs, unsigned threads,
                                   const CompileFunction& compile,
                                   const ProgressFunction& progress) {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  CompileFunction compile_one = compile;
  if (!compile_one) {
    compile_one = [](const families::AnySpec& spec) {
      return launch::KernelRuntime::instance().compile(spec);
    };
  }
  CompileSummary summary;
  std::mutex mutex;
  std::atomic<std::size_t> next{0};
  std::size_t done = 0;
  auto worker = [&] {
    for (std::size_t index = next++; index < specs.size(); index = next++) {
      bool compiled_now = false;
      std::string failure;
      std::exception_ptr exception;
      try {
        compiled_now = compile_one(specs[index]).compiled_now;
      } catch (const std::exception& error) {  // one failure must not end the other compiles
        failure = specs[index].to_string() + ": " + error.what();
        exception = std::current_exception();
      } catch (...) {
        failure = specs[index].to_string() + ": unknown error";
        exception = std::current_exception();
      }
      std::lock_guard<std::mutex> lock(mutex);
      if (exception) {
        summary.failures.push_back(std::move(failure));
        if (!summary.first_failure) summary.first_failure = exception;
      } else {
        ++(compiled_now ? summary.compiled : summary.cached);
      }
      ++done;
      if (progress) progress(done);
    }
  };
  const std::size_t workers = std::min<std::size_t>(threads, specs.size());
  std::vector<std::thread> pool;
  for (std::size_t i = 1; i < workers; ++i) pool.emplace_back(worker);
  worker();  // the calling thread takes specs too
  for (std::thread& thread : pool) thread.join();
  return summary;
}

}  // namespace intfa::aot
