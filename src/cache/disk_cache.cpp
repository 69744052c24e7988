#include "cache/disk_cache.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <ctime>
#include <random>
#include <string_view>
#include <system_error>

#include "cache/entry_format.hpp"
#include "common/env.hpp"
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

std::atomic<bool> g_fail_writes_for_testing{false};
// Test-only (cache/README.md): a writer stops itself with SIGSTOP halfway through a temp file.
constexpr const char* kPauseWriteVariable = "INTFA_TEST_PAUSE_WRITE";

[[noreturn]] void throw_errno(const std::string& what, const fs::path& path, int error) {
  throw std::system_error(error, std::generic_category(), what + " " + path.string());
}

// Owns one file descriptor.
class FileDescriptor {
 public:
  explicit FileDescriptor(int descriptor) : descriptor_(descriptor) {}
  ~FileDescriptor() {
    if (descriptor_ >= 0) ::close(descriptor_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return descriptor_; }
  bool valid() const { return descriptor_ >= 0; }
  // close() can report a write error deferred by the file system (NFS, quota), so a writer asks.
  int close_now() {
    const int result = ::close(descriptor_);
    descriptor_ = -1;
    return result;
  }

 private:
  int descriptor_;
};

// Unlinks a temp file unless it was renamed into place.
class TempFileGuard {
 public:
  explicit TempFileGuard(fs::path path) : path_(std::move(path)) {}
  ~TempFileGuard() {
    if (!path_.empty()) ::unlink(path_.c_str());
  }
  TempFileGuard(const TempFileGuard&) = delete;
  TempFileGuard& operator=(const TempFileGuard&) = delete;
  void release() { path_.clear(); }

 private:
  fs::path path_;
};

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

// --- Reading ---

std::string file_type_name(fs::file_type type) {
  switch (type) {
    case fs::file_type::regular:
      return "a regular file";
    case fs::file_type::directory:
      return "a directory";
    case fs::file_type::symlink:
      return "a symbolic link";
    default:
      return "a special file";
  }
}

std::string not_regular_problem(fs::file_type type) {
  return "is " + file_type_name(type) + ", not a regular file" +
         (type == fs::file_type::symlink ? " (never followed)" : "");
}

}  // namespace

