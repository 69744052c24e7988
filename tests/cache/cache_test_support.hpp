// Shared pieces of the cache tests: a private temp directory per test, the runtime pointed at a
// test's cache, and cubin-shaped bytes for tests that need no NVRTC. (Environment overrides that
// undo themselves: ScopedEnv, in support/temp_dir.hpp.)
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "cache/cache_key.hpp"
#include "device/arch.hpp"
#include "families/any_spec.hpp"
#include "launch/kernel_runtime.hpp"
#include "nvrtc/compiler.hpp"
#include "render/render.hpp"
#include "support/temp_dir.hpp"  // ScopedEnv

namespace intfa::testing {

namespace fs = std::filesystem;

// A fresh directory under /tmp (mode 0700, from mkdtemp), removed with its contents afterwards.
class TempDirectory {
 public:
  TempDirectory() {
    std::string pattern = "/tmp/intfa-cache-test-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDirectory() {
    std::error_code error;
    // A test may have made it read-only or world-writable; remove_all needs it writable.
    fs::permissions(path_, fs::perms::owner_all, error);
    fs::remove_all(path_, error);
  }
  TempDirectory(const TempDirectory&) = delete;
  TempDirectory& operator=(const TempDirectory&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Points the process-wide KernelRuntime's disk cache at `directory` until the end of the scope,
// then back at whatever the environment named before.
class RuntimeCacheDirectory {
 public:
  explicit RuntimeCacheDirectory(const fs::path& directory) {
    cache_dir_.emplace("INTFA_CACHE_DIR", directory.string());
    cache_disable_.emplace("INTFA_CACHE_DISABLE", std::nullopt);
    launch::KernelRuntime::instance().reset_for_testing();
  }
  ~RuntimeCacheDirectory() {
    cache_disable_.reset();
    cache_dir_.reset();
    try {
      launch::KernelRuntime::instance().reset_for_testing();
    } catch (const std::exception&) {
      // The outer environment is malformed; the runtime keeps the test's (deleted) directory.
    }
  }
  RuntimeCacheDirectory(const RuntimeCacheDirectory&) = delete;
  RuntimeCacheDirectory& operator=(const RuntimeCacheDirectory&) = delete;

 private:
  std::optional<ScopedEnv> cache_dir_;
  std::optional<ScopedEnv> cache_disable_;
};

inline quantize::QuantizeSpec quantize_rows_spec(
    int head_dim = 128, kernels::ElementType input_type = kernels::ElementType::kF16,
    int qk_bits = 8, device::Arch arch = device::Arch::kSm80) {
  quantize::QuantizeSpec spec;
  spec.kernel = quantize::QuantizeKernel::kRows;
  spec.arch = arch;
  spec.head_dim = head_dim;
  spec.input_type = input_type;
  spec.qk_bits = qk_bits;
  return spec;
}

// Bytes that pass nvrtc::cubin_sm_number (an ELF64 header for EM_CUDA, SM in e_flags) followed by
// a recognisable body; enough for every cache test that does not load the kernel.
inline nvrtc::Cubin fake_cubin(int sm_number = 80, std::size_t size_bytes = 256,
                               unsigned char fill = 0x5a) {
  nvrtc::Cubin cubin;
  cubin.lowered_name = "_Z11fake_kernelv";
  cubin.image.assign(size_bytes, static_cast<char>(fill));
  const unsigned char ident[] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0x33};
  for (std::size_t i = 0; i < sizeof ident; ++i) cubin.image[i] = static_cast<char>(ident[i]);
  cubin.image[18] = static_cast<char>(190);  // e_machine = EM_CUDA, little-endian
  cubin.image[19] = 0;
  cubin.image[48] = 0;
  cubin.image[49] = static_cast<char>(sm_number);  // e_flags bits 8..15
  cubin.image[50] = 0;
  cubin.image[51] = 0;
  return cubin;
}

// A key whose bytes are `first`, first + 1, ...: distinct and readable in failure messages.
inline cache::CacheKey test_key(unsigned char first) {
  cache::CacheKey key;
  for (std::size_t i = 0; i < key.bytes.size(); ++i) {
    key.bytes[i] = static_cast<unsigned char>(first + i);
  }
  return key;
}

inline std::vector<char> read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_bytes(const fs::path& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

inline void write_text(const fs::path& path, const std::string& text) {
  write_bytes(path, std::vector<char>(text.begin(), text.end()));
}

// Every file or directory below `directory` whose name starts with `prefix`.
inline std::vector<fs::path> files_named(const fs::path& directory, const std::string& prefix) {
  std::vector<fs::path> found;
  std::error_code error;
  for (fs::recursive_directory_iterator it(directory, error), end; !error && it != end;
       it.increment(error)) {
    if (it->path().filename().string().rfind(prefix, 0) == 0) found.push_back(it->path());
  }
  return found;
}

// Sets the modification time of `path` (of a link itself, not its target) `age_seconds` back.
inline void set_age(const fs::path& path, std::time_t age_seconds) {
  const std::time_t when = std::time(nullptr) - age_seconds;
  const struct timespec times[2] = {{when, 0}, {when, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW), 0) << path;
}

inline unsigned file_mode(const fs::path& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return 0;
  return info.st_mode & 07777;
}

}  // namespace intfa::testing
