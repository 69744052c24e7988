// The on-disk cubin cache: one file per key, written atomically, verified on every read.
// Never a reason for a call to fail: a bad entry is dropped and rebuilt, an unwritable directory
// turns the cache memory-only with one warning.
#pragma once

#include <cstdint>
#include <ctime>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "cache/cache_key.hpp"
#include "nvrtc/compiler.hpp"
#include "render/kernel_spec.hpp"

namespace intfa::cache {

struct EntryInfo {
  CacheKey key;
  std::filesystem::path path;
  std::uint64_t size_bytes = 0;
  std::time_t modified = 0;
  std::string spec;  // the sidecar's readable spec, or "" when the sidecar is missing
};

struct VerifyReport {
  std::size_t checked = 0;
  std::vector<std::pair<std::filesystem::path, std::string>> bad;  // path, what is wrong
  bool ok() const { return bad.empty(); }
};

struct ClearReport {
  std::size_t removed_files = 0;
  std::uint64_t freed_bytes = 0;
};

// The bytes of a regular file, never following a symbolic link nor blocking on a FIFO. Throws
// EntryError when the file itself is bad (not a regular file, over `max_bytes`) and
// std::system_error when it cannot be read.
std::vector<char> read_regular_file(const std::filesystem::path& path, std::uint64_t max_bytes);

// Writes `size` bytes to `destination` through the temp file `temp_name` in its folder (created
// with O_EXCL, written, fsync'ed, renamed over the destination): readers see the old file or the
// whole new one, never a part. When two processes write one destination, the last rename wins.
// Throws std::system_error; the temp file never outlives a failure.
void write_file_atomically(const std::filesystem::path& destination,
                           const std::string& temp_file_name, const char* data, std::size_t size);

class DiskCache {
 public:
  // A cache directory and the environment variable that named it, for messages.
  struct Location {
    std::filesystem::path directory;
    std::string variable;  // "INTFA_CACHE_DIR", "XDG_CACHE_HOME" or "HOME"
  };

  // $INTFA_CACHE_DIR, else $XDG_CACHE_HOME/intfa, else $HOME/.cache/intfa; nullopt when
  // INTFA_CACHE_DISABLE=1 or no location can be named. Throws InvalidArgument naming
  // INTFA_CACHE_DIR when it is set to a relative path.
  static std::optional<Location> default_location();
  static std::optional<std::filesystem::path> default_directory();  // default_location()'s

  enum class Access {
    kReadWrite,  // the user cache: bad entries are removed and rebuilt, new ones stored
    kReadOnly,   // a deployment bundle: nothing in it is ever written, removed or created
  };

  // Creates the directory (0700) on first write. A group- or world-writable existing directory is
  // refused with a warning (the cache then works from memory only). Warnings name `named_by`, the
  // variable the directory came from, when given.
  explicit DiskCache(std::filesystem::path directory, Access access = Access::kReadWrite,
                     std::string named_by = {});

  const std::filesystem::path& directory() const { return directory_; }
  std::filesystem::path entry_path(const CacheKey& key) const;
  std::filesystem::path sidecar_path(const CacheKey& key) const;  // <32 hex>.json beside the entry

  // The verified cubin for `key`, or nullopt on a miss. A present but bad entry is removed, with
  // one warning, and reported as a miss so the caller rebuilds and replaces it. Read-only: the bad
  // entry stays where it is and is warned about once per file and process.
  std::optional<nvrtc::Cubin> load(const CacheKey& key);

  // Writes the entry (temp file in the same folder, fsync, rename) and its readable spec sidecar.
  // I/O failures never throw: the first one warns and makes this cache memory-only. Read-only:
  // does nothing. The first store also removes temp files over an hour old, left by killed
  // writers.
  void store(const CacheKey& key, const nvrtc::Cubin& cubin, const render::KernelSpec& spec);

  bool writable() const;
  bool read_only() const { return read_only_; }

  std::vector<EntryInfo> list() const;
  // Decodes every entry as load() would, and flags temp files older than an hour; removes nothing.
  VerifyReport verify() const;
  // Removes every entry, sidecar and temp file (stale_only = false), or only what this build
  // cannot use: entries that do not verify (another format or NVRTC version included), their
  // sidecars and orphan sidecars, and temp files older than an hour. Files not named like cache
  // files are never touched. Read-only: throws CacheError and removes nothing.
  ClearReport clear(bool stale_only);

  // Test hook: while set, every write_file_atomically in this process fails halfway through its
  // temp file as if the disk were full, so the full-disk path can be tested without a small file
  // system. (INTFA_TEST_PAUSE_WRITE=1, the other hook, stops the writer there with SIGSTOP.)
  static void set_write_failure_for_testing(bool fail);

 private:
  std::string description() const;  // the directory, and the variable that named it
  void disable_writes(const std::string& reason);
  void remove_stale_temps_once();

  std::filesystem::path directory_;
  std::string named_by_;
  bool read_only_ = false;
  bool refused_ = false;  // group- or world-writable: never read nor written
  mutable std::mutex mutex_;
  bool disabled_writes_ = false;
  bool swept_stale_temps_ = false;
};

}  // namespace intfa::cache