std::vector<char> read_regular_file(const fs::path& path, std::uint64_t max_bytes) {
  // O_NONBLOCK: a FIFO planted at an entry's name must not hang the open.
  FileDescriptor file(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (!file.valid()) {
    if (errno == ELOOP) throw EntryError(not_regular_problem(fs::file_type::symlink));
    throw_errno("cannot open", path, errno);
  }
  struct stat info {};
  if (::fstat(file.get(), &info) != 0) throw_errno("cannot stat", path, errno);
  if (!S_ISREG(info.st_mode)) throw EntryError(not_regular_problem(fs::file_type::unknown));
  if (static_cast<std::uint64_t>(info.st_size) > max_bytes) {
    throw EntryError("is " + std::to_string(info.st_size) + " bytes, larger than any entry");
  }
  std::vector<char> bytes(static_cast<std::size_t>(info.st_size));
  std::size_t filled = 0;
  while (filled < bytes.size()) {
    const ssize_t got = ::read(file.get(), bytes.data() + filled, bytes.size() - filled);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw_errno("cannot read", path, errno);
    if (got == 0) break;  // shrank since fstat: decode_entry reports the truncation
    filled += static_cast<std::size_t>(got);
  }
  bytes.resize(filled);
  return bytes;
}

namespace {

// What is at an entry's name: a verified cubin, nothing, a bad file, or one that cannot be read
// (an I/O error is no proof the entry is bad, so such a file is left in place).
struct EntryCheck {
  enum class Outcome { kGood, kMissing, kBad, kUnreadable };
  Outcome outcome = Outcome::kMissing;
  std::optional<nvrtc::Cubin> cubin;
  std::string problem;
};

EntryCheck check_entry(const fs::path& path, const CacheKey& key) {
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
    check.problem = not_regular_problem(status.type());
    return check;
  }
  try {
    check.cubin = decode_entry(read_regular_file(path, kMaxEntryBytes), key);
    check.outcome = Outcome::kGood;
  } catch (const EntryError& bad) {
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
    const std::vector<char> bytes = read_regular_file(sidecar, kMaxSidecarBytes);
    const json::Value document = json::parse(std::string_view(bytes.data(), bytes.size()));
    const json::Value* text = document.is_object() ? document.find("spec_text") : nullptr;
    return text != nullptr && text->is_string() ? text->as_string() : "";
  } catch (const std::exception&) {
    return "";  // a missing or unreadable sidecar only costs the listing its readable spec
  }
}

// Removes whatever is at `path` without following a link; a directory at an entry's name is
// removed with its contents, since only intfa names things that way inside the cache.
std::error_code remove_path(const fs::path& path) {
  std::error_code error;
  if (fs::symlink_status(path, error).type() == fs::file_type::directory) {
    fs::remove_all(path, error);
  } else {
    fs::remove(path, error);
  }
  return error;
}

// --- Writing ---

// mkdir -p where every directory created is private (0700): cubins are code this process runs.
void create_private_directories(const fs::path& directory) {
  std::error_code error;
  if (fs::is_directory(directory, error)) return;
  const fs::path parent = directory.parent_path();
  if (!parent.empty() && parent != directory) create_private_directories(parent);
  if (::mkdir(directory.c_str(), 0700) != 0 && errno != EEXIST) {
    throw_errno("cannot create directory", directory, errno);
  }
}

// The <2 hex> folder, which must be a real directory: a link there would send writes elsewhere.
void create_entry_folder(const fs::path& folder) {
  if (::mkdir(folder.c_str(), 0700) == 0) return;
  if (errno != EEXIST) throw_errno("cannot create directory", folder, errno);
  struct stat info {};
  if (::lstat(folder.c_str(), &info) != 0) throw_errno("cannot stat", folder, errno);
  if (!S_ISDIR(info.st_mode)) {
    throw std::system_error(ENOTDIR, std::generic_category(),
                            folder.string() + " is not a plain directory");
  }
}

void write_all(int descriptor, const char* data, std::size_t size, const fs::path& path) {
  std::size_t written = 0;
  while (written < size) {
    const ssize_t wrote = ::write(descriptor, data + written, size - written);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote < 0) throw_errno("cannot write", path, errno);
    written += static_cast<std::size_t>(wrote);
  }
}

// The test hooks act here, with half of the temp file written: a failure or a crash at this point
// is the one that must leave neither an entry nor a temp file that could be read as one.
void write_halfway_hooks(const fs::path& temp) {
  if (env::flag(kPauseWriteVariable)) {
    // The parent test sees the stop (waitpid WUNTRACED) and sends SIGKILL: a writer that dies
    // mid-write, deterministically.
    ::raise(SIGSTOP);
  }
  if (g_fail_writes_for_testing.load()) {
    throw std::system_error(ENOSPC, std::generic_category(),
                            "cannot write " + temp.string() +
                                " (simulated by DiskCache::set_write_failure_for_testing)");
  }
}

}  // namespace

void write_file_atomically(const fs::path& destination, const std::string& temp_file_name,
                           const char* data, std::size_t size) {
  const fs::path temp = destination.parent_path() / temp_file_name;
  FileDescriptor file(
      ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!file.valid()) throw_errno("cannot create", temp, errno);
  TempFileGuard guard(temp);
  const std::size_t half = size / 2;
  write_all(file.get(), data, half, temp);
  write_halfway_hooks(temp);
  write_all(file.get(), data + half, size - half, temp);
  if (::fsync(file.get()) != 0) throw_errno("cannot fsync", temp, errno);
  if (file.close_now() != 0) throw_errno("cannot close", temp, errno);
  if (::rename(temp.c_str(), destination.c_str()) != 0) {
    throw_errno("cannot rename into place", destination, errno);
  }
  guard.release();
}

