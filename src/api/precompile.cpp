#include "intfa/precompile.hpp"

#include <exception>

#include "api/kernel_lists.hpp"
#include "device/arch.hpp"
#include "device/device_info.hpp"
#include "families/any_spec.hpp"
#include "intfa/errors.hpp"
#include "intfa/paged.hpp"
#include "spec/attention_spec.hpp"

namespace intfa {
namespace {

device::Arch resolve_arch(const std::string& name) {
  if (name.empty()) return device::target_arch();
  const auto arch = device::parse_arch(name);
  if (!arch) throw InvalidArgument("arch", name, "expected " + device::arch_names());
  return *arch;
}

std::vector<families::AnySpec> request_specs(const PrecompileRequest& request, device::Arch arch) {
  // Causal on and off share the quantize kernels: each spec once, first occurrence kept.
  aot::KernelList list;
  for (DType dtype : request.dtypes) {
    for (int head_dim : request.head_dims) {
      for (Variant variant : request.variants) {
        for (bool causal : request.causal) {
          // A head dim between the kernels' launches the next kernel's specs.
          AttentionProblem problem;
          problem.head_dim = attention::kernel_head_dim(head_dim, "head_dims");
          problem.variant = variant;
          problem.causal = causal;
          problem.qk_bits = request.qk_bits;
          list.add(aot::attention_call_specs(
              attention::request_for(arch, problem, request.options, dtype), dtype,
              request.options));
        }
      }
    }
  }
  return list.specs();
}

void validate_request(const PrecompileRequest& request) {
  for (int head_dim : request.head_dims) attention::kernel_head_dim(head_dim, "head_dims");
  for (DType dtype : request.dtypes) {
    if (dtype != DType::kF16 && dtype != DType::kBF16) {
      throw InvalidArgument("dtypes", dtype_name(dtype), "expected f16 or bf16");
    }
  }
  if (request.qk_bits != 8 && request.qk_bits != 4) {
    throw InvalidArgument("qk_bits", std::to_string(request.qk_bits), "expected 8 or 4");
  }
  if (request.head_dims.empty()) throw InvalidArgument("head_dims", "[]", "expected one or more");
  if (request.variants.empty()) throw InvalidArgument("variants", "[]", "expected one or more");
  if (request.dtypes.empty()) throw InvalidArgument("dtypes", "[]", "expected one or more");
  if (request.causal.empty()) throw InvalidArgument("causal", "[]", "expected one or more");
}

// Compiles `specs` into the user cache on `jobs` threads (0: all cores) and reports them; the
// first failure is rethrown after every spec was tried.
PrecompileReport compile_specs(device::Arch arch, const std::vector<families::AnySpec>& specs,
                               unsigned jobs) {
  PrecompileReport report;
  report.arch = device::arch_name(arch);
  report.kernels = specs.size();
  for (const families::AnySpec& spec : specs) report.specs.push_back(spec.to_string());
  const aot::CompileSummary summary = aot::compile_in_parallel(specs, jobs);
  if (summary.first_failure) std::rethrow_exception(summary.first_failure);
  report.compiled_now = summary.compiled;
  report.already_present = report.kernels - report.compiled_now;
  return report;
}

}  // namespace

PrecompileReport precompile(const PrecompileRequest& request) {
  validate_request(request);
  const device::Arch arch = resolve_arch(request.arch);
  return compile_specs(arch, request_specs(request, arch), request.jobs);
}

PrecompileReport precompile_paged(const PagedPrecompileRequest& request) {
  if (request.head_dims.empty()) throw InvalidArgument("head_dims", "[]", "expected one or more");
  if (request.bits.empty()) throw InvalidArgument("bits", "[]", "expected one or more");
  if (request.dtypes.empty()) throw InvalidArgument("dtypes", "[]", "expected one or more");
  for (int head_dim : request.head_dims) {
    if (head_dim != 64 && head_dim != 128 && head_dim != 256) {
      throw InvalidArgument("head_dims", std::to_string(head_dim),
                            "supported head dims are 64, 128 and 256");
    }
  }
  for (int bits : request.bits) {
    if (bits != 8 && bits != 4) throw InvalidArgument("bits", std::to_string(bits), "expected 8 or 4");
  }
  for (DType dtype : request.dtypes) {
    if (dtype != DType::kF16 && dtype != DType::kBF16) {
      throw InvalidArgument("dtypes", dtype_name(dtype), "expected f16 or bf16");
    }
  }
  const device::Arch arch = resolve_arch(request.arch);
  aot::KernelList list;
  for (DType dtype : request.dtypes)
    for (int head_dim : request.head_dims)
      for (int bits : request.bits) list.add(aot::paged_specs(arch, head_dim, bits, dtype));
  const std::vector<families::AnySpec>& specs = list.specs();
  return compile_specs(arch, specs, request.jobs);
}

}  // namespace intfa
