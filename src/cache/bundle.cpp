#include "cache/bundle.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <limits>
#include <map>
#include <system_error>

#include "cache/entry_format.hpp"
#include "common/env.hpp"
#include "common/file_io.hpp"
#include "common/file_trust.hpp"
#include "common/json_members.hpp"
#include "common/log.hpp"
#include "common/strings.hpp"
#include "intfa/errors.hpp"
#include "intfa_version.hpp"

namespace intfa::cache {
namespace fs = std::filesystem;
namespace {

// `intfa precompile --configs all` with both dtypes lists about 1,450 kernels of about 700 bytes
// each (1 MiB); a file sixteen times that is not a manifest, and reading it whole is what a bad
// file must not make us do.
constexpr std::uint64_t kMaxManifestBytes = std::uint64_t{16} << 20;
// Same bound as the disk cache's: a cubin is at most tens of MiB.
constexpr std::uint64_t kMaxEntryBytes = std::uint64_t{1} << 30;
constexpr std::size_t kChecksumHexDigits = 16;
// A kernel's description is a flat object of a few dozen members (KernelSource::json); the bound
// keeps a hostile manifest from making the parser's copy of it large.
constexpr std::size_t kMaxSpecMembers = 64;
constexpr std::size_t kMaxSpecTextBytes = 4096;

// --- Reading the manifest's members; each failure names the member's path ---

[[noreturn]] void fail(const json::MemberProblem& problem) {
  throw ManifestError(problem.path + (problem.missing ? ": missing"
                                                      : ": " + problem.expectation + ", got " +
                                                            problem.shown));
}

// The shared member checks (common/json_members.hpp), raising ManifestError.
const json::MemberReader kReader(fail);

const json::Value& member(const json::Value& object, const std::string& where, const char* name) {
  return kReader.member(object, where, name);
}

std::string string_member(const json::Value& object, const std::string& where, const char* name) {
  return kReader.string(object, where, name);
}

std::uint64_t unsigned_member(const json::Value& object, const std::string& where, const char* name,
                              std::uint64_t max_value) {
  return kReader.unsigned_integer(object, where, name, max_value);
}

nvrtc::Version parse_nvrtc_version(const std::string& text, const std::string& where) {
  const std::vector<std::string> parts = strings::split(text, '.');
  const auto major = parts.size() == 2 ? strings::parse_int(parts[0]) : std::nullopt;
  const auto minor = parts.size() == 2 ? strings::parse_int(parts[1]) : std::nullopt;
  constexpr long kMaxField = std::numeric_limits<std::uint16_t>::max();  // as in entry headers
  if (!major || !minor || *major < 0 || *minor < 0 || *major > kMaxField || *minor > kMaxField) {
    throw ManifestError(where + "nvrtc_version: expected \"major.minor\", got \"" + text + "\"");
  }
  return nvrtc::Version{static_cast<int>(*major), static_cast<int>(*minor)};
}

std::optional<std::uint64_t> parse_checksum_hex(const std::string& text) {
  if (text.size() != kChecksumHexDigits) return std::nullopt;
  std::uint64_t value = 0;
  for (char c : text) {
    int digit = -1;
    if (c >= '0' && c <= '9') digit = c - '0';
    if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
    if (digit < 0) return std::nullopt;
    value = value << 4 | static_cast<std::uint64_t>(digit);
  }
  return value;
}

ManifestEntry entry_from_json(const json::Value& value, const std::string& where) {
  if (!value.is_object()) throw ManifestError(where + ": expected an object");
  const std::string prefix = where + ".";
  ManifestEntry entry;
  const std::string key_hex = string_member(value, prefix, "key");
  const auto key = CacheKey::from_hex(key_hex);
  if (!key) throw ManifestError(prefix + "key: expected 32 lowercase hex digits");
  entry.key = *key;
  const json::Value& spec = member(value, prefix, "spec");
  bool flat = spec.is_object() && spec.as_object().size() <= kMaxSpecMembers;
  for (std::size_t i = 0; flat && i < spec.as_object().size(); ++i) {
    const json::Value& field = spec.as_object()[i].second;
    flat = field.is_bool() || field.is_number() || field.is_string() || field.is_null();
  }
  if (!flat) {
    throw ManifestError(prefix + "spec: expected an object of at most " +
                        std::to_string(kMaxSpecMembers) +
                        " members, each a number, string or bool");
  }
  entry.spec = spec;
  // Absent in the manifests of builds before the description's text was written: description()
  // shows the JSON.
  if (value.find("spec_text") != nullptr) {
    entry.spec_text = kReader.string(value, prefix, "spec_text", kMaxSpecTextBytes);
  }
  entry.entry_bytes = unsigned_member(value, prefix, "entry_bytes", kMaxEntryBytes);
  const auto checksum = parse_checksum_hex(string_member(value, prefix, "xxh3_64"));
  if (!checksum) throw ManifestError(prefix + "xxh3_64: expected 16 lowercase hex digits");
  entry.checksum = *checksum;
  return entry;
}

Manifest manifest_from_json(const json::Value& document) {
  if (!document.is_object()) throw ManifestError("manifest: expected a JSON object");
  const std::uint64_t version =
      unsigned_member(document, "", "manifest_version", std::numeric_limits<std::uint32_t>::max());
  if (version != static_cast<std::uint64_t>(kManifestVersion)) {
    throw ManifestError("manifest_version: " + std::to_string(version) + " is not " +
                        std::to_string(kManifestVersion) + ", the version this build reads");
  }
  Manifest manifest;
  manifest.library_version = string_member(document, "", "intfa_version");
  manifest.nvrtc_version = parse_nvrtc_version(string_member(document, "", "nvrtc_version"), "");
  manifest.format_version = static_cast<std::uint32_t>(
      unsigned_member(document, "", "format_version", std::numeric_limits<std::uint32_t>::max()));
  const std::string top_level;  // named, not a temporary: GCC 13 flags a reference returned
                                // from a call with a temporary argument as dangling
  const json::Value& entries = member(document, top_level, "entries");
  if (!entries.is_array()) throw ManifestError("entries: expected an array");
  std::map<CacheKey, std::size_t> seen;
  for (const json::Value& value : entries.as_array()) {
    const std::size_t index = manifest.entries.size();
    const std::string where = "entries[" + std::to_string(index) + "]";
    ManifestEntry entry = entry_from_json(value, where);
    const auto [previous, inserted] = seen.emplace(entry.key, index);
    if (!inserted) {
      throw ManifestError(where + ".key: " + entry.key.hex() + " is listed twice (also entries[" +
                          std::to_string(previous->second) + "])");
    }
    manifest.entries.push_back(std::move(entry));
  }
  return manifest;
}

std::string manifest_temp_name() {
  // O_EXCL keeps two writers apart; the pid and clock only make a clash unlikely.
  const auto ticks = std::chrono::steady_clock::now().time_since_epoch().count();
  return ".tmp-manifest-" + std::to_string(::getpid()) + "-" + std::to_string(ticks);
}

// The problem with the entry file at `path` against `expected`, or "" when it matches.
std::string entry_problem(const fs::path& path, const ManifestEntry& expected,
                          const nvrtc::Version& nvrtc_version) {
  std::error_code error;
  const fs::file_type type = fs::symlink_status(path, error).type();
  if (type == fs::file_type::not_found) return "missing (listed in the manifest)";
  try {
    const std::vector<char> bytes = files::read_regular_file(path, kMaxEntryBytes);
    if (bytes.size() != expected.entry_bytes) {
      return "size " + std::to_string(bytes.size()) + " bytes, the manifest records " +
             std::to_string(expected.entry_bytes);
    }
    const std::uint64_t checksum = entry_file_checksum(bytes);
    if (checksum != expected.checksum) {
      return "checksum " + checksum_hex(checksum) + ", the manifest records " +
             checksum_hex(expected.checksum);
    }
    decode_entry(bytes, expected.key, nvrtc_version);
  } catch (const std::exception& bad) {
    return bad.what();
  }
  return "";
}

}  // namespace

// --- Manifest ---

Manifest Manifest::for_this_build() {
  Manifest manifest;
  manifest.library_version = INTFA_VERSION_STRING;
  manifest.nvrtc_version = nvrtc::version();
  manifest.format_version = kFormatVersion;
  return manifest;
}

const ManifestEntry* Manifest::find(const CacheKey& key) const {
  for (const ManifestEntry& entry : entries) {
    if (entry.key == key) return &entry;
  }
  return nullptr;
}

json::Value Manifest::to_json() const {
  json::Value document = json::Value::object();
  document.set("manifest_version", kManifestVersion);
  document.set("intfa_version", library_version);
  document.set("nvrtc_version", nvrtc_version.to_string());
  document.set("format_version", format_version);
  json::Value list = json::Value::array();
  for (const ManifestEntry& entry : entries) {
    json::Value item = json::Value::object();
    item.set("key", entry.key.hex());
    item.set("spec", entry.spec);
    item.set("spec_text", entry.spec_text);
    item.set("entry_bytes", static_cast<unsigned long long>(entry.entry_bytes));
    item.set("xxh3_64", checksum_hex(entry.checksum));
    list.push_back(std::move(item));
  }
  document.set("entries", std::move(list));
  return document;
}

Manifest Manifest::from_json(const json::Value& document) {
  try {
    return manifest_from_json(document);
  } catch (const ManifestError&) {
    throw;
  } catch (const std::exception& error) {
    throw ManifestError(std::string("manifest: ") + error.what());
  }
}

Manifest Manifest::parse(std::string_view text) {
  json::Value document;
  try {
    document = json::parse(text);
  } catch (const std::exception& error) {
    throw ManifestError(std::string("not valid JSON: ") + error.what());
  }
  return from_json(document);
}

bool operator==(const Manifest& a, const Manifest& b) {
  return a.library_version == b.library_version && a.nvrtc_version == b.nvrtc_version &&
         a.format_version == b.format_version && a.entries == b.entries;
}

std::string packaged_incompatibility(const Manifest& manifest) {
  if (manifest.format_version != kFormatVersion) return incompatibility(manifest);
  const nvrtc::Version running = nvrtc::version();
  if (manifest.nvrtc_version.major != running.major ||
      manifest.nvrtc_version.minor > running.minor) {
    return "it was compiled by NVRTC " + manifest.nvrtc_version.to_string() +
           ", this process runs NVRTC " + running.to_string() + " (one of " +
           std::to_string(running.major) + ".0 to " + running.to_string() + " is used)";
  }
  return "";
}

std::string incompatibility(const Manifest& manifest) {
  if (manifest.format_version != kFormatVersion) {
    return "its entries are in cache format " + std::to_string(manifest.format_version) +
           ", this build reads format " + std::to_string(kFormatVersion);
  }
  const nvrtc::Version running = nvrtc::version();
  if (manifest.nvrtc_version != running) {
    return "it was compiled by NVRTC " + manifest.nvrtc_version.to_string() +
           ", this process runs NVRTC " + running.to_string();
  }
  return "";
}

// --- Files ---

fs::path manifest_path(const fs::path& bundle) {
  return bundle / kManifestFileName;
}

bool holds_manifest(const fs::path& directory) {
  std::error_code error;
  const fs::file_type type = fs::symlink_status(manifest_path(directory), error).type();
  return type != fs::file_type::not_found && type != fs::file_type::none;
}

Manifest read_manifest(const fs::path& bundle) {
  const fs::path path = manifest_path(bundle);
  if (!holds_manifest(bundle)) throw ManifestError("there is no " + path.string());
  std::vector<char> bytes;
  try {
    bytes = files::read_regular_file(path, kMaxManifestBytes);
  } catch (const std::exception& error) {
    throw ManifestError("cannot read " + path.string() + ": " + error.what());
  }
  try {
    return Manifest::parse(std::string_view(bytes.data(), bytes.size()));
  } catch (const ManifestError& error) {
    throw ManifestError(path.string() + ": " + error.what());
  }
}

void write_manifest(const fs::path& bundle, const Manifest& manifest) {
  const std::string text = manifest.to_json().dump(2) + "\n";
  try {
    files::write_file_atomically(manifest_path(bundle), manifest_temp_name(), text.data(),
                                 text.size());
  } catch (const std::exception& error) {
    throw CacheError(std::string("cannot write the bundle manifest: ") + error.what());
  }
}

BundleLock::BundleLock(const fs::path& bundle, const std::function<void()>& waiting) {
  const fs::path path = bundle / kBundleLockFileName;
  try {
    files::create_private_directories(bundle);
  } catch (const std::exception& error) {
    throw CacheError("cannot create the bundle " + bundle.string() + ": " + error.what());
  }
  descriptor_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (descriptor_ < 0) {
    throw CacheError("cannot open " + path.string() + ": " + std::strerror(errno));
  }
  int error = ::flock(descriptor_, LOCK_EX | LOCK_NB) == 0 ? 0 : errno;
  if (error == EWOULDBLOCK) {
    if (waiting) waiting();
    do {
      error = ::flock(descriptor_, LOCK_EX) == 0 ? 0 : errno;
    } while (error == EINTR);
  }
  if (error != 0) {
    ::close(descriptor_);
    throw CacheError("cannot lock " + path.string() + ": " + std::strerror(error));
  }
}

BundleLock::~BundleLock() {
  if (descriptor_ >= 0) ::close(descriptor_);  // releases the lock
}

bool is_bundle_directory(const fs::path& directory) {
  std::error_code error;
  if (fs::symlink_status(directory / kBundleLockFileName, error).type() == fs::file_type::regular) {
    return true;
  }
  try {
    read_manifest(directory);  // a manifest of intfa's, of any NVRTC or format version
    return true;
  } catch (const ManifestError&) {
    return false;  // none, or a user's own file of that name
  }
}

Manifest merged_manifest(const fs::path& bundle, const Manifest& earlier, Manifest run) {
  if (!incompatibility(earlier).empty()) return run;
  const DiskCache disk(bundle, DiskCache::Access::kReadOnly);
  std::vector<ManifestEntry> kept;
  for (const ManifestEntry& entry : earlier.entries) {
    if (run.find(entry.key) == nullptr &&
        entry_problem(disk.entry_path(entry.key), entry, earlier.nvrtc_version).empty()) {
      kept.push_back(entry);
    }
  }
  run.entries.insert(run.entries.begin(), kept.begin(), kept.end());
  return run;
}

ManifestEntry describe_entry(const fs::path& bundle, const CacheKey& key,
                             const render::KernelSource& source) {
  const fs::path path = DiskCache(bundle, DiskCache::Access::kReadOnly).entry_path(key);
  try {
    const std::vector<char> bytes = files::read_regular_file(path, kMaxEntryBytes);
    decode_entry(bytes, key);
    return ManifestEntry{source.json, source.text, key, bytes.size(), entry_file_checksum(bytes)};
  } catch (const std::exception& error) {
    throw CacheError("bundle entry " + path.string() + " of " + source.text + ": " + error.what());
  }
}

VerifyReport verify_bundle(const fs::path& bundle, const Manifest& manifest) {
  const DiskCache disk(bundle, DiskCache::Access::kReadOnly);
  VerifyReport report;
  std::set<fs::path> listed;
  for (const ManifestEntry& entry : manifest.entries) {
    report.checked++;
    const fs::path path = disk.entry_path(entry.key);
    listed.insert(path);
    const std::string problem = entry_problem(path, entry, manifest.nvrtc_version);
    if (!problem.empty()) report.bad.emplace_back(path, problem + " [" + entry.description() + "]");
  }
  for (const EntryInfo& info : disk.list()) {
    if (listed.count(info.path) == 0)
      report.bad.emplace_back(info.path, "not listed in the manifest");
  }
  // Misplaced entries, foreign folders and stale temp files, as in any cache directory. Listed
  // entries were checked above, against the NVRTC version the manifest records.
  std::set<fs::path> reported;
  for (const auto& bad : report.bad) reported.insert(bad.first);
  for (auto& [path, problem] : disk.verify().bad) {
    if (listed.count(path) == 0 && reported.count(path) == 0) {
      report.bad.emplace_back(path, std::move(problem));
    }
  }
  return report;
}

// --- The runtime's read-only layer ---

std::optional<fs::path> DeploymentBundle::directory_from_environment() {
  if (env::flag("INTFA_CACHE_DISABLE")) return std::nullopt;
  const auto directory = env::get("INTFA_DEPLOY_CACHE");
  if (!directory) return std::nullopt;
  if (!fs::path(*directory).is_absolute()) {
    throw InvalidArgument("INTFA_DEPLOY_CACHE", "'" + *directory + "'",
                          "expected an absolute path");
  }
  return fs::path(*directory);
}

namespace {

// Why the runtime must not read kernels from the bundle at `directory` (see
// files::check_directory), or "". Its manifest names the keys it serves, so it must be as
// trustworthy as the directory.
std::string untrusted_bundle_problem(const fs::path& directory) {
  const files::DirectoryCheck check = files::check_directory(directory);
  if (check.verdict == files::DirectoryCheck::Verdict::kUntrusted ||
      check.verdict == files::DirectoryCheck::Verdict::kUnreadable) {
    if (check.owned_by_another_user) {
      return check.problem + " (install it as root or as this user)";
    }
    if (check.problem.find("writable") != std::string::npos) {
      // Shared read-only: taking away the others' write permission keeps it readable.
      return check.problem + " (fix: chmod go-w " + directory.string() + ")";
    }
    return check.problem;
  }
  struct stat manifest {};
  if (::lstat(manifest_path(directory).c_str(), &manifest) == 0 &&
      !files::trusted_owner(manifest.st_uid)) {
    return "its manifest belongs to uid " + std::to_string(manifest.st_uid) +
           ", not to this user (uid " + std::to_string(::geteuid()) + ") or root";
  }
  return "";
}

}  // namespace

std::unique_ptr<DeploymentBundle> DeploymentBundle::open(const fs::path& directory, Kind kind) {
  std::string problem = untrusted_bundle_problem(directory);
  if (problem.empty()) {
    try {
      const Manifest manifest = read_manifest(directory);
      problem =
          kind == Kind::kPackaged ? packaged_incompatibility(manifest) : incompatibility(manifest);
      if (problem.empty()) {
        log::info("using the deployment bundle " + directory.string() + " (" +
                  std::to_string(manifest.entries.size()) + " kernels)");
        return std::unique_ptr<DeploymentBundle>(new DeploymentBundle(directory, manifest));
      }
    } catch (const ManifestError& error) {
      problem = error.what();
    }
  }
  const std::string why = "ignoring the deployment bundle " + directory.string() + ": " + problem;
  if (kind == Kind::kPackaged) {
    log::info(why + "; kernels are compiled or taken from the user cache instead");
  } else {
    log::warn_once("deploy-bundle:" + directory.string(),
                   why +
                       "; kernels are compiled or taken from the user cache instead (rebuild "
                       "it with intfa precompile)");
  }
  return nullptr;
}

DeploymentBundle::DeploymentBundle(const fs::path& directory, const Manifest& manifest)
    : entries_(directory, DiskCache::Access::kReadOnly), nvrtc_version_(manifest.nvrtc_version) {
  for (const ManifestEntry& entry : manifest.entries) {
    recorded_.emplace(entry.key,
                      RecordedFile{entry.entry_bytes, entry.checksum, manifest.nvrtc_version});
  }
}

std::optional<nvrtc::Cubin> DeploymentBundle::load(const CacheKey& key) {
  const auto recorded = recorded_.find(key);
  if (recorded == recorded_.end()) return std::nullopt;
  std::optional<nvrtc::Cubin> cubin = entries_.load(key, &recorded->second);
  std::error_code error;
  if (!cubin &&
      fs::symlink_status(entries_.entry_path(key), error).type() == fs::file_type::not_found) {
    // A bad file is warned about by the load; a missing one only here, once per bundle.
    log::warn_once("deploy-bundle-missing:" + directory().string(),
                   "the deployment bundle " + directory().string() + " lacks kernels its " +
                       "manifest lists (first: " + entries_.entry_path(key).string() +
                       "); they are compiled instead (rebuild it with intfa precompile)");
  }
  return cubin;
}

}  // namespace intfa::cache
