// The cache never reaches outside its directory through the names inside it, and never loads a
// cubin whose key or checksum does not match. "Never reaches" is observed, not inferred: inotify
// reports every open, read, write, attribute change, creation and removal in the outside
// directory while every cache operation runs against links that point into it.
#include <gtest/gtest.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "cache/cache_test_support.hpp"
#include "cache/disk_cache.hpp"
#include "cache/entry_format.hpp"
#include "common/log.hpp"

namespace intfa::cache {
namespace {

using namespace intfa::testing;

// Every inotify event in the watched directories while alive, as "<directory>/<name>: <mask>".
class DirectoryWatch {
 public:
  explicit DirectoryWatch(const std::vector<fs::path>& directories)
      : descriptor_(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) {
    if (descriptor_ < 0) throw std::runtime_error("inotify_init1 failed");
    for (const fs::path& directory : directories) {
      const int watch = ::inotify_add_watch(descriptor_, directory.c_str(), IN_ALL_EVENTS);
      if (watch < 0) throw std::runtime_error("cannot watch " + directory.string());
      watched_.resize(static_cast<std::size_t>(watch) + 1);
      watched_[static_cast<std::size_t>(watch)] = directory;
    }
  }
  ~DirectoryWatch() { ::close(descriptor_); }
  DirectoryWatch(const DirectoryWatch&) = delete;
  DirectoryWatch& operator=(const DirectoryWatch&) = delete;

  std::vector<std::string> events() const {
    std::vector<std::string> seen;
    alignas(inotify_event) char buffer[64 * 1024];
    for (ssize_t got; (got = ::read(descriptor_, buffer, sizeof buffer)) > 0;) {
      for (ssize_t at = 0; at < got;) {
        const auto* event = reinterpret_cast<const inotify_event*>(buffer + at);
        const std::string name = event->len > 0 ? event->name : "";
        seen.push_back((watched_.at(static_cast<std::size_t>(event->wd)) / name).string() +
                       ": mask " + std::to_string(event->mask));
        at += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
      }
    }
    return seen;
  }

 private:
  int descriptor_;
  std::vector<fs::path> watched_;  // by watch descriptor
};

TEST(CacheSecurity, NothingOutsideTheCacheIsOpenedChangedOrRemovedThroughLinksInIt) {
  const TempDirectory cache;
  const TempDirectory outside;
  const CacheKey entry_link = test_key(0x10), folder_link = test_key(0x20),
                 sidecar_link = test_key(0x30);
  // Outside: a valid entry and sidecar, and a folder holding another valid entry.
  const std::vector<char> outside_entry = encode_entry(entry_link, fake_cubin());
  write_bytes(outside.path() / "entry.cubin", outside_entry);
  write_text(outside.path() / "sidecar.json", "{\"spec_text\": \"planted\"}\n");
  write_text(outside.path() / "temp", "half an entry");
  const fs::path outside_folder = outside.path() / "folder";
  fs::create_directory(outside_folder);
  write_bytes(outside_folder / (folder_link.hex() + ".cubin"),
              encode_entry(folder_link, fake_cubin()));

  // Inside: a link at an entry's name, at a sidecar's name, at a (stale) temp file's name, and at
  // a key folder's name.
  DiskCache disk(cache.path());
  fs::create_directories(disk.entry_path(entry_link).parent_path());
  fs::create_directories(disk.entry_path(sidecar_link).parent_path());
  fs::create_symlink(outside.path() / "entry.cubin", disk.entry_path(entry_link));
  fs::create_symlink(outside.path() / "sidecar.json", disk.sidecar_path(entry_link));
  fs::create_symlink(outside.path() / "sidecar.json", disk.sidecar_path(sidecar_link));
  const fs::path temp_link =
      disk.entry_path(entry_link).parent_path() / (".tmp-" + entry_link.hex() + "-1-00");
  fs::create_symlink(outside.path() / "temp", temp_link);
  set_age(temp_link, 2 * 60 * 60);
  fs::create_directory_symlink(outside_folder, disk.entry_path(folder_link).parent_path());

  const DirectoryWatch watch({outside.path(), outside_folder});
  log::ScopedCapture capture;
  for (const CacheKey& key : {entry_link, folder_link, sidecar_link}) {
    EXPECT_FALSE(disk.load(key)) << "a link was followed to a valid entry";
  }
  disk.list();
  disk.verify();
  for (const CacheKey& key : {entry_link, folder_link, sidecar_link}) {
    disk.store(key, fake_cubin(80, 256, 0x77), families::kernel_source(quantize_rows_spec()));
    // The link at the folder's name is not intfa's to remove: that key works from memory.
    const auto expected =
        key == folder_link ? std::nullopt : std::optional<nvrtc::Cubin>(fake_cubin(80, 256, 0x77));
    EXPECT_EQ(disk.load(key), expected) << key.hex();
  }
  disk.clear(true);
  disk.clear(false);

  const std::vector<std::string> events = watch.events();
  for (const std::string& event : events) ADD_FAILURE() << "touched outside the cache: " << event;
  EXPECT_EQ(read_bytes(outside.path() / "entry.cubin"), outside_entry);
  EXPECT_TRUE(fs::exists(outside.path() / "temp"));
  EXPECT_TRUE(fs::exists(outside_folder / (folder_link.hex() + ".cubin")));
}

TEST(CacheSecurity, AValidEntryUnderAnotherKeysNameIsNeverLoaded) {
  const TempDirectory cache;
  DiskCache disk(cache.path());
  const CacheKey wanted = test_key(0x50), other = test_key(0x51);
  fs::create_directories(disk.entry_path(wanted).parent_path());
  write_bytes(disk.entry_path(wanted), encode_entry(other, fake_cubin()));
  log::ScopedCapture capture;
  EXPECT_FALSE(disk.load(wanted));
  ASSERT_EQ(capture.warnings().size(), 1u);
  EXPECT_NE(capture.warnings()[0].find("key"), std::string::npos) << capture.warnings()[0];
}

}  // namespace
}  // namespace intfa::cache
