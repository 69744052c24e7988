// Deployment bundles: the manifest (round trip, errors that name the member, garbage that never
// crashes the parser), checking a bundle against its manifest, the read-only DiskCache, and the
// runtime's layering: memory, then the bundle, then the user cache, then NVRTC.
#include "cache/bundle.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "cache/cache_test_support.hpp"
#include "cache/entry_format.hpp"
#include "common/json.hpp"
#include "common/log.hpp"
#include "intfa/errors.hpp"
#include "launch/kernel_runtime.hpp"
#include "support/timing.hpp"

namespace intfa::cache {
namespace {

using namespace intfa::testing;

ManifestEntry fake_entry(unsigned char first, int head_dim) {
  const quantize::QuantizeSpec spec = quantize_rows_spec(head_dim);
  return ManifestEntry{spec.to_json(), spec.to_string(), test_key(first), 1234,
                       0x0123456789abcdefULL};
}

Manifest two_entry_manifest() {
  Manifest manifest = Manifest::for_this_build();
  manifest.entries = {fake_entry(0x10, 64), fake_entry(0x20, 128)};
  return manifest;
}

// The manifest's JSON with one member replaced (or removed, for a null `value`) by `edit`.
std::string edited_manifest(const std::function<void(json::Value&)>& edit) {
  json::Value document = two_entry_manifest().to_json();
  edit(document);
  return document.dump(2);
}

json::Value without(const json::Value& object, const std::string& name) {
  json::Value copy = json::Value::object();
  for (const auto& [key, value] : object.as_object()) {
    if (key != name) copy.set(key, value);
  }
  return copy;
}

// The ManifestError message of parsing `text`, or "" when it parses.
std::string parse_error(const std::string& text) {
  try {
    Manifest::parse(text);
  } catch (const ManifestError& error) {
    return error.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// --- The manifest ---

TEST(Manifest, RoundTripsThroughJson) {
  const Manifest manifest = two_entry_manifest();
  EXPECT_EQ(Manifest::parse(manifest.to_json().dump(2)), manifest);
  EXPECT_EQ(Manifest::parse(manifest.to_json().dump(-1)), manifest);
}

TEST(Manifest, RecordsThisBuildsVersions) {
  const Manifest manifest = Manifest::for_this_build();
  EXPECT_EQ(manifest.format_version, kFormatVersion);
  EXPECT_EQ(manifest.nvrtc_version.to_string(), nvrtc::version().to_string());
  EXPECT_FALSE(manifest.library_version.empty());
  EXPECT_EQ(incompatibility(manifest), "");
}

TEST(Manifest, WritesTheDocumentedMembers) {
  const json::Value document = json::parse(two_entry_manifest().to_json().dump(2));
  for (const char* name :
       {"manifest_version", "intfa_version", "nvrtc_version", "format_version", "entries"}) {
    EXPECT_NE(document.find(name), nullptr) << name;
  }
  const json::Value& entry = document.at("entries").as_array().at(0);
  EXPECT_EQ(entry.at("key").as_string(), test_key(0x10).hex());
  EXPECT_EQ(entry.at("spec"), quantize_rows_spec(64).to_json());
  EXPECT_EQ(entry.at("spec_text").as_string(), quantize_rows_spec(64).to_string());
  EXPECT_EQ(entry.at("entry_bytes").as_int(), 1234);
  EXPECT_EQ(entry.at("xxh3_64").as_string(), "0123456789abcdef");
}

TEST(Manifest, AMissingMemberIsAnErrorNamingIt) {
  for (const char* name :
       {"manifest_version", "intfa_version", "nvrtc_version", "format_version", "entries"}) {
    const std::string error = parse_error(
        edited_manifest([&](json::Value& document) { document = without(document, name); }));
    EXPECT_TRUE(contains(error, name) && contains(error, "missing")) << name << ": " << error;
  }
  for (const char* name : {"key", "spec", "entry_bytes", "xxh3_64"}) {
    const std::string error = parse_error(edited_manifest([&](json::Value& document) {
      json::Value entries = document.at("entries");
      entries.as_array()[1] = without(entries.as_array()[1], name);
      document.set("entries", entries);
    }));
    EXPECT_TRUE(contains(error, std::string("entries[1].") + name)) << name << ": " << error;
  }
}

TEST(Manifest, AWrongTypedMemberIsAnErrorNamingIt) {
  struct Case {
    const char* member;  // as the error names it
    std::function<void(json::Value&)> edit;
  };
  auto entry_member = [](const char* name, json::Value value) {
    return [name, value](json::Value& document) {
      json::Value entries = document.at("entries");
      entries.as_array()[0].set(name, value);
      document.set("entries", entries);
    };
  };
  const std::vector<Case> cases = {
      {"nvrtc_version", [](json::Value& d) { d.set("nvrtc_version", 13); }},
      {"nvrtc_version", [](json::Value& d) { d.set("nvrtc_version", "13"); }},
      {"nvrtc_version", [](json::Value& d) { d.set("nvrtc_version", "13.x"); }},
      {"format_version", [](json::Value& d) { d.set("format_version", "1"); }},
      {"format_version", [](json::Value& d) { d.set("format_version", -1); }},
      {"manifest_version", [](json::Value& d) { d.set("manifest_version", 1.5); }},
      {"intfa_version", [](json::Value& d) { d.set("intfa_version", nullptr); }},
      {"entries", [](json::Value& d) { d.set("entries", json::Value::object()); }},
      {"entries[0]", [](json::Value& d) { d.set("entries", json::Value::Array{7}); }},
      {"entries[0].key", entry_member("key", "not hex")},
      {"entries[0].key", entry_member("key", 5)},
      {"entries[0].spec", entry_member("spec", 5)},
      {"entries[0].spec", entry_member("spec", json::Value::Array{7})},
      {"entries[0].spec_text", entry_member("spec_text", 5)},
      {"entries[0].entry_bytes", entry_member("entry_bytes", "1234")},
      {"entries[0].entry_bytes", entry_member("entry_bytes", -5)},
      {"entries[0].entry_bytes", entry_member("entry_bytes", 1e300)},
      {"entries[0].entry_bytes", entry_member("entry_bytes", 12.5)},
      {"entries[0].xxh3_64", entry_member("xxh3_64", "0123")},
      {"entries[0].xxh3_64", entry_member("xxh3_64", "0123456789ABCDEF")},
      {"entries[0].xxh3_64", entry_member("xxh3_64", 12)},
  };
  for (const Case& bad : cases) {
    const std::string error = parse_error(edited_manifest(bad.edit));
    EXPECT_TRUE(contains(error, bad.member)) << bad.member << ": '" << error << "'";
  }
}

TEST(Manifest, AKeyListedTwiceIsAnError) {
  Manifest manifest = two_entry_manifest();
  manifest.entries[1].key = manifest.entries[0].key;
  const std::string error = parse_error(manifest.to_json().dump(2));
  EXPECT_TRUE(contains(error, "listed twice")) << error;
}

TEST(Manifest, AnotherManifestVersionIsRefused) {
  const std::string error =
      parse_error(edited_manifest([](json::Value& d) { d.set("manifest_version", 2); }));
  EXPECT_TRUE(contains(error, "manifest_version")) << error;
}

TEST(Manifest, NotJsonIsAnError) {
  EXPECT_TRUE(contains(parse_error("{\"manifest_version\": 1,"), "not valid JSON"));
  EXPECT_TRUE(contains(parse_error(""), "not valid JSON"));
  EXPECT_TRUE(contains(parse_error("[1, 2]"), "expected a JSON object"));
}

// Whatever the bytes, parse either succeeds or throws ManifestError: no other exception, no crash
// (the sanitizer build turns an out-of-bounds read into one).
TEST(Manifest, RandomGarbageNeverCrashesTheParser) {
  std::mt19937_64 random(20240611);
  const std::string valid = two_entry_manifest().to_json().dump(2);
  auto parse_survives = [](const std::string& text) {
    try {
      Manifest::parse(text);
    } catch (const ManifestError&) {
    } catch (const std::exception& other) {
      ADD_FAILURE() << "threw " << other.what() << " for: " << text.substr(0, 200);
    }
  };
  for (int round = 0; round < 3000; ++round) {
    std::string text = valid;
    const int edits = 1 + static_cast<int>(random() % 8);
    for (int edit = 0; edit < edits && !text.empty(); ++edit) {
      const std::size_t at = random() % text.size();
      switch (random() % 4) {
        case 0:
          text[at] = static_cast<char>(random());
          break;
        case 1:
          text.erase(at, 1 + random() % 16);
          break;
        case 2:
          text.insert(at, 1, "{}[]\",:0-e.9tfn\\"[random() % 16]);
          break;
        case 3:
          text.resize(at);
          break;
      }
    }
    parse_survives(text);
  }
  for (int round = 0; round < 2000; ++round) {
    std::string bytes(random() % 256, '\0');
    for (char& byte : bytes) byte = static_cast<char>(random());
    parse_survives(bytes);
  }
}

// A 2 MiB manifest once cost 75 s of CPU: one of 1 MiB, a spec of 55,200 members, is refused
// within the parser's budget.
TEST(Manifest, AMebibyteManifestIsReadWithinTheBudget) {
  const std::string text = edited_manifest([](json::Value& document) {
    json::Value entries = document.at("entries");
    entries.as_array().at(0).set("spec", json::parse(wide_json_object(55200)));
    document.set("entries", entries);
  });
  ASSERT_GE(text.size(), std::size_t{1} << 20);
  const double ms = least_ms([&] { EXPECT_TRUE(contains(parse_error(text), "spec")); });
  EXPECT_LT(ms, 50 * kSanitizerSlowdown);
}

TEST(Manifest, AnotherNvrtcOrFormatVersionIsIncompatible) {
  Manifest other_nvrtc = Manifest::for_this_build();
  other_nvrtc.nvrtc_version.major += 1;
  EXPECT_TRUE(contains(incompatibility(other_nvrtc), "NVRTC")) << incompatibility(other_nvrtc);
  Manifest other_format = Manifest::for_this_build();
  other_format.format_version += 1;
  EXPECT_TRUE(contains(incompatibility(other_format), "format")) << incompatibility(other_format);
}

TEST(ManifestFile, IsWrittenAtomicallyAndReadBack) {
  const TempDirectory bundle;
  write_manifest(bundle.path(), two_entry_manifest());
  EXPECT_TRUE(holds_manifest(bundle.path()));
  EXPECT_EQ(read_manifest(bundle.path()), two_entry_manifest());
  EXPECT_TRUE(files_named(bundle.path(), ".tmp").empty()) << "no temp file left behind";
}

TEST(ManifestFile, AMissingOrUnreadableManifestIsAManifestError) {
  const TempDirectory bundle;
  EXPECT_FALSE(holds_manifest(bundle.path()));
  EXPECT_THROW(read_manifest(bundle.path()), ManifestError);
  fs::create_directory(manifest_path(bundle.path()));
  EXPECT_THROW(read_manifest(bundle.path()), ManifestError);
}

// A manifest of every kernel precompile makes is about 1 MiB; one over 16 MiB is refused unread.
TEST(ManifestFile, AFileOverSixteenMebibytesIsRefusedUnread) {
  const TempDirectory bundle;
  std::string text = two_entry_manifest().to_json().dump(2);
  text.append((std::size_t{16} << 20) + 1 - text.size(), ' ');
  write_text(manifest_path(bundle.path()), text);
  try {
    read_manifest(bundle.path());
    FAIL() << "accepted";
  } catch (const ManifestError& error) {
    EXPECT_TRUE(contains(error.what(), "larger than")) << error.what();
  }
}

// --- A bundle against its manifest ---

class BundleOnDisk : public ::testing::Test {
 protected:
  void SetUp() override {
    DiskCache writer(bundle_.path());
    manifest_ = Manifest::for_this_build();
    for (unsigned char first : {0x31, 0x42, 0x53}) {
      const quantize::QuantizeSpec spec = quantize_rows_spec(64 << (first % 3));
      writer.store(test_key(first), fake_cubin(80, 300 + first), families::kernel_source(spec));
      manifest_.entries.push_back(
          describe_entry(bundle_.path(), test_key(first), families::kernel_source(spec)));
    }
  }
  fs::path entry(unsigned char first) const {
    return DiskCache(bundle_.path()).entry_path(test_key(first));
  }
  std::vector<std::string> bad_paths() const {
    std::vector<std::string> paths;
    for (const auto& bad : verify_bundle(bundle_.path(), manifest_).bad) {
      paths.push_back(bad.first.string());
    }
    return paths;
  }

  TempDirectory bundle_;
  Manifest manifest_;
};

TEST_F(BundleOnDisk, DescribeEntryRecordsTheFilesSizeAndChecksum) {
  const std::vector<char> bytes = read_bytes(entry(0x31));
  EXPECT_EQ(manifest_.entries[0].entry_bytes, bytes.size());
  EXPECT_EQ(manifest_.entries[0].checksum, entry_file_checksum(bytes));
  EXPECT_EQ(checksum_hex(0xabcULL), "0000000000000abc");
}

TEST_F(BundleOnDisk, VerifiesWhenEveryEntryMatches) {
  const VerifyReport report = verify_bundle(bundle_.path(), manifest_);
  EXPECT_EQ(report.checked, 3u);
  EXPECT_TRUE(report.ok()) << report.bad.front().second;
}

TEST_F(BundleOnDisk, AFlippedByteIsNamed) {
  std::vector<char> bytes = read_bytes(entry(0x42));
  bytes[bytes.size() - 3] = static_cast<char>(bytes[bytes.size() - 3] ^ 0x04);
  write_bytes(entry(0x42), bytes);
  EXPECT_EQ(bad_paths(), std::vector<std::string>{entry(0x42).string()});
}

TEST_F(BundleOnDisk, AMissingEntryIsNamed) {
  fs::remove(entry(0x53));
  const VerifyReport report = verify_bundle(bundle_.path(), manifest_);
  ASSERT_EQ(report.bad.size(), 1u);
  EXPECT_EQ(report.bad[0].first, entry(0x53));
  EXPECT_TRUE(contains(report.bad[0].second, "missing")) << report.bad[0].second;
}

TEST_F(BundleOnDisk, ASizeTheManifestDoesNotRecordIsNamed) {
  manifest_.entries[0].entry_bytes += 1;
  EXPECT_EQ(bad_paths(), std::vector<std::string>{entry(0x31).string()});
}

TEST_F(BundleOnDisk, AChecksumTheManifestDoesNotRecordIsNamed) {
  manifest_.entries[2].checksum ^= 1;
  EXPECT_EQ(bad_paths(), std::vector<std::string>{entry(0x53).string()});
}

TEST_F(BundleOnDisk, AnEntryTheManifestDoesNotListIsNamed) {
  DiskCache(bundle_.path())
      .store(test_key(0x64), fake_cubin(80, 500), families::kernel_source(quantize_rows_spec(256)));
  const VerifyReport report = verify_bundle(bundle_.path(), manifest_);
  ASSERT_EQ(report.bad.size(), 1u);
  EXPECT_EQ(report.bad[0].first, entry(0x64));
  EXPECT_TRUE(contains(report.bad[0].second, "not listed")) << report.bad[0].second;
}

// --- The read-only DiskCache ---

TEST(ReadOnlyDiskCache, LeavesABadEntryInPlaceAndWarnsOnce) {
  const TempDirectory directory;
  DiskCache(directory.path())
      .store(test_key(0x70), fake_cubin(), families::kernel_source(quantize_rows_spec()));
  const fs::path path = DiskCache(directory.path()).entry_path(test_key(0x70));
  std::vector<char> bytes = read_bytes(path);
  bytes.back() = static_cast<char>(bytes.back() ^ 0x01);
  write_bytes(path, bytes);

  log::ScopedCapture capture;
  DiskCache read_only(directory.path(), DiskCache::Access::kReadOnly);
  EXPECT_FALSE(read_only.load(test_key(0x70)));
  EXPECT_FALSE(read_only.load(test_key(0x70)));
  EXPECT_EQ(read_bytes(path), bytes) << "a read-only cache removes nothing";
  ASSERT_EQ(capture.warnings().size(), 1u);
  EXPECT_TRUE(contains(capture.warnings()[0], path.string())) << capture.warnings()[0];
}

TEST(ReadOnlyDiskCache, StoresNothingAndRefusesToClear) {
  const TempDirectory directory;
  DiskCache read_only(directory.path() / "bundle", DiskCache::Access::kReadOnly);
  EXPECT_FALSE(read_only.writable());
  read_only.store(test_key(0x71), fake_cubin(), families::kernel_source(quantize_rows_spec()));
  EXPECT_FALSE(fs::exists(directory.path() / "bundle"));
  EXPECT_THROW(read_only.clear(false), CacheError);
}

// --- The runtime's layers ---

// Points the runtime at a bundle (INTFA_DEPLOY_CACHE) and an empty user cache until the end of the
// scope, then restores the environment before the runtime re-reads it.
class RuntimeLayers {
 public:
  RuntimeLayers(const std::optional<std::string>& bundle, const fs::path& user_cache) {
    deploy_.emplace("INTFA_DEPLOY_CACHE", bundle);
    user_.emplace("INTFA_CACHE_DIR", user_cache.string());
    disable_.emplace("INTFA_CACHE_DISABLE", std::nullopt);
    launch::KernelRuntime::instance().reset_for_testing();
  }
  ~RuntimeLayers() {
    disable_.reset();
    user_.reset();
    deploy_.reset();
    try {
      launch::KernelRuntime::instance().reset_for_testing();
    } catch (const std::exception&) {
      // The outer environment is malformed; the runtime keeps the test's (deleted) directories.
    }
  }
  RuntimeLayers(const RuntimeLayers&) = delete;
  RuntimeLayers& operator=(const RuntimeLayers&) = delete;

 private:
  std::optional<ScopedEnv> deploy_;
  std::optional<ScopedEnv> user_;
  std::optional<ScopedEnv> disable_;
};

// A bundle holding one real kernel, written as intfa precompile writes one.
class RuntimeWithBundle : public ::testing::Test {
 protected:
  void SetUp() override {
    DiskCache writer(bundle_.path());
    bundled_key_ = launch::compile(bundled_, launch::CacheChain{nullptr, &writer}).key;
    Manifest manifest = Manifest::for_this_build();
    manifest.entries.push_back(
        describe_entry(bundle_.path(), bundled_key_, families::kernel_source(bundled_)));
    write_manifest(bundle_.path(), manifest);
  }
  void rewrite_manifest(const std::function<void(Manifest&)>& edit) {
    Manifest manifest = read_manifest(bundle_.path());
    edit(manifest);
    write_manifest(bundle_.path(), manifest);
  }
  // NVRTC compiles that compile(spec) ran.
  static std::uint64_t compiles_for(const quantize::QuantizeSpec& spec) {
    const std::uint64_t before = nvrtc::compile_count();
    launch::KernelRuntime::instance().compile(spec);
    return nvrtc::compile_count() - before;
  }

  const quantize::QuantizeSpec bundled_ =
      quantize_rows_spec(64, kernels::ElementType::kF16, 8, device::Arch::kSm86);
  const quantize::QuantizeSpec not_bundled_ =
      quantize_rows_spec(128, kernels::ElementType::kF16, 8, device::Arch::kSm86);
  TempDirectory bundle_;
  TempDirectory user_cache_;
  CacheKey bundled_key_;
};

// One compile through a chain: NVRTC first (stored in the chain's disk cache), then that disk
// cache; a bundle in front of it answers before it; nothing in the chain, NVRTC each time.
TEST_F(RuntimeWithBundle, CompileThroughAChainNamesWhereEachCubinCameFrom) {
  TempDir directory;
  DiskCache disk(directory.path());
  const quantize::QuantizeSpec spec =
      quantize_rows_spec(128, kernels::ElementType::kBF16, 8, device::Arch::kSm86);
  const launch::CompiledKernel first = launch::compile(spec, launch::CacheChain{nullptr, &disk});
  EXPECT_EQ(first.source, launch::CubinSource::kNvrtc);
  EXPECT_TRUE(first.compiled_now);
  const launch::CompiledKernel second = launch::compile(spec, launch::CacheChain{nullptr, &disk});
  EXPECT_EQ(second.source, launch::CubinSource::kDisk);
  EXPECT_FALSE(second.compiled_now);
  EXPECT_EQ(second.key, first.key);
  std::unique_ptr<DeploymentBundle> bundle = DeploymentBundle::open(bundle_.path());
  ASSERT_NE(bundle, nullptr);
  EXPECT_EQ(launch::compile(bundled_, launch::CacheChain{bundle.get(), &disk}).source,
            launch::CubinSource::kBundle);
  EXPECT_EQ(launch::compile(spec, launch::CacheChain{}).source, launch::CubinSource::kNvrtc);
}

// The kernels a package ships (use_packaged_kernels): read after INTFA_DEPLOY_CACHE and before
// the user cache, never written; counted apart; a folder a newer NVRTC made is passed over
// without a warning (INTFA_LOG=1 says why), and INTFA_CACHE_DISABLE=1 turns it off too. (An
// older NVRTC's, of the same major version, serves under its own keys: what the wheel check
// shows, tests/packaging/wheel_test.sh, the wheel built by one NVRTC and run with PyPI's newest.)
TEST_F(RuntimeWithBundle, PackagedKernelsAreReadAfterTheDeploymentBundle) {
  TempDir directory;
  DiskCache disk(directory.path());
  std::unique_ptr<DeploymentBundle> packaged =
      DeploymentBundle::open(bundle_.path(), DeploymentBundle::Kind::kPackaged);
  ASSERT_NE(packaged, nullptr);
  EXPECT_EQ(launch::compile(bundled_, launch::CacheChain{nullptr, &disk, packaged.get()}).source,
            launch::CubinSource::kPackaged);
  EXPECT_FALSE(fs::exists(disk.entry_path(bundled_key_))) << "a packaged hit is not copied";
  // Read before the user cache, even where that holds the kernel too.
  EXPECT_EQ(launch::compile(bundled_, launch::CacheChain{nullptr, &disk}).source,
            launch::CubinSource::kNvrtc);
  ASSERT_TRUE(fs::exists(disk.entry_path(bundled_key_)));
  EXPECT_EQ(launch::compile(bundled_, launch::CacheChain{nullptr, &disk, packaged.get()}).source,
            launch::CubinSource::kPackaged);
  std::unique_ptr<DeploymentBundle> deployed = DeploymentBundle::open(bundle_.path());
  EXPECT_EQ(
      launch::compile(bundled_, launch::CacheChain{deployed.get(), &disk, packaged.get()}).source,
      launch::CubinSource::kBundle);

  const RuntimeLayers layers(std::nullopt, user_cache_.path());
  log::ScopedCapture capture;
  launch::KernelRuntime& runtime = launch::KernelRuntime::instance();
  launch::KernelRuntime::use_packaged_kernels(bundle_.path());
  EXPECT_TRUE(runtime.packaged_kernels().empty()) << "named only: read when the runtime is made";
  runtime.reset_for_testing();
  EXPECT_EQ(runtime.packaged_kernels(), bundle_.path());
  const std::uint64_t packaged_hits = runtime.stats().packaged_hits;
  EXPECT_EQ(compiles_for(bundled_), 0u);
  EXPECT_EQ(runtime.stats().packaged_hits, packaged_hits + 1);
  EXPECT_FALSE(fs::exists(DiskCache(user_cache_.path()).entry_path(bundled_key_)));
  EXPECT_EQ(compiles_for(not_bundled_), 1u) << "what it does not hold compiles as usual";
  {
    const ScopedEnv disabled("INTFA_CACHE_DISABLE", "1");
    runtime.reset_for_testing();
    EXPECT_TRUE(runtime.packaged_kernels().empty());
  }
  // A newer NVRTC's bundle: not used, and not a warning (a wheel run with an older NVRTC).
  rewrite_manifest([](Manifest& manifest) { manifest.nvrtc_version.minor += 1; });
  runtime.reset_for_testing();
  EXPECT_TRUE(runtime.packaged_kernels().empty());
  EXPECT_TRUE(capture.warnings().empty()) << capture.warnings().front();
  launch::KernelRuntime::use_packaged_kernels({});
  runtime.reset_for_testing();
}

TEST_F(RuntimeWithBundle, ABundledSpecIsNeverCompiled) {
  const RuntimeLayers layers(bundle_.path().string(), user_cache_.path());
  log::ScopedCapture capture;
  const std::uint64_t bundle_hits = launch::KernelRuntime::instance().stats().bundle_hits;
  EXPECT_EQ(compiles_for(bundled_), 0u);
  EXPECT_EQ(launch::KernelRuntime::instance().stats().bundle_hits, bundle_hits + 1);
  EXPECT_FALSE(fs::exists(DiskCache(user_cache_.path()).entry_path(bundled_key_)))
      << "a bundle hit is not copied into the user cache";
  EXPECT_TRUE(capture.warnings().empty());
}

TEST_F(RuntimeWithBundle, ASpecNotInTheBundleCompilesIntoTheUserCacheOnly) {
  const RuntimeLayers layers(bundle_.path().string(), user_cache_.path());
  EXPECT_EQ(compiles_for(not_bundled_), 1u);
  const CacheKey key = launch::KernelRuntime::instance().compile(not_bundled_).key;
  EXPECT_TRUE(fs::is_regular_file(DiskCache(user_cache_.path()).entry_path(key)));
  EXPECT_FALSE(fs::exists(DiskCache(bundle_.path()).entry_path(key)));
}

TEST_F(RuntimeWithBundle, AUserCacheThatHoldsAManifestIsReadAsABundleAndNeverWritten) {
  log::ScopedCapture capture;
  const RuntimeLayers layers(std::nullopt, bundle_.path());
  const std::vector<std::string> warnings = capture.warnings();
  ASSERT_EQ(warnings.size(), 1u) << "kernels it does not list are compiled by every process";
  EXPECT_NE(warnings[0].find(cache::manifest_path(bundle_.path()).filename().string()),
            std::string::npos)
      << warnings[0];
  EXPECT_NE(warnings[0].find("INTFA_CACHE_DIR"), std::string::npos) << warnings[0];
  EXPECT_EQ(compiles_for(bundled_), 0u);
  EXPECT_EQ(compiles_for(not_bundled_), 1u);
  const CacheKey key = launch::KernelRuntime::instance().compile(not_bundled_).key;
  EXPECT_FALSE(fs::exists(DiskCache(bundle_.path()).entry_path(key)));
}

TEST_F(RuntimeWithBundle, ABadEntryIsNeverTrustedNorRemoved) {
  const fs::path path = DiskCache(bundle_.path()).entry_path(bundled_key_);
  std::vector<char> bytes = read_bytes(path);
  bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x20);
  write_bytes(path, bytes);
  log::ScopedCapture capture;
  const RuntimeLayers layers(bundle_.path().string(), user_cache_.path());
  EXPECT_EQ(compiles_for(bundled_), 1u);
  EXPECT_EQ(read_bytes(path), bytes);
  ASSERT_EQ(capture.warnings().size(), 1u);
  EXPECT_TRUE(contains(capture.warnings()[0], path.string())) << capture.warnings()[0];
}

// A bundle whose entries were removed (an old `intfa cache clear` of it did that, leaving the
// manifest) is said once, not used silently while every listed kernel compiles.
TEST_F(RuntimeWithBundle, AListedEntryThatIsMissingIsOneWarning) {
  const fs::path path = DiskCache(bundle_.path()).entry_path(bundled_key_);
  fs::remove(path);
  log::ScopedCapture capture;
  const RuntimeLayers layers(bundle_.path().string(), user_cache_.path());
  EXPECT_EQ(compiles_for(bundled_), 1u);
  launch::KernelRuntime::instance().reset_for_testing();
  EXPECT_EQ(compiles_for(bundled_), 0u) << "the user cache holds it now";
  ASSERT_EQ(capture.warnings().size(), 1u);
  EXPECT_TRUE(contains(capture.warnings()[0], path.string())) << capture.warnings()[0];
  EXPECT_TRUE(contains(capture.warnings()[0], "lacks kernels its manifest lists"))
      << capture.warnings()[0];
}

// The manifest records each entry file's size and checksum; a load checks them too, not only the
// entry's own header: an entry replaced by another valid one (its own checksum recomputed, as
// anyone who can write the file can do) is never loaded.
TEST_F(RuntimeWithBundle, AnEntryThatIsNotTheFileTheManifestRecordsIsNeverLoaded) {
  const fs::path path = DiskCache(bundle_.path()).entry_path(bundled_key_);
  nvrtc::Cubin tampered = decode_entry(read_bytes(path), bundled_key_);
  tampered.image.back() = static_cast<char>(tampered.image.back() ^ 0x01);
  write_bytes(path, encode_entry(bundled_key_, tampered));
  ASSERT_NO_THROW(decode_entry(read_bytes(path), bundled_key_)) << "a valid entry in itself";
  log::ScopedCapture capture;
  const RuntimeLayers layers(bundle_.path().string(), user_cache_.path());
  const std::uint64_t bundle_hits = launch::KernelRuntime::instance().stats().bundle_hits;
  EXPECT_EQ(compiles_for(bundled_), 1u);
  EXPECT_EQ(launch::KernelRuntime::instance().stats().bundle_hits, bundle_hits);
  ASSERT_EQ(capture.warnings().size(), 1u);
  EXPECT_TRUE(contains(capture.warnings()[0], path.string())) << capture.warnings()[0];
  EXPECT_TRUE(contains(capture.warnings()[0], "the manifest records")) << capture.warnings()[0];
}

// A bundle this build must not read: ignored with exactly one warning naming it, never loaded.
void expect_ignored_with_one_warning(const fs::path& bundle, const fs::path& user_cache,
                                     const quantize::QuantizeSpec& bundled,
                                     const quantize::QuantizeSpec& other) {
  log::ScopedCapture capture;
  const RuntimeLayers layers(bundle.string(), user_cache);
  const std::uint64_t before = nvrtc::compile_count();
  launch::KernelRuntime::instance().compile(bundled);
  launch::KernelRuntime::instance().compile(other);
  EXPECT_EQ(nvrtc::compile_count() - before, 2u) << "the bundled spec was compiled, not loaded";
  ASSERT_EQ(capture.warnings().size(), 1u);
  EXPECT_TRUE(contains(capture.warnings()[0], bundle.string())) << capture.warnings()[0];
}

TEST_F(RuntimeWithBundle, ABundleOfAnotherNvrtcVersionIsIgnoredWithOneWarning) {
  rewrite_manifest([](Manifest& manifest) { manifest.nvrtc_version.minor += 1; });
  expect_ignored_with_one_warning(bundle_.path(), user_cache_.path(), bundled_, not_bundled_);
}

TEST_F(RuntimeWithBundle, ABundleOfAnotherFormatVersionIsIgnoredWithOneWarning) {
  rewrite_manifest([](Manifest& manifest) { manifest.format_version += 1; });
  expect_ignored_with_one_warning(bundle_.path(), user_cache_.path(), bundled_, not_bundled_);
}

TEST_F(RuntimeWithBundle, ABundleWithACorruptManifestIsIgnoredWithOneWarning) {
  write_text(manifest_path(bundle_.path()), "{\"manifest_version\": 1, \"entries\": [");
  expect_ignored_with_one_warning(bundle_.path(), user_cache_.path(), bundled_, not_bundled_);
}

// The warning quotes the manifest (a member name here): its control characters are escaped.
TEST_F(RuntimeWithBundle, AManifestsControlCharactersNeverReachTheTerminal) {
  write_text(manifest_path(bundle_.path()),
             "{\"\\u001b]0;owned\\u0007\": 1, "
             "\"\\u001b]0;owned\\u0007\": 2}");
  log::ScopedCapture capture;
  const RuntimeLayers layers(bundle_.path().string(), user_cache_.path());
  launch::KernelRuntime::instance().compile(bundled_);
  ASSERT_EQ(capture.warnings().size(), 1u);
  EXPECT_EQ(capture.warnings()[0].find('\x1b'), std::string::npos) << capture.warnings()[0];
  EXPECT_TRUE(contains(capture.warnings()[0], "\\x1b]0;owned\\x07")) << capture.warnings()[0];
}

TEST_F(RuntimeWithBundle, ABundleWithoutAManifestIsIgnoredWithOneWarning) {
  fs::remove(manifest_path(bundle_.path()));
  expect_ignored_with_one_warning(bundle_.path(), user_cache_.path(), bundled_, not_bundled_);
}

TEST(DeployCacheVariable, MustBeAnAbsolutePath) {
  const ScopedEnv deploy("INTFA_DEPLOY_CACHE", std::string("relative/bundle"));
  try {
    DeploymentBundle::directory_from_environment();
    FAIL() << "a relative INTFA_DEPLOY_CACHE was accepted";
  } catch (const InvalidArgument& error) {
    EXPECT_EQ(error.field(), "INTFA_DEPLOY_CACHE");
  }
}

TEST(DeployCacheVariable, IsOffWhenTheCacheIsDisabled) {
  const ScopedEnv deploy("INTFA_DEPLOY_CACHE", std::string("/opt/bundle"));
  const ScopedEnv disable("INTFA_CACHE_DISABLE", std::string("1"));
  EXPECT_FALSE(DeploymentBundle::directory_from_environment());
}

}  // namespace
}  // namespace intfa::cache
