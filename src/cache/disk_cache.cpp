#include "cache/disk_cache.hpp"

#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <random>

#include "cache/disk_cache_internal.hpp"
#include "cache/entry_format.hpp"
#include "common/file_io.hpp"
#include "common/file_trust.hpp"
#include "common/json.hpp"
#include "common/log.hpp"
#include "common/strings.hpp"
#include "intfa/errors.hpp"

namespace intfa::cache {
namespace fs = std::filesystem;
using detail::EntryCheck;
using detail::check_entry;
using detail::folder_problem;
using detail::is_lower_hex;
using detail::kEntrySuffix;
using detail::kFolderHexDigits;
using detail::kSidecarSuffix;
using detail::kTempPrefix;
using detail::remove_file;

namespace detail {

EntryCheck check_entry(const fs::path& path, const CacheKey& key, const RecordedFile* recorded) {
  using Outcome = EntryCheck::Outcome;
  EntryCheck check;
  std::error_code error;
  const fs::file_status status = fs::symlink_status(path, error);
  if (status.type() == fs::file_type::not_found) return check;
  if (error) {
    check.outcome = Outcome::kUnreadable;
    check.problem = "cannot stat: " + error.message();
    return check;
  }
  if (status.type() != fs::file_type::regular) {
    check.outcome = Outcome::kBad;
    check.problem = files::not_regular_file_problem(status.type());
    check.is_directory = status.type() == fs::file_type::directory;
    return check;
  }
  try {
    const std::vector<char> bytes = files::read_regular_file(path, kMaxEntryBytes);
    if (recorded != nullptr) {
      // Another valid entry (its own checksum recomputed) passes decode_entry; only the record
      // kept apart from the file tells it from the one that was installed.
      if (bytes.size() != recorded->size_bytes) {
        throw EntryError("size " + std::to_string(bytes.size()) + " bytes, the manifest records " +
                         std::to_string(recorded->size_bytes));
      }
      const std::uint64_t checksum = entry_file_checksum(bytes);
      if (checksum != recorded->xxh3_64) {
        throw EntryError("checksum " + checksum_hex(checksum) + ", the manifest records " +
                         checksum_hex(recorded->xxh3_64));
      }
    }
    check.cubin =
        recorded != nullptr ? decode_entry(bytes, key, recorded->nvrtc) : decode_entry(bytes, key);
    check.outcome = Outcome::kGood;
  } catch (const EntryError& bad) {
    check.outcome = Outcome::kBad;
    check.problem = bad.what();
  } catch (const files::UnexpectedFileError& bad) {
    check.outcome = Outcome::kBad;
    check.problem = bad.what();
  } catch (const std::system_error& io) {
    check.outcome = Outcome::kUnreadable;
    check.problem = io.what();
  }
  return check;
}

std::error_code remove_file(const fs::path& path) {
  if (::unlink(path.c_str()) != 0) return std::error_code(errno, std::generic_category());
  return {};
}

std::string folder_problem(fs::file_type type) {
  return "is " + files::file_type_name(type) + ", not a directory";
}

}  // namespace detail

namespace {

std::string random_hex() {
  // Seeded per thread; a forked child shares its parent's sequence, but the pid beside it in the
  // temp name keeps their names apart.
  thread_local std::mt19937_64 generator(
      std::random_device{}() ^
      static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
  const std::uint64_t value = generator();
  return strings::to_hex(reinterpret_cast<const unsigned char*>(&value), sizeof value);
}

std::string temp_name(const CacheKey& key) {
  return std::string(kTempPrefix) + key.hex() + "-" + std::to_string(::getpid()) + "-" +
         random_hex();
}

std::string sidecar_text(const CacheKey& key, const nvrtc::Cubin& cubin,
                         const render::KernelSource& source) {
  json::Value sidecar = json::Value::object();
  sidecar.set("key", key.hex());
  sidecar.set("spec", source.json);
  sidecar.set("spec_text", source.text);
  sidecar.set("nvrtc", nvrtc::version().to_string());
  sidecar.set("format_version", kFormatVersion);
  sidecar.set("lowered_name", cubin.lowered_name);
  sidecar.set("cubin_bytes", cubin.image.size());
  sidecar.set("created", static_cast<long long>(std::time(nullptr)));
  return sidecar.dump(2) + "\n";
}

fs::path normalized_directory(fs::path directory) {
  directory = directory.lexically_normal();
  if (!directory.has_filename() && directory.has_parent_path() &&
      directory != directory.root_path()) {
    directory = directory.parent_path();  // "/a/b/" -> "/a/b"
  }
  return directory;
}

std::string untrusted_directory_advice(const fs::path& directory,
                                       const files::DirectoryCheck& check,
                                       DiskCache::Access access) {
  if (check.verdict != files::DirectoryCheck::Verdict::kUntrusted) return "";
  if (check.owned_by_another_user) {
    return " (fix: use a directory of this user, or have root own it)";
  }
  if (check.problem.find("writable") == std::string::npos) return "";
  // A bundle is shared read-only: taking away the others' write permission keeps it readable.
  return access != DiskCache::Access::kReadWrite ? " (fix: chmod go-w " + directory.string() + ")"
                                                 : " (fix: chmod 700 " + directory.string() + ")";
}

}  // namespace

std::uint64_t entry_file_checksum(const std::vector<char>& bytes) {
  return XXH3_64bits(bytes.data(), bytes.size());
}

std::string checksum_hex(std::uint64_t checksum) {
  char text[24];
  std::snprintf(text, sizeof text, "%016" PRIx64, checksum);
  return text;
}

DiskCache::DiskCache(fs::path directory, Access access, std::string named_by)
    : directory_(normalized_directory(std::move(directory))),
      named_by_(std::move(named_by)),
      read_only_(access == Access::kReadOnly),
      bundle_(access != Access::kReadWrite),
      disabled_writes_(read_only_) {
  const files::DirectoryCheck check = files::check_directory(directory_);
  if (check.verdict == files::DirectoryCheck::Verdict::kUntrusted ||
      check.verdict == files::DirectoryCheck::Verdict::kUnreadable) {
    refuse(check.problem + untrusted_directory_advice(directory_, check, access));
  }
}

std::string DiskCache::description() const {
  return (bundle_ ? "the deployment bundle " : "the kernel cache ") + directory_.string() +
         (named_by_.empty() ? "" : " (named by " + named_by_ + ")");
}

void DiskCache::refuse(const std::string& reason) {
  refused_.store(true);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    disabled_writes_ = true;
  }
  // One warning per directory and process, however many kernels and DiskCache objects ask.
  log::warn_once("cache-refused:" + directory_.string(),
                 "not using " + description() + ": " + reason +
                     "; kernels are compiled without the disk cache");
}

void DiskCache::warn_not_ours(const fs::path& path, const std::string& problem) const {
  log::warn_once("cache-not-ours:" + path.string(),
                 "leaving " + path.string() + " alone: it " + problem +
                     ", so it is not intfa's; the kernels it would hold are compiled without the "
                     "disk cache");
}

fs::path DiskCache::entry_path(const CacheKey& key) const {
  const std::string hex = key.hex();
  fs::path path = directory_ / hex.substr(0, kFolderHexDigits) / (hex + std::string(kEntrySuffix));
  // hex() is [0-9a-f] only, so this holds by construction; checked because a path escaping the
  // cache directory would be a security bug, not a cache miss.
  if (path.parent_path().parent_path() != directory_ || !is_lower_hex(hex)) {
    throw InternalError("cache entry path " + path.string() + " is outside " + directory_.string());
  }
  return path;
}

fs::path DiskCache::sidecar_path(const CacheKey& key) const {
  return entry_path(key).replace_extension(kSidecarSuffix);
}

DiskCache::FolderState DiskCache::inspect_folder(const fs::path& folder) {
  struct stat info {};
  if (::lstat(folder.c_str(), &info) != 0) {
    if (errno == ENOENT) return FolderState::kMissing;
    refuse("its folder " + folder.string() + " cannot be read: " + std::strerror(errno));
    return FolderState::kRefused;
  }
  if (!S_ISDIR(info.st_mode)) {
    warn_not_ours(folder, folder_problem(files::file_type_of(info.st_mode)));
    return FolderState::kNotOurs;
  }
  const std::string problem = files::untrusted_directory_problem(info);
  if (!problem.empty()) {
    refuse("its folder " + folder.string() + ": " + problem);
    return FolderState::kRefused;
  }
  return FolderState::kUsable;
}

std::optional<nvrtc::Cubin> DiskCache::load(const CacheKey& key, const RecordedFile* recorded) {
  if (refused_.load()) return std::nullopt;
  try {
    const fs::path path = entry_path(key);
    if (inspect_folder(path.parent_path()) != FolderState::kUsable) return std::nullopt;
    EntryCheck check = check_entry(path, key, recorded);
    switch (check.outcome) {
      case EntryCheck::Outcome::kGood:
        return std::move(check.cubin);
      case EntryCheck::Outcome::kMissing:
        return std::nullopt;
      case EntryCheck::Outcome::kUnreadable:
        log::warn_once("cache-unreadable:" + path.string(),
                       "cannot read cache entry " + path.string() + ": " + check.problem +
                           "; compiling instead");
        return std::nullopt;
      case EntryCheck::Outcome::kBad: {
        if (read_only_) {
          // Never trusted, never repaired: a deployment bundle is rebuilt by whoever made it.
          log::warn_once("cache-bad-entry:" + path.string(),
                         "ignoring bad entry " + path.string() +
                             " of the read-only cache: " + check.problem + "; compiling instead");
          return std::nullopt;
        }
        if (check.is_directory) {
          warn_not_ours(path, check.problem);
          return std::nullopt;
        }
        const std::error_code removal = remove_file(path);
        remove_file(sidecar_path(key));
        log::warn("dropping bad cache entry " + path.string() + ": " + check.problem +
                  (removal ? " (could not remove it: " + removal.message() + ")"
                           : "; removed, it will be rebuilt"));
        return std::nullopt;
      }
    }
  } catch (const std::exception& error) {
    log::warn(std::string("kernel cache lookup failed: ") + error.what() + "; compiling instead");
  }
  return std::nullopt;
}

bool DiskCache::write_entry(const CacheKey& key, const std::vector<char>& entry,
                            const std::string& sidecar) {
  const fs::path path = entry_path(key);
  const fs::path folder = path.parent_path();
  files::create_private_directories(directory_);
  const files::DirectoryCheck check = files::check_directory(directory_);
  if (check.verdict != files::DirectoryCheck::Verdict::kTrusted) {
    refuse(check.problem + untrusted_directory_advice(directory_, check, Access::kReadWrite));
    return false;
  }
  tag_directory_once();
  if (::mkdir(folder.c_str(), 0700) != 0) {
    if (errno != EEXIST) files::throw_errno("cannot create directory", folder, errno);
    if (inspect_folder(folder) != FolderState::kUsable) return false;
  }
  struct stat at_name {};
  if (::lstat(path.c_str(), &at_name) == 0 && S_ISDIR(at_name.st_mode)) {
    warn_not_ours(path, "is a directory, not a regular file");
    return false;
  }
  files::write_file_atomically(path, temp_name(key), entry.data(), entry.size());
  files::write_file_atomically(sidecar_path(key), temp_name(key), sidecar.data(), sidecar.size());
  files::sync_directory(folder);
  return true;
}

void DiskCache::store(const CacheKey& key, const nvrtc::Cubin& cubin,
                      const render::KernelSource& source) {
  if (!writable()) return;
  try {
    const std::vector<char> entry = encode_entry(key, cubin);
    const std::string sidecar = sidecar_text(key, cubin, source);
    for (int attempt = 1;; ++attempt) {
      try {
        if (!write_entry(key, entry, sidecar)) return;
        break;
      } catch (const std::system_error& error) {
        // A concurrent `intfa cache clear` may remove the key folder (with this writer's temp
        // file) between the mkdir and the rename: the folder is made again, once.
        if (attempt == 1 && error.code() == std::errc::no_such_file_or_directory) continue;
        throw;
      }
    }
    remove_stale_temps_once();
  } catch (const std::exception& error) {
    disable_writes(error.what());
  } catch (...) {
    disable_writes("unknown error");
  }
}

void DiskCache::disable_writes(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (disabled_writes_) return;
    disabled_writes_ = true;
  }
  log::warn_once("cache-write:" + directory_.string(),
                 "cannot write " + description() + ": " + reason +
                     "; compiled kernels are no longer stored on disk by this process");
}

bool DiskCache::writable() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return !disabled_writes_;
}

}  // namespace intfa::cache
