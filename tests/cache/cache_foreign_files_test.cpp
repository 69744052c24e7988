// The cache removes only its own files: entries (<32 hex>.cubin), their sidecars and its temp
// files, inside <2 hex> folders, never following a link; and an emptied <2 hex> folder. Anything
// else at any name, and every file of a directory that does not look like a cache, stays.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>
#include <vector>

#include "cache/cache_test_support.hpp"
#include "cache/disk_cache.hpp"
#include "cache/entry_format.hpp"
#include "common/log.hpp"
#include "intfa/errors.hpp"

namespace intfa::cache {
namespace {

using namespace intfa::testing;

const std::string kSidecarHex = "0123456789abcdef0123456789abcdef";

// The repro of issue 21: files and a link at two-hex names, and a two-hex folder holding a file
// named like an orphan sidecar, in a directory intfa never wrote.
struct NotACache {
  explicit NotACache(const fs::path& directory, const fs::path& outside) {
    fs::create_directory(directory / "ab");
    write_text(directory / "de", "precious\n");
    write_text(directory / "42", "n\n");
    write_text(outside / "hostname", "a file outside\n");
    fs::create_symlink(outside / "hostname", directory / "ca");
    write_text(directory / "ab" / (kSidecarHex + ".json"), "");
    paths = {directory / "de",
             directory / "42",
             directory / "ca",
             directory / "ab",
             directory / "ab" / (kSidecarHex + ".json"),
             outside / "hostname"};
  }
  std::vector<fs::path> paths;
};

bool present(const fs::path& path) {
  return fs::exists(fs::symlink_status(path));
}

TEST(CacheForeignFiles, ClearRefusesADirectoryThatIsNotACacheAndRemovesNothing) {
  const TempDirectory directory;
  const TempDirectory outside;
  const NotACache planted(directory.path(), outside.path());
  DiskCache disk(directory.path());
  for (const bool stale_only : {true, false}) {
    try {
      disk.clear(stale_only);
      ADD_FAILURE() << "cleared a directory that is not a cache (stale only: " << stale_only << ")";
    } catch (const CacheError& error) {
      EXPECT_NE(std::string(error.what()).find("does not look like an intfa kernel cache"),
                std::string::npos)
          << error.what();
    }
  }
  for (const fs::path& path : planted.paths) EXPECT_TRUE(present(path)) << path;
}

// In a real cache too, what intfa did not name is never removed: a file and a link at two-hex
// names, a directory at an entry's name, files in a two-hex folder named like nothing of ours.
TEST(CacheForeignFiles, ClearRemovesOnlyEntryFilesAndReportsWhatItKept) {
  const TempDirectory directory;
  const TempDirectory outside;
  DiskCache disk(directory.path());
  disk.store(test_key(0xab), fake_cubin(), families::kernel_source(quantize_rows_spec()));
  disk.store(test_key(0x12), fake_cubin(), families::kernel_source(quantize_rows_spec()));
  const NotACache planted(directory.path(), outside.path());
  const fs::path directory_entry = disk.entry_path(test_key(0x13));
  fs::create_directories(directory_entry / "inside");
  write_text(directory_entry / "inside" / "file", "x\n");
  write_text(disk.entry_path(test_key(0x12)).parent_path() / "notes", "mine\n");

  for (const bool stale_only : {true, false}) {
    const ClearReport report = disk.clear(stale_only);
    for (const fs::path& path : planted.paths) EXPECT_TRUE(present(path)) << path;
    EXPECT_TRUE(fs::exists(directory_entry / "inside" / "file"));
    EXPECT_TRUE(fs::exists(disk.entry_path(test_key(0x12)).parent_path() / "notes"));
    std::vector<fs::path> kept;
    for (const auto& [path, reason] : report.kept) kept.push_back(path);
    for (const fs::path& path : {directory.path() / "de", directory.path() / "42",
                                 directory.path() / "ca", directory_entry}) {
      EXPECT_NE(std::find(kept.begin(), kept.end(), path), kept.end()) << path;
    }
  }
  EXPECT_FALSE(fs::exists(disk.entry_path(test_key(0x12)))) << "the entries do go";
  EXPECT_FALSE(fs::exists(disk.entry_path(test_key(0xab))));
  EXPECT_FALSE(present(directory.path() / "ab" / (test_key(0xab).hex() + ".json")));
}

// The runtime's reads do not remove what is not intfa's either: a directory at an entry's name
// stays (one warning, the kernel comes from memory), and so does a link at a key folder's name.
TEST(CacheForeignFiles, LoadLeavesADirectoryAtAnEntrysNameInPlaceWithOneWarning) {
  const TempDirectory directory;
  DiskCache disk(directory.path());
  disk.store(test_key(0x21), fake_cubin(), families::kernel_source(quantize_rows_spec()));
  const fs::path entry = disk.entry_path(test_key(0x22));
  fs::create_directories(entry);
  write_text(entry / "file", "x\n");
  log::ScopedCapture capture;
  EXPECT_FALSE(disk.load(test_key(0x22)));
  EXPECT_FALSE(disk.load(test_key(0x22)));
  disk.store(test_key(0x22), fake_cubin(), families::kernel_source(quantize_rows_spec()));
  EXPECT_TRUE(fs::exists(entry / "file"));
  EXPECT_TRUE(disk.writable()) << "other keys are still stored";
  EXPECT_EQ(disk.load(test_key(0x21)), fake_cubin());
  const std::vector<std::string> warnings = capture.warnings();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find(entry.string()), std::string::npos) << warnings[0];
}

TEST(CacheForeignFiles, LoadAndStoreLeaveAFileAtAKeyFoldersNameInPlace) {
  const TempDirectory directory;
  DiskCache disk(directory.path());
  disk.store(test_key(0x31), fake_cubin(), families::kernel_source(quantize_rows_spec()));
  write_text(directory.path() / "ab", "precious\n");
  log::ScopedCapture capture;
  EXPECT_FALSE(disk.load(test_key(0xab)));
  disk.store(test_key(0xab), fake_cubin(), families::kernel_source(quantize_rows_spec()));
  EXPECT_FALSE(disk.load(test_key(0xab)));
  EXPECT_EQ(read_bytes(directory.path() / "ab").size(), 9u);
  EXPECT_TRUE(disk.writable());
  disk.store(test_key(0x32), fake_cubin(), families::kernel_source(quantize_rows_spec()));
  EXPECT_EQ(disk.load(test_key(0x32)), fake_cubin());
  EXPECT_EQ(capture.warnings().size(), 1u);
}

// What makes a directory look like a cache: intfa's CACHEDIR.TAG, written with the first entry
// (https://bford.info/cachedir/: backup tools skip such directories), or an entry file.
TEST(CacheForeignFiles, TheFirstStoreTagsTheDirectoryAsACache) {
  const TempDirectory parent;
  DiskCache disk(parent.path() / "cache");
  disk.store(test_key(0x41), fake_cubin(), families::kernel_source(quantize_rows_spec()));
  const std::vector<char> tag = read_bytes(parent.path() / "cache" / "CACHEDIR.TAG");
  const std::string text(tag.begin(), tag.end());
  EXPECT_EQ(text.rfind("Signature: 8a477f597d28d172789f06886806bc55", 0), 0u) << text;
  EXPECT_NE(text.find("intfa"), std::string::npos) << text;
  EXPECT_EQ(file_mode(parent.path() / "cache" / "CACHEDIR.TAG"), 0600u);
  fs::remove(disk.entry_path(test_key(0x41)));  // only the tag and an orphan sidecar are left
  EXPECT_EQ(disk.clear(true).removed_files, 1u);
  EXPECT_TRUE(fs::exists(parent.path() / "cache" / "CACHEDIR.TAG")) << "never removed";
}

}  // namespace
}  // namespace intfa::cache
