// Which directories the cache reads code from, as ssh decides which files to trust: only one owned
// by this user or root, and writable by no one else; a cache directory, a key folder or a bundle
// of another user is refused with one warning, and the kernels come from memory. A directory that
// cannot be read is one warning too, never an attempt to repair it, and the tools report it.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "cache/bundle.hpp"
#include "cache/cache_test_support.hpp"
#include "cache/disk_cache.hpp"
#include "common/log.hpp"
#include "intfa/errors.hpp"
#include "support/child_test.hpp"

namespace intfa::cache {
namespace {

using namespace intfa::testing;

constexpr uid_t kOtherUser = 65534;  // "nobody"

#define INTFA_REQUIRE_ROOT()                                                                \
  do {                                                                                      \
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a directory to another user"; \
  } while (false)

void give_to_other_user(const fs::path& path) {
  ASSERT_EQ(::lchown(path.c_str(), kOtherUser, kOtherUser), 0)
      << path << ": " << std::strerror(errno);
}

// Loads and stores through `disk` as the runtime would: every load misses, nothing is written,
// and exactly one warning since `capture` began, naming `named` and saying `why`.
void expect_refused_with_one_warning(DiskCache& disk, const log::ScopedCapture& capture,
                                     const std::string& named, const std::string& why) {
  EXPECT_FALSE(disk.load(test_key(0x01))) << "a planted entry would be a hit";
  EXPECT_FALSE(disk.load(test_key(0x02)));
  disk.store(test_key(0x03), fake_cubin(), families::kernel_source(quantize_rows_spec()));
  EXPECT_FALSE(fs::exists(disk.entry_path(test_key(0x03))));
  EXPECT_FALSE(disk.load(test_key(0x03)));
  EXPECT_FALSE(disk.writable());
  const std::vector<std::string> warnings = capture.warnings();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find(named), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find(why), std::string::npos) << warnings[0];
}

// Entries for keys 0x01 and 0x02 in `directory`, written by this process.
void plant_entries(const fs::path& directory) {
  DiskCache writer(directory);
  writer.store(test_key(0x01), fake_cubin(), families::kernel_source(quantize_rows_spec()));
  writer.store(test_key(0x02), fake_cubin(), families::kernel_source(quantize_rows_spec()));
}

TEST(CacheTrust, ACacheDirectoryOfAnotherUserIsRefusedWithOneWarning) {
  INTFA_REQUIRE_ROOT();
  const TempDirectory directory;
  plant_entries(directory.path());
  give_to_other_user(directory.path());
  log::ScopedCapture capture;
  DiskCache disk(directory.path());
  expect_refused_with_one_warning(disk, capture, directory.path().string(), "uid 65534");
  EXPECT_TRUE(fs::exists(disk.entry_path(test_key(0x01)))) << "refusing removes nothing";
}

TEST(CacheTrust, AKeyFolderOfAnotherUserIsRefusedWithOneWarning) {
  INTFA_REQUIRE_ROOT();
  const TempDirectory directory;
  plant_entries(directory.path());
  DiskCache disk(directory.path());
  const fs::path folder = disk.entry_path(test_key(0x01)).parent_path();
  give_to_other_user(folder);
  log::ScopedCapture capture;
  expect_refused_with_one_warning(disk, capture, folder.string(), "uid 65534");
  EXPECT_TRUE(fs::exists(disk.entry_path(test_key(0x01))));
}

TEST(CacheTrust, AGroupWritableKeyFolderIsRefusedWithOneWarning) {
  const TempDirectory directory;
  plant_entries(directory.path());
  DiskCache disk(directory.path());
  const fs::path folder = disk.entry_path(test_key(0x01)).parent_path();
  ASSERT_EQ(::chmod(folder.c_str(), 0770), 0);
  log::ScopedCapture capture;
  expect_refused_with_one_warning(disk, capture, folder.string(), "writable");
}

TEST(CacheTrust, AnotherUsersDirectoryCreatedAfterTheCacheWasOpenedIsRefusedToo) {
  INTFA_REQUIRE_ROOT();
  const TempDirectory parent;
  DiskCache disk(parent.path() / "cache");
  plant_entries(parent.path() / "cache");
  for (const auto& item : fs::recursive_directory_iterator(parent.path() / "cache")) {
    give_to_other_user(item.path());
  }
  give_to_other_user(parent.path() / "cache");
  log::ScopedCapture capture;
  expect_refused_with_one_warning(disk, capture, (parent.path() / "cache").string(), "uid 65534");
}

// Root's directories are trusted by everyone: a bundle a package installed, say. Root writes a
// cache readable by others; uid 65534 loads from it without a warning.
TEST(CacheTrust, ACacheOfRootIsTrustedByAnotherUser) {
  INTFA_REQUIRE_ROOT();  // the parent, and the child before it gives up root
  constexpr const char* kRootsCache = "INTFA_TEST_ROOTS_CACHE";
  std::optional<TempDirectory> roots_cache;
  std::optional<ScopedEnv> named;
  if (std::getenv(kRootsCache) == nullptr) {
    roots_cache.emplace();
    plant_entries(roots_cache->path());
    fs::permissions(roots_cache->path(), fs::perms::owner_all | fs::perms::group_read |
                                             fs::perms::group_exec | fs::perms::others_read |
                                             fs::perms::others_exec);
    for (const auto& item : fs::recursive_directory_iterator(roots_cache->path())) {
      const bool folder = item.is_directory();
      fs::permissions(item.path(),
                      folder ? fs::perms::group_exec | fs::perms::others_exec |
                                   fs::perms::group_read | fs::perms::others_read
                             : fs::perms::group_read | fs::perms::others_read,
                      fs::perm_options::add);
    }
    named.emplace(kRootsCache, roots_cache->path().string());
  }
  if (rerun_without_root()) return;  // the rest runs as uid 65534
  log::ScopedCapture capture;
  DiskCache disk(std::getenv(kRootsCache), DiskCache::Access::kReadOnly);
  EXPECT_EQ(disk.load(test_key(0x01)), fake_cubin());
  EXPECT_TRUE(capture.warnings().empty()) << capture.warnings().front();
}

// The bundle's owner may differ from the user who runs it only when it is root: install a bundle
// as root (a package) or as the service's own user.
TEST(CacheTrust, ABundleOfAnotherUserIsIgnoredWithOneWarning) {
  INTFA_REQUIRE_ROOT();
  const TempDirectory bundle;
  plant_entries(bundle.path());
  Manifest manifest = Manifest::for_this_build();
  manifest.entries.push_back(
      describe_entry(bundle.path(), test_key(0x01), families::kernel_source(quantize_rows_spec())));
  write_manifest(bundle.path(), manifest);
  give_to_other_user(bundle.path());
  log::ScopedCapture capture;
  EXPECT_EQ(DeploymentBundle::open(bundle.path()), nullptr);
  EXPECT_EQ(DeploymentBundle::open(bundle.path()), nullptr);
  ASSERT_EQ(capture.warnings().size(), 1u);
  EXPECT_NE(capture.warnings()[0].find("uid 65534"), std::string::npos) << capture.warnings()[0];
}

// A bundle is shared read-only: the advice takes away the others' write permission and keeps
// their read permission (chmod 700, the user cache's advice, would lock the service out).
TEST(CacheTrust, ABundleOthersMayWriteIsIgnoredWithAdviceThatKeepsItReadable) {
  const TempDirectory bundle;
  plant_entries(bundle.path());
  write_manifest(bundle.path(), Manifest::for_this_build());
  ASSERT_EQ(::chmod(bundle.path().c_str(), 0777), 0);
  log::ScopedCapture capture;
  EXPECT_EQ(DeploymentBundle::open(bundle.path()), nullptr);
  ASSERT_EQ(capture.warnings().size(), 1u);
  EXPECT_NE(capture.warnings()[0].find("chmod go-w " + bundle.path().string()), std::string::npos)
      << capture.warnings()[0];
  EXPECT_EQ(capture.warnings()[0].find("chmod 700"), std::string::npos) << capture.warnings()[0];
}

TEST(CacheTrust, ABundleWhoseManifestBelongsToAnotherUserIsIgnored) {
  INTFA_REQUIRE_ROOT();
  const TempDirectory bundle;
  plant_entries(bundle.path());
  write_manifest(bundle.path(), Manifest::for_this_build());
  give_to_other_user(manifest_path(bundle.path()));
  log::ScopedCapture capture;
  EXPECT_EQ(DeploymentBundle::open(bundle.path()), nullptr);
  ASSERT_EQ(capture.warnings().size(), 1u);
  EXPECT_NE(capture.warnings()[0].find("uid 65534"), std::string::npos) << capture.warnings()[0];
}

// --- Directories that cannot be read ---

// An unreadable directory is one warning, whatever the number of kernels, and nothing is removed;
// the maintenance calls report the error instead of an empty cache.
void expect_unreadable(const fs::path& directory, const std::string& reason) {
  log::ScopedCapture capture;
  DiskCache disk(directory);
  for (unsigned char key = 0x01; key <= 0x04; ++key) {
    EXPECT_FALSE(disk.load(test_key(key)));
    disk.store(test_key(key), fake_cubin(), families::kernel_source(quantize_rows_spec()));
  }
  EXPECT_FALSE(disk.writable());
  const std::vector<std::string> warnings = capture.warnings();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find(reason), std::string::npos) << warnings[0];
  EXPECT_THROW(disk.list(), CacheError);
  EXPECT_THROW(disk.verify(), CacheError);
  EXPECT_THROW(disk.clear(false), CacheError);
  EXPECT_THROW(disk.clear(true), CacheError);
}

TEST(CacheUnreadable, ADirectoryWithoutReadAndSearchPermissionIsOneWarning) {
  if (rerun_without_root()) return;
  const TempDirectory directory;
  plant_entries(directory.path());
  ASSERT_EQ(::chmod(directory.path().c_str(), 0600), 0);
  expect_unreadable(directory.path(), std::strerror(EACCES));
  ASSERT_EQ(::chmod(directory.path().c_str(), 0700), 0);
  EXPECT_EQ(DiskCache(directory.path()).list().size(), 2u) << "nothing was removed";
}

TEST(CacheUnreadable, APathLongerThanTheSystemAllowsIsOneWarning) {
  const TempDirectory parent;
  fs::path directory = parent.path();
  while (directory.string().size() <= 4100) directory /= std::string(200, 'd');
  expect_unreadable(directory, std::strerror(ENAMETOOLONG));
}

}  // namespace
}  // namespace intfa::cache
