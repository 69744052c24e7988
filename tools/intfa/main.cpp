// intfa: the command-line face of the library (device info, cache management, the demo, and the
// deployment/tuning tools). Exit codes: 0 success, 1 failure (a check failed, an error), 2 usage.
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <system_error>

#include "common/strings.hpp"
#include "intfa/args.hpp"
#include "intfa/commands.hpp"
#include "intfa/errors.hpp"
#include "intfa/problem_options.hpp"
#include "intfa_version.hpp"
#include "launch/kernel_runtime.hpp"

namespace intfa::cli {

const std::vector<Command>& commands() {
  static const std::vector<Command> table = {
      {"info", "GPU, target arch, driver and NVRTC versions, cache location and size", kInfoUsage,
       run_info},
      {"run", "the demo: quantize, JIT-compile, launch and check attention", kRunUsage, run_demo,
       numerics_options_help()},
      {"cache", "list, verify or clear the kernel cache", kCacheUsage, run_cache},
      {"precompile", "compile kernels for deployment into a bundle with a manifest (no GPU)",
       kPrecompileUsage, run_precompile, numerics_flags_help()},
      {"tune", "time tile configs on this GPU and record the fastest (tuning database)", kTuneUsage,
       run_tune, numerics_flags_help()},
      {"bench", "time attention and quantization over a grid of problems", kBenchUsage, run_bench,
       numerics_options_help()},
  };
  return table;
}

namespace {

void print_usage(std::FILE* stream, const Command& command) {
  std::fprintf(stream, "%s", command.usage);
  if (command.shared_options != nullptr) {
    std::fprintf(stream, "\nNumerics and problem options:\n%s", command.shared_options);
  }
}

void print_overview() {
  std::printf("intfa %s - JIT INT8/INT4 FlashAttention for NVIDIA GPUs\n\n", INTFA_VERSION_STRING);
  std::printf("usage: intfa <command> [options]   (intfa <command> --help for details)\n\n");
  for (const Command& command : commands()) {
    std::printf("  %-11s %s\n", command.name, command.summary);
  }
  std::printf(
      "\nEnvironment: INTFA_ARCH, INTFA_CACHE_DIR, INTFA_DEPLOY_CACHE, INTFA_CACHE_DISABLE,\n"
      "INTFA_TUNE_DB, INTFA_LOG, ... (see README.md, section Environment, and cache/README.md)\n");
}

// The kernels a Python package ships (python/CMakeLists.txt puts this tool in intfa/bin/ and the
// bundle in intfa/kernels/), read as the package's own imports read them.
void use_packaged_kernels() {
  std::error_code error;
  const std::filesystem::path tool = std::filesystem::canonical("/proc/self/exe", error);
  if (error) return;
  const std::filesystem::path kernels = tool.parent_path().parent_path() / "kernels";
  if (std::filesystem::is_regular_file(kernels / "manifest.json", error)) {
    intfa::launch::KernelRuntime::use_packaged_kernels(kernels);
  }
}

}  // namespace
}  // namespace intfa::cli

int main(int argc, char** argv) {
  using namespace intfa::cli;
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") ||
      !std::strcmp(argv[1], "help")) {
    print_overview();
    return argc < 2 ? 2 : 0;
  }
  if (!std::strcmp(argv[1], "--version")) {
    std::printf("intfa %s\n", INTFA_VERSION_STRING);
    return 0;
  }
  for (const Command& command : commands()) {
    if (std::strcmp(argv[1], command.name) != 0) continue;
    use_packaged_kernels();
    const Arguments arguments(argv + 2, argv + argc);
    // tune's two modes at once are a usage error (run_tune): the verb's own help names both.
    const bool both_tune_modes =
        command.run == run_tune && wants_decode(arguments) && wants_variant_table(arguments);
    for (const std::string& argument : arguments) {
      if (argument == "--help" || argument == "-h") {
        // bench and tune take the paged cache's own options after --decode, tune the variant
        // table's after --variant-table.
        if (both_tune_modes) {
          print_usage(stdout, command);
        } else if (wants_decode(arguments) &&
                   (command.run == run_bench || command.run == run_tune)) {
          std::printf("%s", kDecodeUsage);
        } else if (wants_variant_table(arguments) && command.run == run_tune) {
          std::printf("%s", kVariantTableUsage);
        } else {
          print_usage(stdout, command);
        }
        return 0;
      }
    }
    try {
      return command.run(arguments);
    } catch (const UsageError& error) {
      // The error and where the help is: the whole help would bury the one line that matters.
      // The mode whose options these were: as --help picks its usage.
      const bool tune = command.run == run_tune;
      const char* mode = both_tune_modes ? ""
                         : wants_decode(arguments) && (tune || command.run == run_bench)
                             ? " --decode"
                         : wants_variant_table(arguments) && tune ? " --variant-table"
                                                                  : "";
      std::fprintf(stderr, "intfa %s: %s\nsee 'intfa %s%s --help' for its options\n", command.name,
                   intfa::strings::printable(error.what()).c_str(), command.name, mode);
      return 2;
    } catch (const intfa::Error& error) {
      std::fprintf(stderr, "intfa %s: error (%s): %s\n", command.name,
                   intfa::status_name(error.status()),
                   intfa::strings::printable(error.what(), true).c_str());
      return 1;
    } catch (const std::exception& error) {
      std::fprintf(stderr, "intfa %s: error: %s\n", command.name,
                   intfa::strings::printable(error.what(), true).c_str());
      return 1;
    }
  }
  std::fprintf(stderr, "intfa: unknown command '%s'\nsee 'intfa --help' for the commands\n",
               intfa::strings::printable(argv[1]).c_str());
  return 2;
}
