// A writer killed in the middle of writing an entry leaves nothing that loads: it dies (SIGKILL)
// while stopped halfway through its temp file by files::set_write_pause_for_testing, which the
// child test sets when its parent passes INTFA_TEST_PAUSE_WRITE=1. Its temp file is
// never read as an entry, and a later writer removes it once it is over an hour old.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include "cache/cache_test_support.hpp"
#include "cache/disk_cache.hpp"
#include "cache/entry_format.hpp"
#include "common/file_io.hpp"
#include "common/log.hpp"
#include "support/child_test.hpp"

namespace intfa::cache {
namespace {

using namespace intfa::testing;

constexpr const char* kPauseWriteVariable = "INTFA_TEST_PAUSE_WRITE";
constexpr std::size_t kCubinBytes = std::size_t{1} << 20;  // large enough to be caught halfway
constexpr std::time_t kOverAnHour = 61 * 60;
constexpr std::time_t kUnderAnHour = 59 * 60;

CacheKey killed_key() {
  return test_key(0x42);
}
nvrtc::Cubin killed_cubin() {
  return fake_cubin(80, kCubinBytes);
}

// The CacheCrashChild.DISABLED_* tests are the bodies CacheCrash.* runs in child processes, not
// tests to run by hand (support/child_test.hpp); ctest does not list them.
//
// Runs only in a child process, which the hook stops before its store() can finish.
TEST(CacheCrashChild, DISABLED_StoresOneEntry) {
  const char* directory = std::getenv("INTFA_CACHE_DIR");
  if (std::getenv(kPauseWriteVariable) == nullptr || directory == nullptr) {
    GTEST_SKIP() << "run by CacheCrash.* in a child process";
  }
  files::set_write_pause_for_testing(true);
  DiskCache(directory).store(killed_key(), killed_cubin(),
                             families::kernel_source(quantize_rows_spec()));
}

// Runs only in a child process, which the hook stops halfway through each temp file it writes.
TEST(CacheCrashChild, DISABLED_StoresOneEntryAndStaysWritable) {
  const char* directory = std::getenv("INTFA_CACHE_DIR");
  if (std::getenv(kPauseWriteVariable) == nullptr || directory == nullptr) {
    GTEST_SKIP() << "run by CacheCrash.* in a child process";
  }
  files::set_write_pause_for_testing(true);
  DiskCache disk(directory);
  disk.store(killed_key(), killed_cubin(), families::kernel_source(quantize_rows_spec()));
  EXPECT_TRUE(disk.writable()) << "a store that lost its folder to a clear turned memory-only";
  EXPECT_EQ(disk.load(killed_key()), killed_cubin());
}

// Runs only in a child process whose environment holds INTFA_TEST_PAUSE_WRITE=1, without the hook.
TEST(CacheCrashChild, DISABLED_StoresOneEntryWithOnlyTheVariableSet) {
  const char* directory = std::getenv("INTFA_CACHE_DIR");
  if (std::getenv(kPauseWriteVariable) == nullptr || directory == nullptr) {
    GTEST_SKIP() << "run by CacheCrash.* in a child process";
  }
  DiskCache disk(directory);
  disk.store(killed_key(), killed_cubin(), families::kernel_source(quantize_rows_spec()));
  EXPECT_EQ(disk.load(killed_key()), killed_cubin());
}

// The temp file of a writer of killed_key() that was killed halfway through writing it.
fs::path kill_a_writer_halfway(const fs::path& cache, const fs::path& control) {
  ChildTest writer({"CacheCrashChild.DISABLED_StoresOneEntry",
                    {"INTFA_CACHE_DIR=" + cache.string(), std::string(kPauseWriteVariable) + "=1"},
                    {},
                    control / "writer.txt"});
  if (!writer.wait_until_stopped()) {
    ADD_FAILURE() << "the writer never stopped mid-write:\n" << writer.output();
    return {};
  }
  writer.kill_now();
  const std::vector<fs::path> temps = files_named(cache, ".tmp-");
  if (temps.size() != 1) {
    ADD_FAILURE() << temps.size() << " temp files after the kill";
    return {};
  }
  return temps.front();
}

class CacheCrash : public ::testing::Test {
 protected:
  TempDirectory cache_;
  TempDirectory control_;  // the writer's output
};

// The pause is a hook only the test binary sets: a user's process that happens to have the
// variable in its environment never stops itself in the middle of a cache write.
TEST_F(CacheCrash, TheLibraryReadsNoVariableThatStopsAWriter) {
  ChildTest writer(
      {"CacheCrashChild.DISABLED_StoresOneEntryWithOnlyTheVariableSet",
       {"INTFA_CACHE_DIR=" + cache_.path().string(), std::string(kPauseWriteVariable) + "=1"},
       {},
       control_.path() / "writer.txt"});
  EXPECT_FALSE(writer.wait_until_stopped()) << "the writer stopped itself:\n" << writer.output();
  EXPECT_EQ(writer.wait_until(std::chrono::steady_clock::now() + std::chrono::minutes(1)), 0)
      << writer.output();
  EXPECT_TRUE(fs::is_regular_file(DiskCache(cache_.path()).entry_path(killed_key())));
  EXPECT_TRUE(DiskCache(cache_.path()).verify().ok());
}

TEST_F(CacheCrash, AWriterKilledMidWriteLeavesHalfATempFileAndNoEntry) {
  const fs::path temp = kill_a_writer_halfway(cache_.path(), control_.path());
  ASSERT_FALSE(temp.empty());
  const std::size_t entry_bytes = encode_entry(killed_key(), killed_cubin()).size();
  EXPECT_EQ(fs::file_size(temp), entry_bytes / 2);
  EXPECT_EQ(temp.parent_path(), DiskCache(cache_.path()).entry_path(killed_key()).parent_path());
  EXPECT_FALSE(fs::exists(DiskCache(cache_.path()).entry_path(killed_key())));
  EXPECT_FALSE(fs::exists(DiskCache(cache_.path()).sidecar_path(killed_key())));
}

TEST_F(CacheCrash, TheKilledWritersTempFileIsNeverReadAsAnEntry) {
  const fs::path temp = kill_a_writer_halfway(cache_.path(), control_.path());
  ASSERT_FALSE(temp.empty());
  log::ScopedCapture capture;
  DiskCache disk(cache_.path());
  EXPECT_FALSE(disk.load(killed_key()));
  EXPECT_TRUE(disk.list().empty());
  const VerifyReport report = disk.verify();
  EXPECT_EQ(report.checked, 0u);
  EXPECT_TRUE(report.ok()) << "a young temp file may be a write in progress";
  EXPECT_TRUE(capture.warnings().empty()) << capture.warnings().front();
}

TEST_F(CacheCrash, ALaterWriterRemovesTheTempFileOnlyOnceItIsOverAnHourOld) {
  const fs::path temp = kill_a_writer_halfway(cache_.path(), control_.path());
  ASSERT_FALSE(temp.empty());
  set_age(temp, kUnderAnHour);
  DiskCache(cache_.path())
      .store(test_key(0x43), fake_cubin(), families::kernel_source(quantize_rows_spec()));
  EXPECT_TRUE(fs::exists(temp)) << "under an hour old, it may belong to a live writer";

  set_age(temp, kOverAnHour);
  DiskCache later(cache_.path());
  later.store(killed_key(), killed_cubin(), families::kernel_source(quantize_rows_spec()));
  EXPECT_FALSE(fs::exists(temp));
  EXPECT_TRUE(files_named(cache_.path(), ".tmp-").empty());
  EXPECT_EQ(later.load(killed_key()), killed_cubin());
  const VerifyReport report = later.verify();
  EXPECT_EQ(report.checked, 2u);
  EXPECT_TRUE(report.ok());
}

// A full clear removes every temp file and then the emptied key folder, also under a writer that
// is halfway through its temp file: that writer makes the folder again and writes once more,
// instead of turning memory-only for the rest of its life.
TEST_F(CacheCrash, AWriterWhoseFolderAClearRemovedRetriesOnceAndStaysWritable) {
  ChildTest writer(
      {"CacheCrashChild.DISABLED_StoresOneEntryAndStaysWritable",
       {"INTFA_CACHE_DIR=" + cache_.path().string(), std::string(kPauseWriteVariable) + "=1"},
       {},
       control_.path() / "writer.txt"});
  ASSERT_TRUE(writer.wait_until_stopped()) << writer.output();
  const fs::path folder = DiskCache(cache_.path()).entry_path(killed_key()).parent_path();
  ASSERT_EQ(files_named(folder, ".tmp-").size(), 1u);
  DiskCache(cache_.path()).clear(false);
  ASSERT_FALSE(fs::exists(folder)) << "the clear removed the temp file and the emptied folder";
  do {
    writer.resume();
  } while (writer.wait_until_stopped());
  EXPECT_EQ(writer.wait_until(std::chrono::steady_clock::now() + std::chrono::minutes(1)), 0)
      << writer.output();
  EXPECT_EQ(DiskCache(cache_.path()).load(killed_key()), killed_cubin());
  EXPECT_TRUE(files_named(cache_.path(), ".tmp-").empty());
}

}  // namespace
}  // namespace intfa::cache
