// verify() and clear(): what counts as bad or stale, and that clearing removes exactly the cache's
// own files, reporting how much it freed.
#include <gtest/gtest.h>

#include <ctime>
#include <string>

#include "cache/cache_test_support.hpp"
#include "cache/disk_cache.hpp"
#include "cache/entry_format.hpp"

namespace intfa::cache {
namespace {

using namespace intfa::testing;

fs::path temp_file(const DiskCache& disk, const CacheKey& key, std::time_t age_seconds) {
  const fs::path path = disk.entry_path(key).parent_path() / (".tmp-" + key.hex() + "-4242-0f0f");
  fs::create_directories(path.parent_path());
  write_text(path, "half an entry");
  set_age(path, age_seconds);
  return path;
}

void flip_last_byte(const fs::path& path) {
  std::vector<char> bytes = read_bytes(path);
  bytes.back() = static_cast<char>(bytes.back() ^ 0x01);
  write_bytes(path, bytes);
}

TEST(CacheMaintenance, VerifyReportsATamperedEntryWithItsReasonAndRemovesNothing) {
  const TempDirectory directory;
  DiskCache disk(directory.path());
  disk.store(test_key(0x01), fake_cubin(), families::kernel_source(quantize_rows_spec()));
  disk.store(test_key(0x02), fake_cubin(), families::kernel_source(quantize_rows_spec()));
  EXPECT_TRUE(disk.verify().ok());
  flip_last_byte(disk.entry_path(test_key(0x02)));
  const VerifyReport report = disk.verify();
  EXPECT_EQ(report.checked, 2u);
  ASSERT_EQ(report.bad.size(), 1u);
  EXPECT_EQ(report.bad[0].first, disk.entry_path(test_key(0x02)));
  EXPECT_NE(report.bad[0].second.find("checksum"), std::string::npos) << report.bad[0].second;
  EXPECT_TRUE(fs::exists(disk.entry_path(test_key(0x02))));
}

TEST(CacheMaintenance, VerifyReportsTempFilesOlderThanAnHour) {
  const TempDirectory directory;
  DiskCache disk(directory.path());
  const fs::path stale = temp_file(disk, test_key(0x03), 2 * 60 * 60);
  temp_file(disk, test_key(0x04), 60);  // a write in progress, as far as anyone can tell
  const VerifyReport report = disk.verify();
  EXPECT_EQ(report.checked, 0u);
  ASSERT_EQ(report.bad.size(), 1u);
  EXPECT_EQ(report.bad[0].first, stale);
  EXPECT_EQ(report.bad[0].second, "stale temp file");
}

TEST(CacheMaintenance, VerifyReportsAnEntryInAnotherKeysFolder) {
  const TempDirectory directory;
  DiskCache disk(directory.path());
  disk.store(test_key(0x05), fake_cubin(), families::kernel_source(quantize_rows_spec()));
  fs::create_directory(directory.path() / "ff");
  const fs::path misplaced = directory.path() / "ff" / (test_key(0x05).hex() + ".cubin");
  fs::rename(disk.entry_path(test_key(0x05)), misplaced);
  const VerifyReport report = disk.verify();
  ASSERT_EQ(report.bad.size(), 1u);
  EXPECT_EQ(report.bad[0].first, misplaced);
}

TEST(CacheMaintenance, ClearStaleRemovesWhatThisBuildCannotUseAndKeepsTheRest) {
  const TempDirectory directory;
  DiskCache disk(directory.path());
  const CacheKey good = test_key(0x10), corrupt = test_key(0x20), other_nvrtc = test_key(0x30),
                 orphan = test_key(0x40);
  for (const CacheKey& key : {good, corrupt, other_nvrtc, orphan}) {
    disk.store(key, fake_cubin(), families::kernel_source(quantize_rows_spec()));
  }
  flip_last_byte(disk.entry_path(corrupt));
  const nvrtc::Version running = nvrtc::version();
  write_bytes(disk.entry_path(other_nvrtc),
              encode_entry(other_nvrtc, fake_cubin(), {running.major - 1, running.minor}));
  fs::remove(disk.entry_path(orphan));
  const fs::path stale_temp = temp_file(disk, test_key(0x50), 3 * 60 * 60);
  const fs::path fresh_temp = temp_file(disk, test_key(0x60), 10);
  write_text(directory.path() / "notes.txt", "mine\n");

  std::uint64_t stale_bytes = 0;
  for (const fs::path& path :
       {disk.entry_path(corrupt), disk.sidecar_path(corrupt), disk.entry_path(other_nvrtc),
        disk.sidecar_path(other_nvrtc), disk.sidecar_path(orphan), stale_temp}) {
    stale_bytes += fs::file_size(path);
  }
  const ClearReport report = disk.clear(true);
  EXPECT_EQ(report.removed_files, 6u);
  EXPECT_EQ(report.freed_bytes, stale_bytes);

  EXPECT_EQ(disk.load(good), fake_cubin());
  EXPECT_TRUE(fs::exists(disk.sidecar_path(good)));
  for (const CacheKey& key : {corrupt, other_nvrtc, orphan}) {
    EXPECT_FALSE(fs::exists(disk.entry_path(key))) << key.hex();
    EXPECT_FALSE(fs::exists(disk.sidecar_path(key))) << key.hex();
  }
  EXPECT_FALSE(fs::exists(stale_temp));
  EXPECT_TRUE(fs::exists(fresh_temp)) << "a temp file may belong to a write in progress";
  EXPECT_TRUE(fs::exists(directory.path() / "notes.txt"));
  EXPECT_TRUE(disk.verify().ok());
  EXPECT_EQ(disk.clear(true).removed_files, 0u) << "nothing stale is left";
}

TEST(CacheMaintenance, ClearAllEmptiesTheCacheButLeavesOtherFilesAlone) {
  const TempDirectory directory;
  DiskCache disk(directory.path());
  for (unsigned char first : {0x01, 0x02, 0x81}) {
    disk.store(test_key(first), fake_cubin(80, 512), families::kernel_source(quantize_rows_spec()));
  }
  temp_file(disk, test_key(0x01), 5);
  write_text(directory.path() / "notes.txt", "mine\n");
  write_text(directory.path() / "01" / "README", "not named like a cache file\n");
  fs::create_directory(directory.path() / "not-a-key-folder");
  write_text(directory.path() / "not-a-key-folder" / (test_key(0x09).hex() + ".cubin"), "x");

  std::uint64_t cache_bytes = 0;
  std::size_t cache_files = 0;
  for (const auto& item : fs::recursive_directory_iterator(directory.path())) {
    const std::string folder = item.path().parent_path().filename().string();
    if (item.is_regular_file() && (folder == "01" || folder == "02" || folder == "81") &&
        item.path().filename() != "README") {
      cache_bytes += item.file_size();
      ++cache_files;
    }
  }
  ASSERT_EQ(cache_files, 7u) << "three entries, three sidecars, one temp file";

  const ClearReport report = disk.clear(false);
  EXPECT_EQ(report.removed_files, cache_files);
  EXPECT_EQ(report.freed_bytes, cache_bytes);
  EXPECT_TRUE(disk.list().empty());
  EXPECT_TRUE(files_named(directory.path(), ".tmp-").empty());
  EXPECT_TRUE(fs::exists(directory.path() / "notes.txt"));
  EXPECT_TRUE(fs::exists(directory.path() / "01" / "README"));
  EXPECT_TRUE(
      fs::exists(directory.path() / "not-a-key-folder" / (test_key(0x09).hex() + ".cubin")));
  EXPECT_FALSE(fs::exists(directory.path() / "02")) << "emptied key folders go too";
  EXPECT_TRUE(fs::exists(directory.path())) << "the cache directory itself stays";
}

TEST(CacheMaintenance, ClearRemovesALinkAtAnEntrysNameButNotItsTarget) {
  const TempDirectory directory;
  const TempDirectory outside;
  DiskCache disk(directory.path());
  disk.store(test_key(0x07), fake_cubin(), families::kernel_source(quantize_rows_spec()));
  const fs::path target = outside.path() / "precious";
  write_text(target, "keep me\n");
  fs::remove(disk.entry_path(test_key(0x07)));
  fs::create_symlink(target, disk.entry_path(test_key(0x07)));
  EXPECT_FALSE(disk.verify().ok());
  disk.clear(true);
  EXPECT_FALSE(fs::exists(fs::symlink_status(disk.entry_path(test_key(0x07)))));
  EXPECT_TRUE(fs::exists(target));
}

TEST(CacheMaintenance, AMissingDirectoryHasNothingToListVerifyOrClear) {
  const TempDirectory parent;
  DiskCache disk(parent.path() / "never-created");
  EXPECT_TRUE(disk.list().empty());
  const VerifyReport report = disk.verify();
  EXPECT_EQ(report.checked, 0u);
  EXPECT_TRUE(report.ok());
  EXPECT_EQ(disk.clear(false).removed_files, 0u);
  EXPECT_EQ(disk.clear(true).removed_files, 0u);
  EXPECT_FALSE(fs::exists(parent.path() / "never-created"));
}

}  // namespace
}  // namespace intfa::cache
