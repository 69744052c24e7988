#include "nvrtc/compiler.hpp"

#include <dlfcn.h>
#include <nvrtc.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "common/env.hpp"
#include "common/strings.hpp"
#include "intfa/errors.hpp"

namespace intfa::nvrtc {
namespace {

std::atomic<std::uint64_t> g_compile_count{0};

[[noreturn]] void fail(const render::KernelSource& source, const std::string& log,
                       const std::string& summary) {
  throw CompileError(source.text, log, summary);
}

// Owns one nvrtcProgram.
class Program {
 public:
  Program(const render::KernelSource& source, const render::TemplateSet& templates) {
    const render::RenderedUnit& unit = source.unit;
    std::vector<const char*> contents;
    std::vector<const char*> names;
    for (const std::string& header : unit.headers) {
      names.push_back(header.c_str());
      contents.push_back(templates.find(header)->c_str());
    }
    const nvrtcResult result =
        nvrtcCreateProgram(&handle_, unit.source.c_str(), unit.file_name.c_str(),
                           static_cast<int>(names.size()), contents.data(), names.data());
    if (result != NVRTC_SUCCESS) {
      handle_ = nullptr;
      fail(source, "", std::string("nvrtcCreateProgram failed: ") + nvrtcGetErrorString(result));
    }
  }
  ~Program() {
    if (handle_ != nullptr) nvrtcDestroyProgram(&handle_);
  }
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;
  nvrtcProgram get() const { return handle_; }

 private:
  nvrtcProgram handle_ = nullptr;
};

std::string program_log(nvrtcProgram program) {
  std::size_t size = 0;
  if (nvrtcGetProgramLogSize(program, &size) != NVRTC_SUCCESS || size <= 1) return "";
  std::string log(size, '\0');
  if (nvrtcGetProgramLog(program, log.data()) != NVRTC_SUCCESS) return "";
  // NVRTC 13's log ends with a NUL, two when ptxas wrote to it: drop every one, not just the last
  // (a NUL left in would be printed as text).
  log.erase(std::remove(log.begin(), log.end(), '\0'), log.end());
  return log;
}

bool has_cuda_headers(const std::filesystem::path& directory) {
  std::error_code error;
  return std::filesystem::is_regular_file(directory / "cuda.h", error);
}

std::optional<std::string> find_cuda_include_dir() {
  namespace fs = std::filesystem;
  if (const auto forced = env::get("INTFA_CUDA_INCLUDE_DIR")) {
    if (has_cuda_headers(*forced)) return *forced;
    throw InvalidArgument("INTFA_CUDA_INCLUDE_DIR", "'" + *forced + "'",
                          "expected a directory holding cuda.h");
  }
  std::vector<fs::path> candidates;
  for (const char* variable : {"CUDA_HOME", "CUDA_PATH"}) {
    if (const auto root = env::get(variable)) candidates.push_back(fs::path(*root) / "include");
  }
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&nvrtcVersion), &info) != 0 && info.dli_fname != nullptr) {
    const fs::path library_dir = fs::path(info.dli_fname).parent_path();
    candidates.push_back(library_dir.parent_path() / "include");                // cuda/lib64
    candidates.push_back(library_dir.parent_path().parent_path() / "include");  // targets/*/lib
  }
  candidates.emplace_back(INTFA_BUILD_CUDA_INCLUDE_DIR);
  candidates.emplace_back("/usr/local/cuda/include");
  for (const fs::path& candidate : candidates) {
    if (has_cuda_headers(candidate)) return candidate.string();
  }
  return std::nullopt;
}

// Whether `path` lies in a folder nvidia/cu<digits>/<leaf>/ (the layout of the CUDA 13 wheels).
bool in_pypi_layout(const std::filesystem::path& path, const std::string& leaf) {
  std::vector<std::string> parts;
  for (const auto& part : path) parts.push_back(part.string());
  for (std::size_t i = 0; i + 2 < parts.size(); ++i) {
    const std::string& cu = parts[i + 1];
    if (parts[i] == "nvidia" && cu.size() > 2 && cu.compare(0, 2, "cu") == 0 &&
        std::all_of(cu.begin() + 2, cu.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
        parts[i + 2] == leaf) {
      return true;
    }
  }
  return false;
}

}  // namespace

std::string library_path() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&nvrtcVersion), &info) == 0 || info.dli_fname == nullptr) {
    return "";
  }
  std::error_code error;
  const auto resolved = std::filesystem::canonical(info.dli_fname, error);
  return error ? std::string(info.dli_fname) : resolved.string();
}

std::string library_origin(const std::string& path) {
  if (path.empty()) return "origin unknown";
  return in_pypi_layout(path, "lib") ? "PyPI package nvidia-cuda-nvrtc" : "CUDA toolkit";
}

