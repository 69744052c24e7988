// Many processes filling one cache at once while another reads it: every call succeeds, every
// entry a reader finds verifies, each spec ends as exactly one good entry, no temp file is left,
// and no process compiles one key twice. The figures are printed for docs/reliability.md.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "cache/cache_test_support.hpp"
#include "cache/disk_cache.hpp"
#include "common/log.hpp"
#include "common/strings.hpp"
#include "launch/kernel_runtime.hpp"
#include "support/child_test.hpp"

namespace intfa::cache {
namespace {

using namespace intfa::testing;

constexpr const char* kWriterVariable = "INTFA_CACHE_TEST_WRITER";
constexpr const char* kStopFileVariable = "INTFA_CACHE_TEST_STOP_FILE";
constexpr int kWriters = 16;
constexpr int kCallsPerWriter = 50;
constexpr int kSpecsPerWriter = 6;
constexpr int kWriterStride = 3;  // neighbouring writers share half their specs

// 24 small kernels: every head dim, input type and Q/K width, for two archs.
std::vector<quantize::QuantizeSpec> concurrency_specs() {
  using kernels::ElementType;
  std::vector<quantize::QuantizeSpec> specs;
  for (const device::Arch arch : {device::Arch::kSm80, device::Arch::kSm86}) {
    for (const int head_dim : {64, 128, 256}) {
      for (const ElementType input_type : {ElementType::kF16, ElementType::kBF16}) {
        for (const int qk_bits : {8, 4}) {
          specs.push_back(quantize_rows_spec(head_dim, input_type, qk_bits, arch));
        }
      }
    }
  }
  return specs;
}

// Writer `writer`'s call number `call`: its six specs in turn, so every spec is asked for
// repeatedly, and four writers ask for each spec.
std::size_t spec_index(int writer, int call) {
  return static_cast<std::size_t>(writer * kWriterStride + call % kSpecsPerWriter) %
         concurrency_specs().size();
}

// The `key=value` pairs of the line a child prints after "RESULT".
std::map<std::string, long> parse_result(const std::string& output) {
  std::map<std::string, long> values;
  const std::size_t at = output.rfind("RESULT ");
  if (at == std::string::npos) return values;
  const std::string line = output.substr(at + 7, output.find('\n', at) - at - 7);
  for (const std::string& pair : strings::split(line, ' ')) {
    const std::size_t equals = pair.find('=');
    if (equals != std::string::npos) {
      values[pair.substr(0, equals)] = std::stol(pair.substr(equals + 1));
    }
  }
  return values;
}

// The CacheConcurrencyChild.DISABLED_* tests are the bodies CacheConcurrency.* runs in child
// processes, not tests to run by hand (support/child_test.hpp); ctest does not list them.
//
// Runs only in a child process (the variable names the writer); prints its RESULT line.
TEST(CacheConcurrencyChild, DISABLED_Writer) {
  const char* writer_text = std::getenv(kWriterVariable);
  if (writer_text == nullptr) GTEST_SKIP() << "run by CacheConcurrency.* in a child process";
  const int writer = std::atoi(writer_text);
  launch::KernelRuntime& runtime = launch::KernelRuntime::instance();
  runtime.reset_for_testing();
  const std::vector<quantize::QuantizeSpec> specs = concurrency_specs();
  const std::uint64_t compiles_before = nvrtc::compile_count();
  std::map<std::size_t, int> compiled_now;  // spec index -> times compiled by this process
  int failed = 0;
  for (int call = 0; call < kCallsPerWriter; ++call) {
    const std::size_t index = spec_index(writer, call);
    try {
      if (runtime.compile(specs[index]).compiled_now) compiled_now[index]++;
    } catch (const std::exception& error) {
      std::printf("call %d failed: %s\n", call, error.what());
      failed++;
    }
  }
  int compiled = 0;
  int compiled_twice = 0;
  for (const auto& [index, times] : compiled_now) {
    compiled += times;
    if (times > 1) compiled_twice++;
  }
  std::printf("RESULT calls=%d failed=%d compiled=%d compiled_twice=%d nvrtc=%llu\n",
              kCallsPerWriter, failed, compiled, compiled_twice,
              static_cast<unsigned long long>(nvrtc::compile_count() - compiles_before));
}

// Loads every listed entry over and over until the stop file appears, then once more. Entries are
// only ever renamed into place and never removed here, so a listed entry that does not load, or
// any warning, means a reader saw a partial or wrong file.
TEST(CacheConcurrencyChild, DISABLED_Loader) {
  const char* stop_file = std::getenv(kStopFileVariable);
  if (stop_file == nullptr) GTEST_SKIP() << "run by CacheConcurrency.* in a child process";
  const fs::path directory = std::getenv("INTFA_CACHE_DIR");
  log::ScopedCapture capture;
  DiskCache disk(directory);
  long passes = 0, loads = 0, lost = 0;
  bool last_pass = false;
  while (!last_pass) {
    last_pass = fs::exists(stop_file);
    for (const EntryInfo& entry : disk.list()) {
      if (disk.load(entry.key)) {
        loads++;
      } else {
        lost++;
      }
    }
    passes++;
  }
  std::printf("RESULT passes=%ld loads=%ld lost=%ld warnings=%zu\n", passes, loads, lost,
              capture.warnings().size());
}

struct Totals {
  long calls = 0, failed = 0, compiled = 0, nvrtc = 0;
};

TEST(CacheConcurrency, SixteenWritersAndALoaderShareOneCacheWithoutALostOrBadEntry) {
  const TempDirectory cache;
  const TempDirectory control;  // the children's output and the loader's stop file
  const fs::path stop_file = control.path() / "stop";
  const std::string cache_variable = "INTFA_CACHE_DIR=" + cache.path().string();
  ChildTest loader({"CacheConcurrencyChild.DISABLED_Loader",
                    {cache_variable, std::string(kStopFileVariable) + "=" + stop_file.string()},
                    {"INTFA_CACHE_DISABLE"},
                    control.path() / "loader.txt"});
  std::vector<ChildTest> writers;
  for (int writer = 0; writer < kWriters; ++writer) {
    writers.emplace_back(ChildTest::Options{
        "CacheConcurrencyChild.DISABLED_Writer",
        {cache_variable, std::string(kWriterVariable) + "=" + std::to_string(writer)},
        {"INTFA_CACHE_DISABLE", "INTFA_DEPLOY_CACHE"},
        control.path() / ("writer-" + std::to_string(writer) + ".txt")});
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(10);
  Totals totals;
  for (int writer = 0; writer < kWriters; ++writer) {
    ChildTest& child = writers[static_cast<std::size_t>(writer)];
    const int status = child.wait_until(deadline);
    const std::string output = child.output();
    EXPECT_EQ(status, 0) << "writer " << writer << ":\n" << output;
    std::map<std::string, long> result = parse_result(output);
    EXPECT_EQ(result["calls"], kCallsPerWriter) << output;
    EXPECT_EQ(result["failed"], 0) << output;
    EXPECT_EQ(result["compiled_twice"], 0) << "a key compiled twice in one process:\n" << output;
    EXPECT_EQ(result["nvrtc"], result["compiled"]) << output;
    EXPECT_LE(result["compiled"], kSpecsPerWriter) << output;
    totals.calls += result["calls"];
    totals.failed += result["failed"];
    totals.compiled += result["compiled"];
    totals.nvrtc += result["nvrtc"];
  }
  write_text(stop_file, "stop\n");
  EXPECT_EQ(loader.wait_until(deadline), 0) << loader.output();
  std::map<std::string, long> loaded = parse_result(loader.output());
  EXPECT_GE(loaded["passes"], 2) << loader.output();
  EXPECT_GE(loaded["loads"], static_cast<long>(concurrency_specs().size())) << loader.output();
  EXPECT_EQ(loaded["lost"], 0) << loader.output();
  EXPECT_EQ(loaded["warnings"], 0) << loader.output();

  const std::size_t distinct_specs = concurrency_specs().size();
  EXPECT_EQ(totals.calls, kWriters * kCallsPerWriter);
  EXPECT_EQ(totals.failed, 0);
  EXPECT_GE(totals.compiled, static_cast<long>(distinct_specs)) << "each spec compiled somewhere";
  DiskCache disk(cache.path());
  const VerifyReport report = disk.verify();
  for (const auto& [path, problem] : report.bad) ADD_FAILURE() << path << ": " << problem;
  EXPECT_EQ(report.checked, distinct_specs);
  EXPECT_EQ(disk.list().size(), distinct_specs);
  EXPECT_TRUE(files_named(cache.path(), ".tmp-").empty());

  // Every spec is now served from disk: this process compiles nothing.
  const RuntimeCacheDirectory runtime_cache(cache.path());
  const std::uint64_t compiles_before = nvrtc::compile_count();
  for (const quantize::QuantizeSpec& spec : concurrency_specs()) {
    EXPECT_FALSE(launch::KernelRuntime::instance().compile(spec).compiled_now) << spec.to_string();
  }
  EXPECT_EQ(nvrtc::compile_count(), compiles_before);
  std::printf(
      "%d processes x %d calls = %ld compile calls, %ld NVRTC compiles, %ld failed; "
      "loader: %ld passes, %ld loads, %ld lost, %ld warnings; %zu entries, %zu bad\n",
      kWriters, kCallsPerWriter, totals.calls, totals.nvrtc, totals.failed, loaded["passes"],
      loaded["loads"], loaded["lost"], loaded["warnings"], report.checked, report.bad.size());
}

TEST(CacheConcurrency, ThreadsAskingForTheSameSpecsCompileEachKeyOnce) {
  const TempDirectory cache;
  const RuntimeCacheDirectory runtime_cache(cache.path());
  const std::vector<quantize::QuantizeSpec> specs = {
      quantize_rows_spec(64), quantize_rows_spec(128), quantize_rows_spec(256)};
  constexpr int kThreads = 8;
  constexpr int kRounds = 4;
  std::atomic<int> compiled_now{0};
  std::atomic<int> failed{0};
  const std::uint64_t compiles_before = nvrtc::compile_count();
  std::vector<std::thread> threads;
  for (int thread = 0; thread < kThreads; ++thread) {
    threads.emplace_back([&, thread] {
      for (int call = 0; call < kRounds * static_cast<int>(specs.size()); ++call) {
        try {
          const auto& spec = specs[static_cast<std::size_t>(call + thread) % specs.size()];
          if (launch::KernelRuntime::instance().compile(spec).compiled_now) compiled_now++;
        } catch (const std::exception&) {
          failed++;
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(compiled_now.load(), static_cast<int>(specs.size()));
  EXPECT_EQ(nvrtc::compile_count(), compiles_before + specs.size());
  EXPECT_EQ(DiskCache(cache.path()).list().size(), specs.size());
}

}  // namespace
}  // namespace intfa::cache
