#include "cache/disk_cache.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <random>
#include <string_view>
#include <system_error>

#include "cache/entry_format.hpp"
#include "common/file_io.hpp"
#include "common/file_trust.hpp"
#include "common/json.hpp"
#include "common/log.hpp"
#include "common/strings.hpp"
#include "intfa/errors.hpp"

namespace intfa::cache {
namespace fs = std::filesystem;
namespace {

// A cubin is at most tens of MiB; anything far larger at an entry's name is not ours, and reading
// it whole into memory is what a bad file must not make us do.
constexpr std::uint64_t kMaxEntryBytes = std::uint64_t{1} << 30;
// A sidecar is a few hundred bytes (one spec); one far larger was not written by intfa.
constexpr std::uint64_t kMaxSidecarBytes = std::uint64_t{64} << 10;
// A writer holds its temp file for milliseconds; one this old was left by a killed process.
constexpr std::time_t kStaleTempSeconds = std::time_t{60} * 60;
constexpr std::string_view kEntrySuffix = ".cubin";
constexpr std::string_view kSidecarSuffix = ".json";
constexpr std::string_view kTempPrefix = ".tmp-";
constexpr std::size_t kKeyHexDigits = 32;
constexpr std::size_t kFolderHexDigits = 2;
// The Cache Directory Tagging specification (https://bford.info/cachedir/): backup tools skip a
// directory holding this file, and `intfa cache clear` takes it as proof the directory is a cache.
constexpr const char* kTagFileName = "CACHEDIR.TAG";
constexpr std::string_view kTagSignature = "Signature: 8a477f597d28d172789f06886806bc55";
constexpr std::string_view kTagText =
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This directory is an intfa kernel cache (cache/README.md in intfa's sources).\n"
    "# For information about cache directory tags, see https://bford.info/cachedir/\n";
constexpr std::uint64_t kMaxTagBytes = 4096;

bool is_lower_hex(std::string_view text) {
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

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

// What is at an entry's name: a verified cubin, nothing, a bad file, or one that cannot be read
// (an I/O error is no proof the entry is bad, so such a file is left in place). A directory there
// is bad too, but it is not intfa's to remove.
struct EntryCheck {
  enum class Outcome { kGood, kMissing, kBad, kUnreadable };
  Outcome outcome = Outcome::kMissing;
  std::optional<nvrtc::Cubin> cubin;
  std::string problem;
  bool is_directory = false;
};

EntryCheck check_entry(const fs::path& path, const CacheKey& key,
                       const RecordedFile* recorded = nullptr) {
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
    check.cubin = decode_entry(bytes, key);
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

std::string read_spec_text(const fs::path& sidecar) {
  try {
    const std::vector<char> bytes = files::read_regular_file(sidecar, kMaxSidecarBytes);
    const json::Value document = json::parse(std::string_view(bytes.data(), bytes.size()));
    const json::Value* text = document.is_object() ? document.find("spec_text") : nullptr;
    return text != nullptr && text->is_string() ? text->as_string() : "";
  } catch (const std::exception&) {
    return "";  // a missing or unreadable sidecar only costs the listing its readable spec
  }
}

// Removes the name `path` (a file, a link, a FIFO; never a directory, and never what a link
// points to). Only ever called on intfa's own names inside a <2 hex> folder.
std::error_code remove_file(const fs::path& path) {
  if (::unlink(path.c_str()) != 0) return std::error_code(errno, std::generic_category());
  return {};
}

// --- Writing ---

// A tag that is not (yet, or no longer) complete proves nothing; reading it never throws.
bool holds_cache_tag(const fs::path& directory) {
  try {
    const std::vector<char> bytes =
        files::read_regular_file(directory / kTagFileName, kMaxTagBytes);
    const std::string_view text(bytes.data(), bytes.size());
    return strings::starts_with(text, kTagSignature) && text.find("intfa") != text.npos;
  } catch (const std::exception&) {
    return false;
  }
}

// Best effort: a directory without its tag still works; `intfa cache clear` then looks for
// entries instead.
void write_cache_tag(const fs::path& directory) {
  const fs::path path = directory / kTagFileName;
  files::FileDescriptor file(
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!file.valid()) return;  // there already, or the directory is not writable
  std::size_t written = 0;
  while (written < kTagText.size()) {
    const ssize_t wrote = ::write(file.get(), kTagText.data() + written, kTagText.size() - written);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) return;
    written += static_cast<std::size_t>(wrote);
  }
}

std::string sidecar_text(const CacheKey& key, const nvrtc::Cubin& cubin,
                         const render::KernelSpec& spec) {
  json::Value sidecar = json::Value::object();
  sidecar.set("key", key.hex());
  sidecar.set("spec", spec.to_json());
  sidecar.set("spec_text", spec.to_string());
  sidecar.set("nvrtc", nvrtc::version().to_string());
  sidecar.set("format_version", kFormatVersion);
  sidecar.set("lowered_name", cubin.lowered_name);
  sidecar.set("cubin_bytes", cubin.image.size());
  sidecar.set("created", static_cast<long long>(std::time(nullptr)));
  return sidecar.dump(2) + "\n";
}

// --- Scanning ---

// One file whose name follows the cache's naming; nothing else in the directory is ever touched.
struct CacheFile {
  enum class Kind { kEntry, kSidecar, kTemp, kFolder };
  Kind kind = Kind::kEntry;
  fs::path path;
  CacheKey key;  // from the name; unset for kFolder
  fs::file_type type = fs::file_type::none;
  std::uint64_t size_bytes = 0;
  std::time_t modified = 0;
  bool in_own_folder = true;  // the folder is the key's first two hex digits
};

// Which of intfa's names `name` is, or nullopt for a name intfa never writes.
std::optional<CacheFile::Kind> kind_of(std::string_view name) {
  const std::size_t temp_key_end = kTempPrefix.size() + kKeyHexDigits;
  if (strings::starts_with(name, kTempPrefix) && name.size() > temp_key_end &&
      name[temp_key_end] == '-') {
    return CacheFile::Kind::kTemp;
  }
  if (name.size() == kKeyHexDigits + kEntrySuffix.size() &&
      strings::ends_with(name, kEntrySuffix)) {
    return CacheFile::Kind::kEntry;
  }
  if (name.size() == kKeyHexDigits + kSidecarSuffix.size() &&
      strings::ends_with(name, kSidecarSuffix)) {
    return CacheFile::Kind::kSidecar;
  }
  return std::nullopt;
}

std::optional<CacheFile> classify(const fs::path& path, const std::string& folder_name) {
  const std::string name = path.filename().string();
  const auto kind = kind_of(name);
  if (!kind) return std::nullopt;
  const std::size_t key_at = *kind == CacheFile::Kind::kTemp ? kTempPrefix.size() : 0;
  const std::string key_hex = name.substr(key_at, kKeyHexDigits);
  const auto key = CacheKey::from_hex(key_hex);
  if (!key) return std::nullopt;
  CacheFile file;
  file.kind = *kind;
  file.path = path;
  file.key = *key;
  file.in_own_folder = key_hex.compare(0, kFolderHexDigits, folder_name) == 0;
  return file;
}

// false when the file went away since it was listed (a concurrent clear or load); throws
// CacheError when it cannot be looked at.
bool fill_metadata(CacheFile& file) {
  struct stat info {};
  if (::lstat(file.path.c_str(), &info) != 0) {
    if (errno == ENOENT) return false;
    throw CacheError("cannot read " + file.path.string() + ": " + std::strerror(errno));
  }
  file.type = files::file_type_of(info.st_mode);
  file.size_bytes = static_cast<std::uint64_t>(info.st_size);
  file.modified = info.st_mtime;
  return true;
}

// The names in `directory`, sorted; none when it went away (a concurrent clear removes emptied
// key folders). Throws CacheError when it cannot be read: an unreadable cache is not an empty one.
std::vector<fs::path> children(const fs::path& directory) {
  std::vector<fs::path> paths;
  std::error_code error;
  for (fs::directory_iterator it(directory, error), end; !error && it != end; it.increment(error)) {
    paths.push_back(it->path());
  }
  if (error == std::errc::no_such_file_or_directory) return {};
  if (error) throw CacheError("cannot read " + directory.string() + ": " + error.message());
  std::sort(paths.begin(), paths.end());
  return paths;
}

// Whether `directory` exists; throws CacheError when that cannot be told (EACCES on a parent, a
// path too long, a file where a parent directory should be).
bool directory_exists(const fs::path& directory) {
  struct stat info {};
  if (::stat(directory.c_str(), &info) == 0) {
    if (!S_ISDIR(info.st_mode)) {
      throw CacheError(directory.string() + " is " +
                       files::file_type_name(files::file_type_of(info.st_mode)) +
                       ", not a directory");
    }
    return true;
  }
  if (errno == ENOENT) return false;
  throw CacheError("cannot read " + directory.string() + ": " + std::strerror(errno));
}

// Every cache-named file under `directory`'s <2 hex> folders, and every <2 hex> name that is not
// a plain directory (never descended into). Collected first so callers may remove as they go. A
// missing directory holds nothing; one that cannot be read throws CacheError.
std::vector<CacheFile> scan(const fs::path& directory) {
  std::vector<CacheFile> files;
  if (!directory_exists(directory)) return files;
  for (const fs::path& folder : children(directory)) {
    const std::string folder_name = folder.filename().string();
    if (folder_name.size() != kFolderHexDigits || !is_lower_hex(folder_name)) continue;
    CacheFile odd;
    odd.kind = CacheFile::Kind::kFolder;
    odd.path = folder;
    if (!fill_metadata(odd)) continue;
    if (odd.type != fs::file_type::directory) {
      files.push_back(odd);
      continue;
    }
    for (const fs::path& path : children(folder)) {
      auto file = classify(path, folder_name);
      if (file && fill_metadata(*file)) files.push_back(*file);
    }
  }
  return files;
}

// Whether a clear may remove anything from `directory`: it holds intfa's tag, or an entry or temp
// file in its own key folder, or nothing at all. A mistyped --dir must not cost anyone a file.
bool looks_like_cache(const fs::path& directory, const std::vector<CacheFile>& files) {
  if (holds_cache_tag(directory)) return true;
  for (const CacheFile& file : files) {
    if ((file.kind == CacheFile::Kind::kEntry || file.kind == CacheFile::Kind::kTemp) &&
        file.in_own_folder && file.type == fs::file_type::regular) {
      return true;
    }
  }
  return children(directory).empty();
}

bool is_stale_temp(const CacheFile& file) {
  return file.kind == CacheFile::Kind::kTemp &&
         std::time(nullptr) - file.modified > kStaleTempSeconds;
}

// Why a scanned entry file is bad, or "" when it verifies.
std::string entry_problem(const CacheFile& file, const fs::path& directory) {
  if (!file.in_own_folder) {
    return "stored in the wrong folder (expected " +
           (directory / file.key.hex().substr(0, kFolderHexDigits)).string() + ")";
  }
  return check_entry(file.path, file.key).problem;
}

std::string folder_problem(fs::file_type type) {
  return "is " + files::file_type_name(type) + ", not a directory";
}

void remove_counted(const CacheFile& file, ClearReport& report) {
  if (remove_file(file.path)) return;
  report.removed_files++;
  if (file.type == fs::file_type::regular) report.freed_bytes += file.size_bytes;
}

// Why clear must leave `file` where it is although it has one of intfa's names, or "".
std::string not_ours_problem(const CacheFile& file) {
  if (file.kind == CacheFile::Kind::kFolder) return folder_problem(file.type);
  if (file.type == fs::file_type::directory) return "is a directory, not a file intfa wrote";
  if (!file.in_own_folder) return "is in another key's folder, where intfa never writes it";
  return "";
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
  return access == DiskCache::Access::kReadOnly ? " (fix: chmod go-w " + directory.string() + ")"
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
      disabled_writes_(read_only_) {
  const files::DirectoryCheck check = files::check_directory(directory_);
  if (check.verdict == files::DirectoryCheck::Verdict::kUntrusted ||
      check.verdict == files::DirectoryCheck::Verdict::kUnreadable) {
    refuse(check.problem + untrusted_directory_advice(directory_, check, access));
  }
}

std::string DiskCache::description() const {
  return directory_.string() + (named_by_.empty() ? "" : " (named by " + named_by_ + ")");
}

void DiskCache::refuse(const std::string& reason) {
  refused_.store(true);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    disabled_writes_ = true;
  }
  // One warning per directory and process, however many kernels and DiskCache objects ask.
  log::warn_once("cache-refused:" + directory_.string(),
                 "not using the kernel cache " + description() + ": " + reason +
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
                      const render::KernelSpec& spec) {
  if (!writable()) return;
  try {
    const std::vector<char> entry = encode_entry(key, cubin);
    const std::string sidecar = sidecar_text(key, cubin, spec);
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

void DiskCache::tag_directory_once() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (tagged_) return;
    tagged_ = true;
  }
  write_cache_tag(directory_);
}

void DiskCache::disable_writes(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (disabled_writes_) return;
    disabled_writes_ = true;
  }
  log::warn_once("cache-write:" + directory_.string(),
                 "cannot write the kernel cache " + description() + ": " + reason +
                     "; compiled kernels are no longer stored on disk by this process");
}

void DiskCache::remove_stale_temps_once() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (swept_stale_temps_) return;
    swept_stale_temps_ = true;
  }
  std::size_t removed = 0;
  try {
    for (const CacheFile& file : scan(directory_)) {
      if (is_stale_temp(file) && file.in_own_folder && file.type != fs::file_type::directory &&
          !remove_file(file.path)) {
        removed++;
      }
    }
  } catch (const std::exception&) {
    return;  // tidying up is best effort; the entry was stored
  }
  if (removed > 0) {
    log::info("removed " + std::to_string(removed) + " temp files over an hour old from " +
              directory_.string() + " (left by writers that were killed)");
  }
}

bool DiskCache::writable() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return !disabled_writes_;
}

std::vector<EntryInfo> DiskCache::list() const {
  std::vector<EntryInfo> entries;
  for (const CacheFile& file : scan(directory_)) {
    if (file.kind != CacheFile::Kind::kEntry || file.type != fs::file_type::regular ||
        !file.in_own_folder) {
      continue;
    }
    EntryInfo info;
    info.key = file.key;
    info.path = file.path;
    info.size_bytes = file.size_bytes;
    info.modified = file.modified;
    info.spec = read_spec_text(sidecar_path(file.key));
    entries.push_back(std::move(info));
  }
  std::sort(entries.begin(), entries.end(),
            [](const EntryInfo& a, const EntryInfo& b) { return a.key < b.key; });
  return entries;
}

VerifyReport DiskCache::verify() const {
  VerifyReport report;
  for (const CacheFile& file : scan(directory_)) {
    switch (file.kind) {
      case CacheFile::Kind::kEntry: {
        report.checked++;
        std::string problem = entry_problem(file, directory_);
        if (!problem.empty()) report.bad.emplace_back(file.path, std::move(problem));
        break;
      }
      case CacheFile::Kind::kTemp:
        if (is_stale_temp(file)) report.bad.emplace_back(file.path, "stale temp file");
        break;
      case CacheFile::Kind::kFolder:
        report.bad.emplace_back(file.path, folder_problem(file.type));
        break;
      case CacheFile::Kind::kSidecar:
        break;
    }
  }
  return report;
}

ClearReport DiskCache::clear(bool stale_only) {
  if (read_only_) {
    throw CacheError("the kernel cache " + directory_.string() + " is opened read-only");
  }
  if (!directory_exists(directory_)) return {};
  const std::vector<CacheFile> files = scan(directory_);
  if (!looks_like_cache(directory_, files)) {
    throw CacheError(directory_.string() +
                     " does not look like an intfa kernel cache: it holds neither intfa's " +
                     kTagFileName + " nor a cache entry; nothing was removed");
  }
  ClearReport report;
  std::vector<CacheFile> sidecars;
  for (const CacheFile& file : files) {
    if (std::string problem = not_ours_problem(file); !problem.empty()) {
      report.kept.emplace_back(file.path, std::move(problem));
      continue;
    }
    bool remove = !stale_only;
    switch (file.kind) {
      case CacheFile::Kind::kEntry:
        remove = remove || !entry_problem(file, directory_).empty();
        break;
      case CacheFile::Kind::kTemp:
        remove = remove || is_stale_temp(file);
        break;
      case CacheFile::Kind::kSidecar:
        if (!remove) sidecars.push_back(file);  // orphan or not is known after the entries
        break;
      case CacheFile::Kind::kFolder:
        break;
    }
    if (remove) remove_counted(file, report);
  }
  for (const CacheFile& sidecar : sidecars) {
    std::error_code error;
    const fs::path entry = fs::path(sidecar.path).replace_extension(kEntrySuffix);
    if (fs::symlink_status(entry, error).type() != fs::file_type::regular) {
      remove_counted(sidecar, report);
    }
  }
  for (const fs::path& folder : children(directory_)) {
    const std::string name = folder.filename().string();
    if (name.size() == kFolderHexDigits && is_lower_hex(name)) {
      ::rmdir(folder.c_str());  // only an empty folder goes: one holding anything else stays
    }
  }
  return report;
}

}  // namespace intfa::cache
