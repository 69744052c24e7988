// The NVRTC stage: a RenderedUnit becomes a Cubin for one target arch. Thread-safe: each call owns
// its nvrtcProgram, so several threads may compile different units at once.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "device/arch.hpp"
#include "render/kernel_source.hpp"
#include "render/template_set.hpp"

namespace intfa::nvrtc {

struct Cubin {
  std::vector<char> image;   // the ELF NVRTC produced
  std::string lowered_name;  // the mangled kernel name to look up after loading
  std::string log;           // NVRTC's log of a successful compile (warnings), usually empty
  double compile_ms = 0;

  friend bool operator==(const Cubin& a, const Cubin& b) {
    return a.image == b.image && a.lowered_name == b.lowered_name;
  }
  std::string to_string() const;
};

struct Version {
  int major = 0;
  int minor = 0;
  std::string to_string() const { return std::to_string(major) + "." + std::to_string(minor); }
  friend bool operator==(const Version& a, const Version& b) {
    return a.major == b.major && a.minor == b.minor;
  }
  friend bool operator!=(const Version& a, const Version& b) { return !(a == b); }
};

Version version();

// The options that define a compile: part of the cache key. Fixed per arch (the arch, our explicit
// floating-point choices) plus -lineinfo when INTFA_LINEINFO=1. Include paths are not here: they
// are machine-specific and do not change the output, so they stay out of the key.
std::vector<std::string> compile_options(device::Arch arch);

// Compiles `source.unit` with `options`, giving NVRTC every template in the unit's include closure
// as a header. Throws CompileError holding source.text and the whole NVRTC log when compilation
// fails.
Cubin compile(const render::KernelSource& source, const std::vector<std::string>& options,
              const render::TemplateSet& templates);

// The CUDA include directory found at run time (INTFA_CUDA_INCLUDE_DIR, CUDA_HOME, CUDA_PATH, next
// to libnvrtc, the build-time toolkit), or nullopt. Passed to NVRTC with -I when present.
std::optional<std::string> cuda_include_dir();

// The file the loaded NVRTC library was opened from ("" when the loader cannot tell).
std::string library_path();

// Which distribution a path of NVRTC or of the CUDA headers belongs to: "PyPI package
// nvidia-cuda-nvrtc" (for headers: nvidia-cuda-runtime) when it lies in a nvidia/cu<major>/ folder,
// as pip installs them (site-packages/nvidia/cu13/lib, .../include), else "CUDA toolkit" ("origin
// unknown" for an empty library path).
std::string library_origin(const std::string& path);
std::string include_dir_origin(const std::string& path);

// The SM number NVRTC recorded in a cubin's ELF header (80, 86, 89, 90), or nullopt when the
// bytes are not a CUDA ELF.
std::optional<int> cubin_sm_number(const std::vector<char>& image);

// How many NVRTC compilations this process has run (tests assert cache hits with it).
std::uint64_t compile_count();

}  // namespace intfa::nvrtc
