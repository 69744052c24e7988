// DiskCache's maintenance of the directory as a whole: its CACHEDIR.TAG, the scan of intfa's names
// in it, the sweep of stale temp files after a store, and list, verify and clear (`intfa cache`).
// Only names that follow the cache's layout (cache/README.md) are ever looked at, and only intfa's
// own files in their own key folders are ever removed; a directory that does not look like a cache
// is never cleared.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>

#include "cache/disk_cache.hpp"
#include "cache/disk_cache_internal.hpp"
#include "common/file_io.hpp"
#include "common/json.hpp"
#include "common/log.hpp"
#include "common/strings.hpp"
#include "intfa/errors.hpp"

namespace intfa::cache {
namespace fs = std::filesystem;
using detail::check_entry;
using detail::folder_problem;
using detail::is_lower_hex;
using detail::kEntrySuffix;
using detail::kFolderHexDigits;
using detail::kKeyHexDigits;
using detail::kSidecarSuffix;
using detail::kTempPrefix;
using detail::remove_file;
namespace {

// A sidecar is a few hundred bytes (one spec); one far larger was not written by intfa.
constexpr std::uint64_t kMaxSidecarBytes = std::uint64_t{64} << 10;
// A writer holds its temp file for milliseconds; one this old was left by a killed process.
constexpr std::time_t kStaleTempSeconds = std::time_t{60} * 60;
// The Cache Directory Tagging specification (https://bford.info/cachedir/): backup tools skip a
// directory holding this file, and `intfa cache clear` takes it as proof the directory is a cache.
constexpr const char* kTagFileName = "CACHEDIR.TAG";
constexpr std::string_view kTagSignature = "Signature: 8a477f597d28d172789f06886806bc55";
constexpr std::string_view kTagText =
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This directory is an intfa kernel cache (cache/README.md in intfa's sources).\n"
    "# For information about cache directory tags, see https://bford.info/cachedir/\n";
constexpr std::uint64_t kMaxTagBytes = 4096;

// --- The directory's tag ---

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

// A file that went away meanwhile (a concurrent clear or load) was removed all the same; any
// other error leaves it in place and is reported.
void remove_counted(const CacheFile& file, ClearReport& report) {
  if (const std::error_code error = remove_file(file.path)) {
    if (error != std::errc::no_such_file_or_directory) {
      report.failed.emplace_back(file.path, error.message());
    }
    return;
  }
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

}  // namespace

void DiskCache::tag_directory_once() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (tagged_) return;
    tagged_ = true;
  }
  write_cache_tag(directory_);
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
      // Only an empty folder goes: one holding anything else stays. One that is empty but cannot
      // be removed (a read-only cache directory) is a failure of the clear like a file's.
      if (::rmdir(folder.c_str()) != 0 && errno != ENOTEMPTY && errno != EEXIST &&
          errno != ENOENT) {
        report.failed.emplace_back(folder, std::strerror(errno));
      }
    }
  }
  return report;
}

}  // namespace intfa::cache
