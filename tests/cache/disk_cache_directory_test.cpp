// What happens when the cache directory cannot be trusted or written: refusal of a shared-writable
// directory, and memory-only operation after a write failure, with one warning each and never an
// exception. (Where the cache lives: tests/common/locations_test.cpp.)
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>

#include "cache/cache_test_support.hpp"
#include "cache/disk_cache.hpp"
#include "common/file_io.hpp"
#include "common/log.hpp"
#include "launch/kernel_runtime.hpp"
#include "support/child_test.hpp"

namespace intfa::cache {
namespace {

using namespace intfa::testing;

// A directory others may write to could hold a planted cubin: it is neither read nor written.
TEST(DiskCacheSharedDirectory, IsRefusedWithOneWarningAndWorksFromMemoryOnly) {
  for (const unsigned mode : {0770u, 0707u, 0777u}) {
    const TempDirectory directory;
    DiskCache(directory.path())
        .store(test_key(1), fake_cubin(), families::kernel_source(quantize_rows_spec()));
    ASSERT_EQ(::chmod(directory.path().c_str(), mode), 0);
    log::ScopedCapture capture;
    DiskCache disk(directory.path());
    EXPECT_FALSE(disk.writable());
    EXPECT_FALSE(disk.load(test_key(1))) << "a planted entry would be a hit";
    disk.store(test_key(2), fake_cubin(), families::kernel_source(quantize_rows_spec()));
    EXPECT_FALSE(fs::exists(disk.entry_path(test_key(2))));
    DiskCache(directory.path()).load(test_key(1));
    const std::vector<std::string> warnings = capture.warnings();
    ASSERT_EQ(warnings.size(), 1u) << "mode " << std::oct << mode;
    EXPECT_NE(warnings[0].find("writable"), std::string::npos) << warnings[0];
    EXPECT_NE(warnings[0].find(directory.path().string()), std::string::npos) << warnings[0];
    EXPECT_TRUE(fs::exists(disk.entry_path(test_key(1)))) << "refusing removes nothing";
  }
}

// Makes every cache write fail as if the disk were full, until the end of the scope.
class SimulatedWriteFailure {
 public:
  SimulatedWriteFailure() { files::set_write_failure_for_testing(true); }
  ~SimulatedWriteFailure() { files::set_write_failure_for_testing(false); }
  SimulatedWriteFailure(const SimulatedWriteFailure&) = delete;
  SimulatedWriteFailure& operator=(const SimulatedWriteFailure&) = delete;
};

void expect_memory_only_after_one_warning(const fs::path& directory) {
  log::ScopedCapture capture;
  DiskCache disk(directory);
  EXPECT_NO_THROW(
      disk.store(test_key(1), fake_cubin(), families::kernel_source(quantize_rows_spec())));
  EXPECT_FALSE(disk.writable());
  EXPECT_NO_THROW(
      disk.store(test_key(2), fake_cubin(), families::kernel_source(quantize_rows_spec())));
  EXPECT_NO_THROW(
      disk.store(test_key(3), fake_cubin(), families::kernel_source(quantize_rows_spec())));
  EXPECT_FALSE(disk.load(test_key(1)));
  const std::vector<std::string> warnings = capture.warnings();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find(directory.string()), std::string::npos) << warnings[0];
  EXPECT_TRUE(files_named(directory, ".tmp-").empty());
}

TEST(DiskCacheReadOnly, ASimulatedFullDiskWarnsOnceAndTurnsMemoryOnly) {
  const TempDirectory directory;
  const SimulatedWriteFailure full_disk;
  expect_memory_only_after_one_warning(directory.path());
  EXPECT_TRUE(DiskCache(directory.path()).list().empty());
}

TEST(DiskCacheReadOnly, StaysMemoryOnlyAfterTheDiskRecovers) {
  const TempDirectory directory;
  DiskCache disk(directory.path());
  {
    const SimulatedWriteFailure full_disk;
    log::ScopedCapture capture;
    disk.store(test_key(1), fake_cubin(), families::kernel_source(quantize_rows_spec()));
  }
  disk.store(test_key(2), fake_cubin(), families::kernel_source(quantize_rows_spec()));
  EXPECT_FALSE(fs::exists(disk.entry_path(test_key(2)))) << "no further write attempts";
}

TEST(DiskCacheReadOnly, AChmodReadOnlyDirectoryWarnsOnceAndTurnsMemoryOnly) {
  if (rerun_without_root()) return;
  const TempDirectory directory;
  ASSERT_EQ(::chmod(directory.path().c_str(), 0500), 0);
  expect_memory_only_after_one_warning(directory.path());
  EXPECT_TRUE(fs::is_empty(directory.path()));
}

// Fails for root too: a regular file where a parent directory should be.
TEST(DiskCacheReadOnly, AnUncreatableDirectoryWarnsOnceAndTurnsMemoryOnly) {
  const TempDirectory parent;
  write_text(parent.path() / "a-file", "not a directory\n");
  expect_memory_only_after_one_warning(parent.path() / "a-file" / "cache");
}

TEST(DiskCacheReadOnly, TheRuntimeStillReturnsTheCompiledCubin) {
  const TempDirectory directory;
  const RuntimeCacheDirectory runtime_cache(directory.path());
  const SimulatedWriteFailure full_disk;
  log::ScopedCapture capture;
  launch::KernelRuntime& runtime = launch::KernelRuntime::instance();
  const launch::CompiledKernel first = runtime.compile(quantize_rows_spec(64));
  ASSERT_TRUE(first.cubin);
  EXPECT_TRUE(first.compiled_now);
  EXPECT_TRUE(nvrtc::cubin_sm_number(first.cubin->image));
  EXPECT_EQ(capture.warnings().size(), 1u);
  runtime.reset_for_testing();  // a new DiskCache for the same directory: warned already
  const launch::CompiledKernel second = runtime.compile(quantize_rows_spec(64));
  EXPECT_TRUE(second.compiled_now) << "nothing was stored";
  // Not byte-equal: NVRTC names internal-linkage symbols with a per-compile hash and the pid.
  EXPECT_EQ(second.cubin->lowered_name, first.cubin->lowered_name);
  EXPECT_EQ(capture.warnings().size(), 1u) << "later stores are silent";
}

}  // namespace
}  // namespace intfa::cache
