// The on-disk cubin cache: one file per key, written atomically, verified on every read.
// Never a reason for a call to fail: a bad entry is dropped and rebuilt, an unwritable directory
// turns the cache memory-only with one warning. Loading and storing one entry is disk_cache.cpp;
// the maintenance of the directory as a whole (its tag, scan, list, verify, clear) is
// cache_maintenance.cpp. The file I/O and trust checks beneath both are common/file_io.hpp and
// common/file_trust.hpp; where the cache lives is common/locations.hpp.
#pragma once

#include <atomic>
#include <cstdint>
#include <ctime>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "cache/cache_key.hpp"
#include "nvrtc/compiler.hpp"
#include "render/kernel_source.hpp"

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
  // Things at intfa's names that are not intfa's (a directory at an entry's name, a file or link at
  // a key folder's name, a file in another key's folder): left in place, with why.
  std::vector<std::pair<std::filesystem::path, std::string>> kept;
  // intfa's files that could not be removed (a read-only mount, an immutable file, a key folder
  // the caller may not write), with the system's reason: the clear did not do all it was asked.
  std::vector<std::pair<std::filesystem::path, std::string>> failed;
};

// What a manifest recorded about an entry file, checked on every load of it: another valid entry
// put in its place passes the entry's own checks, not these.
struct RecordedFile {
  std::uint64_t size_bytes = 0;
  std::uint64_t xxh3_64 = 0;  // entry_file_checksum
  nvrtc::Version nvrtc;       // the NVRTC that wrote it (its bundle's manifest says which)
};

// XXH3-64 (seed 0) of a whole entry file, and its 16 lowercase hex digits.
std::uint64_t entry_file_checksum(const std::vector<char>& bytes);
std::string checksum_hex(std::uint64_t checksum);

class DiskCache {
 public:
  enum class Access {
    kReadWrite,    // the user cache: bad entries are removed and rebuilt, new ones stored
    kReadOnly,     // a deployment bundle: nothing in it is ever written, removed or created
    kWriteBundle,  // a bundle `intfa precompile` writes: as kReadWrite; messages name a bundle
  };

  // Creates the directory (0700) on first write, and tags it (CACHEDIR.TAG). An existing
  // directory files::check_directory() does not trust, or cannot read, is refused with one warning
  // (the cache then works from memory only); so is a key folder found later of another user, or
  // writable by others. Warnings name `named_by`, the variable the directory came from, when given.
  explicit DiskCache(std::filesystem::path directory, Access access = Access::kReadWrite,
                     std::string named_by = {});

  const std::filesystem::path& directory() const { return directory_; }
  std::filesystem::path entry_path(const CacheKey& key) const;
  std::filesystem::path sidecar_path(const CacheKey& key) const;  // <32 hex>.json beside the entry

  // The verified cubin for `key`, or nullopt on a miss. A present but bad entry is removed, with
  // one warning, and reported as a miss so the caller rebuilds and replaces it. Read-only: the bad
  // entry stays where it is and is warned about once per file and process. With `recorded`, the
  // file must also have the size and checksum recorded for it (a bundle's manifest). What is not
  // intfa's (a directory at the entry's name, a file or link at the key folder's name) is left in
  // place with one warning, and that key works from memory.
  std::optional<nvrtc::Cubin> load(const CacheKey& key, const RecordedFile* recorded = nullptr);

  // Writes the entry (temp file in the same folder, fsync, rename) and its readable sidecar, which
  // holds source.json and source.text (the unit itself is not kept).
  // I/O failures never throw: the first one warns and makes this cache memory-only. A key folder
  // that vanished mid-write (a concurrent clear) is made again, once. Read-only: does nothing. The
  // first store also removes temp files over an hour old, left by killed writers.
  void store(const CacheKey& key, const nvrtc::Cubin& cubin, const render::KernelSource& source);

  bool writable() const;
  bool read_only() const { return read_only_; }

  // list(), verify() and clear() throw CacheError when the directory cannot be read; a missing one
  // holds nothing.
  std::vector<EntryInfo> list() const;
  // Decodes every entry as load() would, and flags temp files older than an hour, anything at a
  // key folder's name that is not a directory and entries in another key's folder; removes nothing.
  VerifyReport verify() const;
  // Removes every entry, sidecar and temp file (stale_only = false), or only what this build
  // cannot use: entries that do not verify (another format or NVRTC version included), their
  // sidecars and orphan sidecars, and temp files older than an hour; then emptied key folders.
  // Only those files, in their own key folders, are ever removed (unlinked: a link, never what it
  // points to); ClearReport::kept lists what is at intfa's names but is not intfa's. Throws
  // CacheError and removes nothing when the directory does not look like a cache (no CACHEDIR.TAG
  // of intfa's, no entry, yet not empty), cannot be read, or is read-only.
  ClearReport clear(bool stale_only);

 private:
  enum class FolderState { kMissing, kUsable, kNotOurs, kRefused };

  // "the kernel cache DIR" or "the deployment bundle DIR", and the variable that named it
  std::string description() const;
  // Never reads nor writes the directory again, after one warning per directory and process.
  void refuse(const std::string& reason);
  void warn_not_ours(const std::filesystem::path& path, const std::string& problem) const;
  FolderState inspect_folder(const std::filesystem::path& folder);
  // false when the entry was not written because something at its names is not intfa's or the
  // directory is refused; throws std::system_error on an I/O failure.
  bool write_entry(const CacheKey& key, const std::vector<char>& entry, const std::string& sidecar);
  void tag_directory_once();
  void disable_writes(const std::string& reason);
  void remove_stale_temps_once();

  std::filesystem::path directory_;
  std::string named_by_;
  bool read_only_ = false;
  bool bundle_ = false;               // kReadOnly or kWriteBundle
  std::atomic<bool> refused_{false};  // untrusted or unreadable: never read nor written
  mutable std::mutex mutex_;
  bool disabled_writes_ = false;
  bool swept_stale_temps_ = false;
  bool tagged_ = false;
};

}  // namespace intfa::cache
