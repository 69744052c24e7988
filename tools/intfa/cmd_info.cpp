#include <cstdio>
#include <exception>
#include <optional>

#include "cache/disk_cache.hpp"
#include "common/locations.hpp"
#include "common/strings.hpp"
#include "device/arch.hpp"
#include "device/device_info.hpp"
#include "device/driver_api.hpp"
#include "intfa/args.hpp"
#include "intfa/commands.hpp"
#include "intfa/errors.hpp"
#include "intfa_version.hpp"
#include "launch/kernel_runtime.hpp"
#include "nvrtc/compiler.hpp"
#include "render/template_set.hpp"
#include "spec/variant_policy.hpp"
#include "tune/database_file.hpp"

namespace intfa::cli {

const char* const kInfoUsage =
    "usage: intfa info\n\n"
    "Prints the GPU (or 'no GPU'), the target arch kernels are compiled for, the driver and NVRTC\n"
    "versions, where NVRTC and the CUDA headers were found (a PyPI package or the CUDA toolkit),\n"
    "where kernel templates come from, the default numerics (intfa.attention's variant \"auto\"\n"
    "per head dim, length and causal flag; automatic rotation; K smoothing), and the cache\n"
    "directory with its entry count and size.\n";

namespace {

// What the kernels are compiled for, as `intfa run` and `intfa precompile` would compile them
// here: the GPU's arch (launches ignore INTFA_ARCH); without a GPU, INTFA_ARCH's for `run` (and
// the library's precompile), else every arch; `precompile` takes every arch unless --arch.
void print_target_arch(bool have_gpu) {
  try {
    const std::optional<device::Arch> forced = device::arch_override_from_env();
    if (have_gpu) {
      const device::Arch arch = device::query_device(device::current_device()).arch;
      std::printf("target arch    %s (the GPU's%s)\n", device::arch_name(arch).c_str(),
                  forced ? "; INTFA_ARCH is ignored with a GPU" : "");
    } else if (forced) {
      std::printf("target arch    %s (INTFA_ARCH; intfa precompile: every arch unless --arch)\n",
                  device::arch_name(*forced).c_str());
    } else {
      std::printf(
          "target arch    every arch without a GPU (intfa run, intfa precompile; INTFA_ARCH picks "
          "one):\n               %s\n",
          device::arch_names("and").c_str());
    }
  } catch (const std::exception& error) {  // a malformed INTFA_ARCH, a GPU of no target
    std::printf("target arch    none: %s\n", error.what());
  }
}

// The rows `intfa tune --variant-table` measured on the GPU `info` describes, which come before
// the shipped table.
void print_tuned_variant_rows(const device::DeviceInfo& info) {
  try {
    const tune::DeviceKey key = tune::DeviceKey::of(info);
    for (const tune::VariantRow& row : tune::process_database()->variant_rows()) {
      if (row.device == key) {
        std::printf("numerics       variant auto tuned on this GPU (%s): %s\n",
                    row.tuned_at.c_str(), row.to_string().c_str());
      }
    }
  } catch (const std::exception& error) {  // an unusable INTFA_TUNE_DB: the shipped table serves
    std::printf("numerics       tuned variant rows: none read (%s)\n", error.what());
  }
}

// intfa.attention's default numerics on the target arch (the GPU's, else INTFA_ARCH's, else the
// one arch with a table): this GPU's tuned variant rows, the shipped table's rows (for the lengths,
// head dims and causal flags those leave), then what every call does.
void print_default_numerics(bool have_gpu) {
  device::Arch arch = device::Arch::kSm90a;
  std::optional<device::DeviceInfo> gpu;
  try {
    if (have_gpu) {
      gpu = device::query_device(device::current_device());
      arch = gpu->arch;
    } else if (const auto forced = device::arch_override_from_env()) {
      arch = *forced;
    }
  } catch (const std::exception&) {  // print_target_arch said why
  }
  if (gpu) print_tuned_variant_rows(*gpu);
  for (const std::string& line : strings::split(attention::variant_policy_text(arch), '\n')) {
    if (!line.empty()) std::printf("numerics       %s\n", line.c_str());
  }
  std::printf(
      "numerics       automatic rotation (heads whose keys have outlier channels), K smoothing\n");
}

}  // namespace

int run_info(const Arguments& arguments) {
  const Args args(arguments, Grammar{});  // no options: refuses any
  std::printf("intfa          %s\n", INTFA_VERSION_STRING);
  std::string reason;
  if (device::driver_available(&reason)) {
    const device::DriverApi& api = device::driver();
    const device::DeviceInfo info = device::query_device(device::current_device());
    std::printf("GPU            %s\n", info.to_string().c_str());
    std::printf("driver         CUDA %d.%d\n", api.driver_version / 1000,
                (api.driver_version % 1000) / 10);
  } else {
    std::printf("GPU            no GPU (%s)\n", reason.c_str());
  }
  print_target_arch(device::driver_available());
  print_default_numerics(device::driver_available());
  const std::string nvrtc_library = nvrtc::library_path();
  std::printf("NVRTC          %s, %s (%s)\n", nvrtc::version().to_string().c_str(),
              nvrtc_library.empty() ? "library path unknown" : nvrtc_library.c_str(),
              nvrtc::library_origin(nvrtc_library).c_str());
  const auto include_dir = nvrtc::cuda_include_dir();
  if (include_dir) {
    std::printf("CUDA headers   %s (%s)\n", include_dir->c_str(),
                nvrtc::include_dir_origin(*include_dir).c_str());
  } else {
    std::printf("CUDA headers   not found (not needed)\n");
  }
  std::printf("templates      %s (%zu files)\n", render::TemplateSet::active().origin().c_str(),
              render::TemplateSet::active().files().size());
  // The kernels a Python package ships beside this tool (main.cpp), when it ships usable ones.
  try {
    const auto packaged = launch::KernelRuntime::instance().packaged_kernels();
    if (!packaged.empty()) {
      std::printf("kernels        %s (shipped with the package)\n", packaged.c_str());
    }
  } catch (const std::exception& error) {  // bad cache settings: the runtime cannot start
    std::printf("kernels        (the runtime cannot start: %s)\n", error.what());
  }
  const auto directory = locations::default_cache_directory();
  if (!directory) {
    std::printf("cache          disabled (INTFA_CACHE_DISABLE=1)\n");
    return 0;
  }
  const cache::DiskCache disk(*directory);
  std::uint64_t bytes = 0;
  std::vector<cache::EntryInfo> entries;
  try {
    entries = disk.list();
  } catch (const CacheError& error) {
    // An unreadable cache is not an empty one.
    std::printf("cache          %s (%s)\n", directory->c_str(), error.what());
    return 1;
  }
  for (const auto& entry : entries) bytes += entry.size_bytes;
  std::printf("cache          %s (%zu entries, %s)\n", directory->c_str(), entries.size(),
              strings::human_bytes(bytes).c_str());
  return 0;
}

}  // namespace intfa::cli