namespace {

// Makes the renames durable; a failure only weakens durability, never correctness.
void sync_directory(const fs::path& directory) {
  FileDescriptor folder(::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (folder.valid()) ::fsync(folder.get());
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

void fill_metadata(CacheFile& file) {
  struct stat info {};
  if (::lstat(file.path.c_str(), &info) != 0) return;
  file.type = S_ISREG(info.st_mode)   ? fs::file_type::regular
              : S_ISDIR(info.st_mode) ? fs::file_type::directory
              : S_ISLNK(info.st_mode) ? fs::file_type::symlink
                                      : fs::file_type::unknown;
  file.size_bytes = static_cast<std::uint64_t>(info.st_size);
  file.modified = info.st_mtime;
}

std::vector<fs::path> children(const fs::path& directory) {
  std::vector<fs::path> paths;
  std::error_code error;
  for (fs::directory_iterator it(directory, error), end; !error && it != end; it.increment(error)) {
    paths.push_back(it->path());
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

// Every cache-named file under `directory`'s <2 hex> folders, and every <2 hex> name that is not
// a plain directory (never descended into). Collected first so callers may remove as they go.
std::vector<CacheFile> scan(const fs::path& directory) {
  std::vector<CacheFile> files;
  for (const fs::path& folder : children(directory)) {
    const std::string folder_name = folder.filename().string();
    if (folder_name.size() != kFolderHexDigits || !is_lower_hex(folder_name)) continue;
    std::error_code error;
    if (fs::symlink_status(folder, error).type() != fs::file_type::directory) {
      CacheFile odd;
      odd.kind = CacheFile::Kind::kFolder;
      odd.path = folder;
      fill_metadata(odd);
      files.push_back(odd);
      continue;
    }
    for (const fs::path& path : children(folder)) {
      auto file = classify(path, folder_name);
      if (!file) continue;
      fill_metadata(*file);
      files.push_back(*file);
    }
  }
  return files;
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
  return "is " + file_type_name(type) + ", not a directory";
}

void remove_counted(const CacheFile& file, ClearReport& report) {
  if (remove_path(file.path)) return;
  report.removed_files++;
  if (file.type == fs::file_type::regular) report.freed_bytes += file.size_bytes;
}

fs::path normalized_directory(fs::path directory) {
  directory = directory.lexically_normal();
  if (!directory.has_filename() && directory.has_parent_path() &&
      directory != directory.root_path()) {
    directory = directory.parent_path();  // "/a/b/" -> "/a/b"
  }
  return directory;
}

}  // namespace

std::optional<DiskCache::Location> DiskCache::default_location() {
  if (env::flag("INTFA_CACHE_DISABLE")) return std::nullopt;
  if (const auto forced = env::get("INTFA_CACHE_DIR")) {
    if (!fs::path(*forced).is_absolute()) {
      throw InvalidArgument("INTFA_CACHE_DIR", "'" + *forced + "'", "expected an absolute path");
    }
    return Location{fs::path(*forced), "INTFA_CACHE_DIR"};
  }
  // The XDG base directory specification says relative values are invalid and to be ignored.
  if (const auto xdg = env::get("XDG_CACHE_HOME"); xdg && fs::path(*xdg).is_absolute()) {
    return Location{fs::path(*xdg) / "intfa", "XDG_CACHE_HOME"};
  }
  if (const auto home = env::get("HOME"); home && fs::path(*home).is_absolute()) {
    return Location{fs::path(*home) / ".cache" / "intfa", "HOME"};
  }
  return std::nullopt;
}

std::optional<fs::path> DiskCache::default_directory() {
  if (auto location = default_location()) return std::move(location->directory);
  return std::nullopt;
}

DiskCache::DiskCache(fs::path directory, Access access, std::string named_by)
    : directory_(normalized_directory(std::move(directory))),
      named_by_(std::move(named_by)),
      read_only_(access == Access::kReadOnly),
      disabled_writes_(read_only_) {
  struct stat info {};
  if (::stat(directory_.c_str(), &info) == 0 && (info.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    // Anyone who can write the directory could plant a cubin this process would run.
    refused_ = true;
    disabled_writes_ = true;
    log::warn_once("cache-insecure:" + directory_.string(),
                   "not using the kernel cache " + description() +
                       ": it is group- or world-writable, so others could plant kernels in it; "
                       "kernels are compiled without the disk cache (fix: chmod 700 " +
                       directory_.string() + ")");
  }
}

std::string DiskCache::description() const {
  return directory_.string() + (named_by_.empty() ? "" : " (named by " + named_by_ + ")");
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

std::optional<nvrtc::Cubin> DiskCache::load(const CacheKey& key) {
  if (refused_) return std::nullopt;
  try {
    const fs::path path = entry_path(key);
    const fs::path folder = path.parent_path();
    std::error_code error;
    const fs::file_type folder_type = fs::symlink_status(folder, error).type();
    if (folder_type == fs::file_type::not_found) return std::nullopt;
    if (folder_type != fs::file_type::directory) {
      if (read_only_) {
        log::warn_once("cache-bad-folder:" + folder.string(),
                       "ignoring read-only cache folder " + folder.string() + ": it " +
                           folder_problem(folder_type) + "; compiling instead");
        return std::nullopt;
      }
      const std::error_code removal = remove_path(folder);
      log::warn("ignoring cache folder " + folder.string() + ": it " + folder_problem(folder_type) +
                (removal ? " (could not remove it: " + removal.message() + ")" : "; removed"));
      return std::nullopt;
    }
    EntryCheck check = check_entry(path, key);
    switch (check.outcome) {
      case EntryCheck::Outcome::kGood:
        return std::move(check.cubin);
      case EntryCheck::Outcome::kMissing:
        return std::nullopt;
      case EntryCheck::Outcome::kUnreadable:
        log::warn("cannot read cache entry " + path.string() + ": " + check.problem +
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
        const std::error_code removal = remove_path(path);
        remove_path(sidecar_path(key));
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

void DiskCache::store(const CacheKey& key, const nvrtc::Cubin& cubin,
                      const render::KernelSpec& spec) {
  if (!writable()) return;
  try {
    const std::vector<char> entry = encode_entry(key, cubin);
    const std::string sidecar = sidecar_text(key, cubin, spec);
    const fs::path path = entry_path(key);
    create_private_directories(directory_);
    create_entry_folder(path.parent_path());
    write_file_atomically(path, temp_name(key), entry.data(), entry.size());
    write_file_atomically(sidecar_path(key), temp_name(key), sidecar.data(), sidecar.size());
    sync_directory(path.parent_path());
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
  for (const CacheFile& file : scan(directory_)) {
    if (is_stale_temp(file) && !remove_path(file.path)) removed++;
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
  ClearReport report;
  std::vector<CacheFile> sidecars;
  for (const CacheFile& file : scan(directory_)) {
    bool remove = !stale_only;
    switch (file.kind) {
      case CacheFile::Kind::kEntry:
        remove = remove || !entry_problem(file, directory_).empty();
        break;
      case CacheFile::Kind::kTemp:
        remove = remove || is_stale_temp(file);
        break;
      case CacheFile::Kind::kFolder:
        remove = true;
        break;
      case CacheFile::Kind::kSidecar:
        if (!remove) sidecars.push_back(file);  // orphan or not is known after the entries
        break;
    }
    if (remove) remove_counted(file, report);
  }
  for (const CacheFile& sidecar : sidecars) {
    std::error_code error;
    const fs::path entry = fs::path(sidecar.path).replace_extension(kEntrySuffix);
    if (!sidecar.in_own_folder ||
        fs::symlink_status(entry, error).type() != fs::file_type::regular) {
      remove_counted(sidecar, report);
    }
  }
  for (const fs::path& folder : children(directory_)) {
    const std::string name = folder.filename().string();
    std::error_code error;
    if (name.size() == kFolderHexDigits && is_lower_hex(name) && fs::is_empty(folder, error)) {
      fs::remove(folder, error);  // only empty folders; one holding foreign files stays
    }
  }
  return report;
}

void DiskCache::set_write_failure_for_testing(bool fail) {
  g_fail_writes_for_testing.store(fail);
}

}  // namespace intfa::cache
