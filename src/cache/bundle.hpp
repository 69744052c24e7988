// Deployment bundles: a cache directory written ahead of time by `intfa precompile`, described by a
// manifest.json, and read by the runtime as a read-only layer under the user cache (see
// cache/README.md, "Deployment bundles"). The manifest parser never trusts its input: it is fuzzed.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "cache/cache_key.hpp"
#include "cache/disk_cache.hpp"
#include "common/json.hpp"
#include "nvrtc/compiler.hpp"
#include "render/kernel_source.hpp"

namespace intfa::cache {

constexpr const char* kManifestFileName = "manifest.json";
// Bumped when the manifest's members change meaning; a manifest of another version is refused.
constexpr int kManifestVersion = 1;

// Why a manifest cannot be read or used: missing, unreadable, not JSON, a member missing or of the
// wrong type. The message names the member ("entries[3].key: ...").
class ManifestError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ManifestEntry {
  // The kernel's description as its family wrote it (render::KernelSource's json and text): read
  // by people and by tools above the JIT core, never by the runtime, which goes by the key.
  json::Value spec;
  std::string spec_text;  // "" in the manifests of builds before it was written
  CacheKey key;
  std::uint64_t entry_bytes = 0;  // size of the entry file
  std::uint64_t checksum = 0;     // XXH3-64 (seed 0) of the whole entry file

  // spec_text, else the spec's JSON.
  std::string description() const { return spec_text.empty() ? spec.dump() : spec_text; }

  friend bool operator==(const ManifestEntry& a, const ManifestEntry& b) {
    return a.spec == b.spec && a.spec_text == b.spec_text && a.key == b.key &&
           a.entry_bytes == b.entry_bytes && a.checksum == b.checksum;
  }
};

struct Manifest {
  std::string library_version;  // informational: the key already covers every template byte
  nvrtc::Version nvrtc_version;
  std::uint32_t format_version = kFormatVersion;
  std::vector<ManifestEntry> entries;

  // An empty manifest stamped with this build's library, NVRTC and cache-format versions.
  static Manifest for_this_build();

  const ManifestEntry* find(const CacheKey& key) const;
  json::Value to_json() const;
  // Throws ManifestError (and nothing else) whatever `document` or `text` holds.
  static Manifest from_json(const json::Value& document);
  static Manifest parse(std::string_view text);

  friend bool operator==(const Manifest& a, const Manifest& b);
};

// Why this build must not load entries listed by `manifest`: another NVRTC or cache-format version
// compiled them. "" when it may.
std::string incompatibility(const Manifest& manifest);
// The same for the kernels a package ships (DeploymentBundle::Kind::kPackaged): "" also for an
// NVRTC of this one's major version and an older minor one.
std::string packaged_incompatibility(const Manifest& manifest);

std::filesystem::path manifest_path(const std::filesystem::path& bundle);
// Whether `directory` holds something named manifest.json, i.e. claims to be a bundle.
bool holds_manifest(const std::filesystem::path& directory);
// Throws ManifestError when the manifest is missing, unreadable, too large or invalid.
Manifest read_manifest(const std::filesystem::path& bundle);
// Writes manifest.json atomically (temp file, fsync, rename). Throws CacheError.
void write_manifest(const std::filesystem::path& bundle, const Manifest& manifest);

// A run of `intfa precompile` holds this lock on its bundle for as long as it writes there, so that
// two runs into one bundle take turns: each adds its kernels to the manifest the other wrote
// (merged_manifest) instead of replacing it. The lock file also marks the directory as a bundle
// precompile wrote, before its first manifest exists.
constexpr const char* kBundleLockFileName = ".intfa-precompile.lock";

class BundleLock {
 public:
  // Creates `bundle` (0700) when missing and takes the lock, calling `waiting` once first when
  // another process holds it. Throws CacheError when the lock file cannot be made or locked.
  BundleLock(const std::filesystem::path& bundle, const std::function<void()>& waiting);
  ~BundleLock();
  BundleLock(const BundleLock&) = delete;
  BundleLock& operator=(const BundleLock&) = delete;

 private:
  int descriptor_ = -1;
};

// Whether `directory` is a bundle: it holds a lock file of precompile's (also a first run that
// failed before its manifest), or a manifest.json that read_manifest reads (of any NVRTC or
// format version). A directory of anything else, a user's own manifest.json included, is not
// precompile's to write nor `cache clear`'s to empty.
bool is_bundle_directory(const std::filesystem::path& directory);

// The manifest a run that compiled `run`'s entries leaves: the entries of `earlier` (the bundle's
// manifest before the run) that `run` does not list and whose files still have the recorded size
// and checksum, then `run`'s. A kernel an earlier run listed is never dropped while its file is
// intact. `earlier` of another NVRTC or cache-format version contributes nothing: its keys are
// not this build's.
Manifest merged_manifest(const std::filesystem::path& bundle, const Manifest& earlier,
                         Manifest run);

// The manifest entry for the entry file of `key` (compiled from `source`) in `bundle` as it is on
// disk now, after checking that it decodes. Throws CacheError saying what is wrong.
ManifestEntry describe_entry(const std::filesystem::path& bundle, const CacheKey& key,
                             const render::KernelSource& source);

// Every manifest entry exists, is a regular file with the recorded size and checksum, and decodes
// (against the NVRTC version the manifest records, so a bundle can be checked on any machine);
// entry files the manifest does not list and anything `DiskCache::verify` objects to are reported
// too. Reads only.
VerifyReport verify_bundle(const std::filesystem::path& bundle, const Manifest& manifest);

// A deployment bundle opened for the runtime: a read-only DiskCache that serves only the keys its
// manifest lists.
class DeploymentBundle {
 public:
  // $INTFA_DEPLOY_CACHE, or nullopt when unset or when INTFA_CACHE_DISABLE=1. Throws
  // InvalidArgument naming INTFA_DEPLOY_CACHE when it is a relative path.
  static std::optional<std::filesystem::path> directory_from_environment();

  // The bundle at `directory`, or nullptr after one warning (per directory and process) when its
  // manifest is missing, invalid, or made by another NVRTC or cache-format version, or when the
  // directory or its manifest is not trusted (files::check_directory: another user's but root's, or
  // writable by others): such a bundle is never read. kPackaged, the kernels a package ships: an
  // older NVRTC of the same major version is fine too (its kernels are looked up under its own
  // keys: key_for), and one not used is said under INTFA_LOG=1 only (a wheel run with another
  // NVRTC simply compiles).
  enum class Kind { kDeployment, kPackaged };
  static std::unique_ptr<DeploymentBundle> open(const std::filesystem::path& directory,
                                                Kind kind = Kind::kDeployment);

  // The NVRTC that compiled its kernels (its manifest's): their keys hold it (cache::make_key).
  const nvrtc::Version& nvrtc_version() const { return nvrtc_version_; }

  // The verified cubin, or nullopt: the key is not in the manifest, the file is missing, or it is
  // bad or not the file the manifest records (size and checksum; warned about once, left in
  // place).
  std::optional<nvrtc::Cubin> load(const CacheKey& key);

  const std::filesystem::path& directory() const { return entries_.directory(); }
  std::size_t size() const { return recorded_.size(); }

 private:
  DeploymentBundle(const std::filesystem::path& directory, const Manifest& manifest);

  DiskCache entries_;
  std::map<CacheKey, RecordedFile> recorded_;
  nvrtc::Version nvrtc_version_;
};

}  // namespace intfa::cache