std::string include_dir_origin(const std::string& path) {
  return in_pypi_layout(std::filesystem::path(path) / "", "include")
             ? "PyPI package nvidia-cuda-runtime"
             : "CUDA toolkit";
}

std::string Cubin::to_string() const {
  return lowered_name + " (" + std::to_string(image.size()) + " B cubin)";
}

Version version() {
  Version v;
  nvrtcVersion(&v.major, &v.minor);
  return v;
}

std::vector<std::string> compile_options(device::Arch arch) {
  std::vector<std::string> options = {
      "-std=c++17", "--gpu-architecture=" + device::arch_name(arch),
      // Explicit floating-point choices rather than --use_fast_math. The kernels' fast paths
      // (ex2.approx, rounding by the 1.5*2^23 trick) are written as PTX and do not depend on these.
      "--fmad=true", "--ftz=true", "--prec-div=true", "--prec-sqrt=true"};
  if (env::flag("INTFA_LINEINFO")) options.emplace_back("-lineinfo");
  return options;
}

std::optional<std::string> cuda_include_dir() {
  static const std::optional<std::string> directory = find_cuda_include_dir();
  return directory;
}

Cubin compile(const render::KernelSource& source, const std::vector<std::string>& options,
              const render::TemplateSet& templates) {
  const render::RenderedUnit& unit = source.unit;
  const auto started = std::chrono::steady_clock::now();
  for (const std::string& header : unit.headers) {
    if (templates.find(header) == nullptr) {
      fail(source, "", "template '" + header + "' is missing from " + templates.origin());
    }
  }
  Program program(source, templates);
  const nvrtcResult named = nvrtcAddNameExpression(program.get(), unit.name_expression.c_str());
  if (named != NVRTC_SUCCESS) {
    fail(source, "", std::string("nvrtcAddNameExpression failed: ") + nvrtcGetErrorString(named));
  }

  std::vector<std::string> all_options = options;
  if (const auto include_dir = cuda_include_dir()) all_options.push_back("-I" + *include_dir);
  std::vector<const char*> option_pointers;
  for (const std::string& option : all_options) option_pointers.push_back(option.c_str());

  g_compile_count.fetch_add(1, std::memory_order_relaxed);
  const nvrtcResult compiled = nvrtcCompileProgram(
      program.get(), static_cast<int>(option_pointers.size()), option_pointers.data());
  const std::string log = program_log(program.get());
  if (compiled != NVRTC_SUCCESS) {
    fail(source, log,
         std::string("NVRTC could not compile ") + unit.file_name + " (" +
             nvrtcGetErrorString(compiled) + ") with options: " + strings::join(all_options, " "));
  }

  Cubin cubin;
  cubin.log = log;
  std::size_t size = 0;
  if (nvrtcGetCUBINSize(program.get(), &size) != NVRTC_SUCCESS || size == 0) {
    fail(source, log, "NVRTC produced no cubin");
  }
  cubin.image.resize(size);
  if (nvrtcGetCUBIN(program.get(), cubin.image.data()) != NVRTC_SUCCESS) {
    fail(source, log, "nvrtcGetCUBIN failed");
  }
  const char* lowered = nullptr;
  if (nvrtcGetLoweredName(program.get(), unit.name_expression.c_str(), &lowered) !=
          NVRTC_SUCCESS ||
      lowered == nullptr) {
    fail(source, log, "nvrtcGetLoweredName found no kernel named " + unit.name_expression);
  }
  cubin.lowered_name = lowered;
  cubin.compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
          .count();
  return cubin;
}

std::optional<int> cubin_sm_number(const std::vector<char>& image) {
  // ELF64: e_ident[0..3] = "\x7fELF", e_machine (u16) at 18 = EM_CUDA (190), e_flags (u32) at 48.
  // NVRTC 12.x/13.x write ELF ABI version 8 cubins, whose e_flags carry the SM in bits 8..15.
  constexpr std::uint16_t kMachineCuda = 190;
  if (image.size() < 64 || std::memcmp(image.data(), "\x7f" "ELF", 4) != 0) return std::nullopt;
  std::uint16_t machine = 0;
  std::uint32_t flags = 0;
  std::memcpy(&machine, image.data() + 18, sizeof machine);
  std::memcpy(&flags, image.data() + 48, sizeof flags);
  if (machine != kMachineCuda) return std::nullopt;
  return static_cast<int>((flags >> 8) & 0xFF);
}

std::uint64_t compile_count() { return g_compile_count.load(std::memory_order_relaxed); }

}  // namespace intfa::nvrtc
