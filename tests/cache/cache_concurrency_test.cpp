// Several processes filling one cache at once, with overlapping specs, leave exactly one good
// entry per spec and no temp files. The workers are fresh processes (this test binary re-executed
// with a filter) rather than bare forks, because forking after NVRTC has run is not safe.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cache/cache_test_support.hpp"
#include "cache/disk_cache.hpp"
#include "common/strings.hpp"
#include "launch/kernel_runtime.hpp"

extern char** environ;

namespace intfa::cache {
namespace {

using namespace intfa::testing;

constexpr const char* kWorkerSpecsVariable = "INTFA_CACHE_TEST_WORKER_SPECS";
constexpr int kWorkers = 8;
constexpr int kSpecsPerWorker = 6;
constexpr int kWorkerStride = 3;  // consecutive workers share half their specs

// Twelve of the 24 combinations, mixing every axis.
std::vector<render::KernelSpec> concurrency_specs() {
  using kernels::ElementType;
  std::vector<render::KernelSpec> specs;
  for (const int head_dim : {64, 128, 256}) {
    for (const ElementType input_type : {ElementType::kF16, ElementType::kBF16}) {
      for (const int qk_bits : {8, 4}) {
        const std::size_t index = specs.size();
        const bool on_sm86 = (index / 2 + index) % 2 == 1;  // pairs each qk_bits with both archs
        specs.push_back(quantize_rows_spec(head_dim, input_type, qk_bits,
                                           on_sm86 ? device::Arch::kSm86 : device::Arch::kSm80));
      }
    }
  }
  return specs;
}

std::string worker_spec_indices(int worker) {
  std::vector<std::string> indices;
  const int spec_count = static_cast<int>(concurrency_specs().size());
  for (int i = 0; i < kSpecsPerWorker; ++i) {
    indices.push_back(std::to_string((worker * kWorkerStride + i) % spec_count));
  }
  return strings::join(indices, ",");
}

// Runs only in a worker process (the variable is set); exits 0 when every compile succeeded.
TEST(CacheConcurrencyWorker, DISABLED_CompilesTheSpecsNamedInItsEnvironment) {
  const char* indices = std::getenv(kWorkerSpecsVariable);
  if (indices == nullptr) GTEST_SKIP() << "run by CacheConcurrency.* in a child process";
  try {
    launch::KernelRuntime::instance().reset_for_testing();
    const std::vector<render::KernelSpec> specs = concurrency_specs();
    for (const std::string& index : strings::split(indices, ',')) {
      launch::KernelRuntime::instance().compile(specs.at(std::stoul(index)));
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "cache concurrency worker: %s\n", error.what());
    std::fflush(stderr);
    ::_exit(1);
  }
  ::_exit(0);
}

class Worker {
 public:
  Worker(const fs::path& cache_directory, int index) {
    std::vector<std::string> environment;
    for (char** variable = environ; *variable != nullptr; ++variable) {
      const std::string entry = *variable;
      if (!strings::starts_with(entry, "INTFA_CACHE_") && !strings::starts_with(entry, "GTEST_")) {
        environment.push_back(entry);
      }
    }
    environment.push_back("INTFA_CACHE_DIR=" + cache_directory.string());
    environment.push_back(std::string(kWorkerSpecsVariable) + "=" + worker_spec_indices(index));
    const std::vector<std::string> arguments = {
        "intfa_tests",
        "--gtest_filter=CacheConcurrencyWorker.DISABLED_CompilesTheSpecsNamedInItsEnvironment",
        "--gtest_also_run_disabled_tests"};
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    const int spawned = ::posix_spawn(&pid_, "/proc/self/exe", &actions, nullptr,
                                      pointers(arguments).data(), pointers(environment).data());
    posix_spawn_file_actions_destroy(&actions);
    if (spawned != 0) pid_ = -1;
  }

  // The exit status, or -1 when it did not exit by itself within `deadline`.
  int wait_until(std::chrono::steady_clock::time_point deadline) {
    if (pid_ < 0) return -1;
    int status = 0;
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        return -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

 private:
  static std::vector<char*> pointers(const std::vector<std::string>& strings) {
    std::vector<char*> result;
    for (const std::string& text : strings) result.push_back(const_cast<char*>(text.c_str()));
    result.push_back(nullptr);
    return result;
  }
  pid_t pid_ = -1;
};

TEST(CacheConcurrency, EightProcessesFillOneCacheWithOneGoodEntryPerSpec) {
  const TempDirectory directory;
  std::vector<Worker> workers;
  for (int index = 0; index < kWorkers; ++index) workers.emplace_back(directory.path(), index);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(150);
  for (int index = 0; index < kWorkers; ++index) {
    EXPECT_EQ(workers[index].wait_until(deadline), 0) << "worker " << index;
  }

  DiskCache disk(directory.path());
  const VerifyReport report = disk.verify();
  for (const auto& [path, problem] : report.bad) ADD_FAILURE() << path << ": " << problem;
  const std::size_t distinct_specs = concurrency_specs().size();
  EXPECT_EQ(report.checked, distinct_specs);
  EXPECT_EQ(disk.list().size(), distinct_specs);
  EXPECT_TRUE(files_named(directory.path(), ".tmp-").empty());

  // Every spec is now served from disk: this process compiles nothing.
  const RuntimeCacheDirectory runtime_cache(directory.path());
  const std::uint64_t compiles_before = nvrtc::compile_count();
  for (const render::KernelSpec& spec : concurrency_specs()) {
    EXPECT_FALSE(launch::KernelRuntime::instance().compile(spec).compiled_now) << spec.to_string();
  }
  EXPECT_EQ(nvrtc::compile_count(), compiles_before);
}

}  // namespace
}  // namespace intfa::cache
