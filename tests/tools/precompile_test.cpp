// `intfa precompile` as a deployment runs it: the built binary writes a bundle for four archs
// (head dim 64, full INT8: a reduced set, to keep the suite fast), a second run compiles nothing,
// `intfa cache verify` checks it against its manifest, and a runtime pointed at it compiles
// nothing the bundle holds.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "cache/bundle.hpp"
#include "cache/disk_cache.hpp"
#include "common/json.hpp"
#include "device/arch.hpp"
#include "families/any_spec.hpp"
#include "launch/kernel_runtime.hpp"
#include "numerics/option_names.hpp"
#include "nvrtc/compiler.hpp"
#include "spec/attention_spec.hpp"
#include "support/child_test.hpp"
#include "support/cli.hpp"
#include "support/temp_dir.hpp"
#include "tune/database_file.hpp"

namespace intfa::cli {
namespace {

namespace fs = std::filesystem;
using testing::CliResult;
using testing::mentions;
using testing::ScopedEnv;
using testing::TempDir;

CliResult run_cli(const std::string& arguments) {
  return testing::run_cli(arguments, "-u INTFA_DEPLOY_CACHE");
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream stream(text);
  for (std::string line; std::getline(stream, line);) lines.push_back(line);
  return lines;
}

// Bytes and modification time of every file below `directory`.
std::map<fs::path, std::pair<std::string, fs::file_time_type>> snapshot(const fs::path& directory) {
  std::map<fs::path, std::pair<std::string, fs::file_time_type>> files;
  for (const auto& item : fs::recursive_directory_iterator(directory)) {
    if (!item.is_regular_file()) continue;
    std::ifstream in(item.path(), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    files[item.path()] = {bytes, item.last_write_time()};
  }
  return files;
}

constexpr const char* kReducedSet =
    "--arch sm_80,sm_86,sm_89,sm_90a --head-dims 64 --variants full";
// Its kernels: per arch K smoothing's channel_mean, K's smoothed rows with V's max pass in one
// launch (quantize_k_v_scale), quantize_rows of Q (with the LSE term), quantize_v and attention
// causal off and on, and on sm_90a the short-sequence configs of d=64 causal off and on
// (attention::heuristic_configs), less Q's quantize_rows there: the Hopper kernel quantizes Q
// itself; and on sm_90a K's rows with all of V in one launch (quantize_k_v) beside the two.
constexpr std::size_t kReducedSetKernels = 4 * 6 + 2 - 1 + 1;

// One bundle for the whole suite: building it is the slow part.
class Precompile : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    bundle_ = std::make_unique<TempDir>();
    first_run_ = std::make_unique<CliResult>(
        run_cli(std::string("precompile ") + kReducedSet + " -j 2 --out " + bundle().string()));
  }
  static void TearDownTestSuite() {
    first_run_.reset();
    bundle_.reset();
  }
  static fs::path bundle() { return bundle_->path() / "bundle"; }
  static cache::Manifest manifest() { return cache::read_manifest(bundle()); }

  // A copy of the bundle a test may damage.
  fs::path copy_of_bundle() {
    const fs::path copy = scratch_.path() / "copy";
    fs::copy(bundle(), copy, fs::copy_options::recursive);
    return copy;
  }

  static std::unique_ptr<TempDir> bundle_;
  static std::unique_ptr<CliResult> first_run_;
  TempDir scratch_;
};

std::unique_ptr<TempDir> Precompile::bundle_;
std::unique_ptr<CliResult> Precompile::first_run_;

TEST_F(Precompile, WritesAManifestWithTheDocumentedMembersAndOneEntryPerKernel) {
  ASSERT_EQ(first_run_->exit_code, 0) << first_run_->output;
  EXPECT_TRUE(mentions(*first_run_, "failures: 0")) << first_run_->output;

  std::ifstream in(cache::manifest_path(bundle()));
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const json::Value document = json::parse(text);
  for (const char* name :
       {"manifest_version", "intfa_version", "nvrtc_version", "format_version", "entries"}) {
    EXPECT_NE(document.find(name), nullptr) << name;
  }
  for (const json::Value& entry : document.at("entries").as_array()) {
    for (const char* name : {"key", "spec", "entry_bytes", "xxh3_64"}) {
      EXPECT_NE(entry.find(name), nullptr) << name;
    }
  }

  // Exactly the kernels --list names: per arch the quantize kernels (kReducedSetKernels) and the
  // attention kernel with causal off and on; on sm_90a also the heuristic's config for short
  // sequences at d=64 causal (attention::heuristic_configs).
  const CliResult listed = run_cli(std::string("precompile --list ") + kReducedSet);
  ASSERT_EQ(listed.exit_code, 0) << listed.output;
  std::vector<std::string> expected = lines_of(listed.output);
  expected.pop_back();  // "N kernels"
  std::vector<std::string> bundled;
  for (const cache::ManifestEntry& entry : manifest().entries) {
    bundled.push_back(entry.spec_text);
  }
  EXPECT_EQ(bundled, expected);
  EXPECT_EQ(bundled.size(), kReducedSetKernels);
}

TEST_F(Precompile, EveryEntryVerifiesAgainstTheManifest) {
  const cache::VerifyReport report = cache::verify_bundle(bundle(), manifest());
  EXPECT_EQ(report.checked, manifest().entries.size());
  for (const auto& [path, problem] : report.bad) ADD_FAILURE() << path << ": " << problem;
}

TEST_F(Precompile, ASecondRunCompilesNothingAndLeavesTheEntriesAlone) {
  const auto before = snapshot(bundle());
  const CliResult second =
      run_cli(std::string("precompile ") + kReducedSet + " -j 2 --out " + bundle().string());
  EXPECT_EQ(second.exit_code, 0) << second.output;
  EXPECT_TRUE(mentions(second, "compiled now: 0")) << second.output;
  EXPECT_TRUE(mentions(second, "already present: " + std::to_string(kReducedSetKernels)))
      << second.output;
  const auto after = snapshot(bundle());
  ASSERT_EQ(after.size(), before.size());
  for (const auto& [path, contents] : before) {
    if (path.filename() == cache::kManifestFileName) continue;  // rewritten, same content
    EXPECT_TRUE(after.at(path) == contents) << path << " changed";
  }
  EXPECT_EQ(after.at(cache::manifest_path(bundle())).first,
            before.at(cache::manifest_path(bundle())).first);
}

TEST_F(Precompile, CacheVerifyPassesOnTheBundle) {
  const CliResult verify = run_cli("cache verify " + bundle().string());
  EXPECT_EQ(verify.exit_code, 0) << verify.output;
  EXPECT_TRUE(
      mentions(verify, std::to_string(kReducedSetKernels) + " manifest entries verified, 0 bad"))
      << verify.output;
  EXPECT_EQ(run_cli("cache verify --dir " + bundle().string()).exit_code, 0);
}

TEST_F(Precompile, CacheVerifyNamesATamperedEntry) {
  const fs::path copy = copy_of_bundle();
  const cache::ManifestEntry entry = manifest().entries.at(3);
  const fs::path path = cache::DiskCache(copy).entry_path(entry.key);
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  file.seekg(static_cast<std::streamoff>(entry.entry_bytes / 2));
  const char byte = static_cast<char>(file.get() ^ 0x01);
  file.seekp(static_cast<std::streamoff>(entry.entry_bytes / 2));
  file.put(byte);
  file.close();

  const CliResult verify = run_cli("cache verify " + copy.string());
  EXPECT_EQ(verify.exit_code, 1) << verify.output;
  EXPECT_TRUE(mentions(verify, path.string() + ": checksum")) << verify.output;
  EXPECT_TRUE(mentions(verify, "1 bad")) << verify.output;
}

TEST_F(Precompile, CacheVerifyNamesADeletedEntry) {
  const fs::path copy = copy_of_bundle();
  const fs::path path = cache::DiskCache(copy).entry_path(manifest().entries.at(7).key);
  fs::remove(path);
  const CliResult verify = run_cli("cache verify " + copy.string());
  EXPECT_EQ(verify.exit_code, 1) << verify.output;
  EXPECT_TRUE(mentions(verify, path.string() + ": missing")) << verify.output;
}

TEST_F(Precompile, ARuntimePointedAtTheBundleCompilesNoneOfItsKernels) {
  const TempDir user_cache;
  const cache::Manifest bundled = manifest();
  std::uint64_t compiles = 0;
  {
    const ScopedEnv deploy("INTFA_DEPLOY_CACHE", bundle().c_str());
    const ScopedEnv cache_dir("INTFA_CACHE_DIR", user_cache.path().c_str());
    const ScopedEnv enabled("INTFA_CACHE_DISABLE", nullptr);
    launch::KernelRuntime::instance().reset_for_testing();
    const std::uint64_t before = nvrtc::compile_count();
    for (const cache::ManifestEntry& entry : bundled.entries) {
      const families::AnySpec spec = families::AnySpec::from_json(entry.spec);
      const launch::CompiledKernel compiled = launch::KernelRuntime::instance().compile(spec);
      EXPECT_EQ(compiled.key, entry.key) << entry.spec_text;
    }
    compiles = nvrtc::compile_count() - before;
  }
  launch::KernelRuntime::instance().reset_for_testing();  // back to the restored environment
  EXPECT_EQ(compiles, 0u);
  EXPECT_TRUE(fs::is_empty(user_cache.path()));
}

// A bundle's entries gone, its manifest would still name them: clear refuses a bundle whole, also
// one whose first precompile has not written its manifest yet (only its lock file).
TEST_F(Precompile, CacheClearRefusesABundleAndRemovesNothing) {
  const fs::path copy = copy_of_bundle();
  for (bool without_manifest : {false, true}) {
    if (without_manifest) fs::remove(cache::manifest_path(copy));
    const auto before = snapshot(copy);
    const CliResult clear = run_cli("cache clear " + copy.string());
    EXPECT_EQ(clear.exit_code, 1) << clear.output;
    EXPECT_TRUE(mentions(clear, "is a deployment bundle")) << clear.output;
    EXPECT_EQ(snapshot(copy).size(), before.size());
  }
}

// A --out among a user's files would tag their directory CACHEDIR.TAG, and backups that honour
// the tag (tar --exclude-caches) would then skip those files.
TEST(PrecompileOut, ADirectoryOfOtherFilesIsRefusedAndLeftAsItWas) {
  const TempDir directory;
  std::ofstream(directory.path() / "notes.txt") << "a user's file\n";
  const CliResult result = run_cli("precompile --arch sm_80 --head-dims 64 --variants full --out " +
                                   directory.path().string());
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_TRUE(mentions(result, "is not an intfa bundle")) << result.output;
  EXPECT_EQ(std::distance(fs::directory_iterator(directory.path()), {}), 1)
      << "precompile wrote beside the user's file";
}

// A manifest.json of the user's own is no bundle's: it is neither replaced nor written beside.
TEST(PrecompileOut, ADirectoryWithAManifestThatIsNotIntfasIsRefused) {
  const TempDir directory;
  std::ofstream(directory.path() / "manifest.json") << "{\"name\": \"a user's package\"}\n";
  std::ofstream(directory.path() / "notes.txt") << "a user's file\n";
  const CliResult result = run_cli("precompile --arch sm_80 --head-dims 64 --variants full --out " +
                                   directory.path().string());
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_TRUE(mentions(result, "is not an intfa bundle")) << result.output;
  EXPECT_EQ(std::distance(fs::directory_iterator(directory.path()), {}), 2);
  std::ifstream in(directory.path() / "manifest.json");
  const std::string kept((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(kept, "{\"name\": \"a user's package\"}\n");
}

// The user cache however it is spelled, made yet or not: a trailing '/' or '.', a link to it.
TEST(PrecompileOut, TheUsersKernelCacheIsRefusedUnderAnySpelling) {
  const TempDir directory;
  const std::string cache = (directory.path() / "cache").string();
  fs::create_symlink(directory.path() / "elsewhere", directory.path() / "link");
  const std::pair<std::string, std::string> spellings[] = {
      {cache, cache + "/"},
      {cache, cache + "/."},
      {cache + "/", cache},
      {(directory.path() / "link").string(), (directory.path() / "elsewhere").string()}};
  for (const auto& [variable, out] : spellings) {
    const CliResult result = testing::run_cli(
        "precompile --arch sm_80 --head-dims 64 --variants full --out " + out,
        "-u INTFA_DEPLOY_CACHE -u INTFA_CACHE_DISABLE INTFA_CACHE_DIR=" + variable);
    EXPECT_EQ(result.exit_code, 1) << variable << " / " << out << ":\n" << result.output;
    EXPECT_TRUE(mentions(result, "is the kernel cache this user's runs write"))
        << variable << " / " << out << ":\n"
        << result.output;
  }
  EXPECT_FALSE(fs::exists(cache));
  EXPECT_FALSE(fs::exists(directory.path() / "elsewhere"));
}

// The kernel cache this user's runs write, as a bundle, would be read-only to all of them.
TEST(PrecompileOut, TheUsersKernelCacheIsRefused) {
  const TempDir cache;
  const CliResult result = testing::run_cli(
      "precompile --arch sm_80 --head-dims 64 --variants full --out " + cache.path().string(),
      "-u INTFA_DEPLOY_CACHE -u INTFA_CACHE_DISABLE INTFA_CACHE_DIR=" + cache.path().string());
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_TRUE(mentions(result, "is the kernel cache this user's runs write")) << result.output;
  EXPECT_TRUE(mentions(result, "INTFA_CACHE_DIR")) << result.output;
  EXPECT_FALSE(cache::holds_manifest(cache.path()));
}

// Two runs into one bundle at once take turns, and the manifest lists the kernels of both: each
// run's kernels verify, none is reported as "not listed".
TEST(PrecompileOut, ConcurrentRunsIntoOneBundleKeepEveryKernelTheyWrote) {
  const TempDir directory;
  const fs::path bundle = directory.path() / "bundle";
  const std::string common = " --head-dims 64 --variants full -j 1 --out " + bundle.string();
  const std::string command =
      "env -u INTFA_DEPLOY_CACHE '" INTFA_TEST_CLI
      "' precompile --arch "
      "sm_80" +
      common + " > " + (directory.path() / "a.txt").string() +
      " 2>&1 & env -u INTFA_DEPLOY_CACHE '" INTFA_TEST_CLI "' precompile --arch sm_86" + common +
      " > " + (directory.path() / "b.txt").string() + " 2>&1 & wait";
  ASSERT_EQ(std::system(command.c_str()), 0);
  std::size_t expected = 0;
  for (const char* arch : {"sm_80", "sm_86"}) {
    const CliResult listed = run_cli(std::string("precompile --list --head-dims 64 --variants "
                                                 "full --arch ") +
                                     arch);
    expected += lines_of(listed.output).size() - 1;
  }
  EXPECT_EQ(cache::read_manifest(bundle).entries.size(), expected);
  const CliResult verify = run_cli("cache verify " + bundle.string());
  EXPECT_EQ(verify.exit_code, 0) << verify.output;
  EXPECT_FALSE(mentions(verify, "not listed")) << verify.output;
}

// Once the bundle cannot be written (here every key folder is read-only to a user without root;
// a full disk fails alike), no more kernels are compiled, and the messages name the bundle.
TEST(PrecompileOut, AnUnwritableBundleStopsTheCompilesAndIsNamedABundle) {
  if (testing::rerun_without_root()) return;
  const TempDir directory;
  const fs::path bundle = directory.path() / "bundle";
  fs::create_directory(bundle);
  std::ofstream(bundle / cache::kBundleLockFileName);  // an earlier run's bundle
  for (int folder = 0; folder < 256; ++folder) {
    char name[3];
    std::snprintf(name, sizeof name, "%02x", folder);
    fs::create_directory(bundle / name);
    fs::permissions(bundle / name, fs::perms::owner_read | fs::perms::owner_exec);
  }
  const CliResult result = run_cli(
      "precompile --arch sm_80 --head-dims 64 --variants full -j 1 --out " + bundle.string());
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_TRUE(mentions(result, "cannot write the deployment bundle " + bundle.string()))
      << result.output;
  EXPECT_FALSE(mentions(result, "kernel cache")) << result.output;
  EXPECT_TRUE(mentions(result, "compiled now: 1\n")) << result.output;
  EXPECT_TRUE(mentions(result, "more kernels: cannot write the bundle")) << result.output;
}

TEST(PrecompileOptions, ConfigsAllKeepsTheTunerCandidatesThatFitTheArchsSharedMemory) {
  for (device::Arch arch : device::all_archs()) {
    attention::SpecRequest request;
    request.arch = arch;
    request.head_dim = 256;
    std::size_t fitting = 0;
    for (const KernelConfig& config : attention::candidate_configs(request)) {
      if (attention::shared_bytes(attention::make_spec(request, config)) <=
          device::default_max_shared_bytes(arch)) {
        fitting++;
      }
    }
    const CliResult listed = run_cli(
        "precompile --list --configs all --head-dims 256 "
        "--variants full --arch " +
        device::arch_name(arch));
    ASSERT_EQ(listed.exit_code, 0) << listed.output;
    // Channel mean, K's rows with V's max pass, Q's rows, V; on sm_90a also K's rows with all of
    // V (quantize_k_v).
    const std::size_t quantize_kernels = arch == device::Arch::kSm90a ? 5 : 4;
    EXPECT_TRUE(mentions(listed, std::to_string(quantize_kernels + 2 * fitting) + " kernels"))
        << device::arch_name(arch) << "\n"
        << listed.output;
  }
}

TEST(PrecompileOptions, TheSharedMemoryTableIsTheOptInLimitPerBlock) {
  EXPECT_EQ(device::default_max_shared_bytes(device::Arch::kSm80), 163 * 1024);
  EXPECT_EQ(device::default_max_shared_bytes(device::Arch::kSm86), 99 * 1024);
  EXPECT_EQ(device::default_max_shared_bytes(device::Arch::kSm87), 163 * 1024);
  EXPECT_EQ(device::default_max_shared_bytes(device::Arch::kSm89), 99 * 1024);
  EXPECT_EQ(device::default_max_shared_bytes(device::Arch::kSm90a), 232448);
  EXPECT_EQ(device::default_max_shared_bytes(device::Arch::kSm100a), 232448);
  EXPECT_EQ(device::default_max_shared_bytes(device::Arch::kSm120), 99 * 1024);
  EXPECT_EQ(device::default_max_shared_bytes(device::Arch::kSm121), 99 * 1024);
}

TEST(PrecompileOptions, TheDefaultSetIsEveryArchHeadDimVariantAndCausalOnce) {
  const CliResult listed = run_cli("precompile --list");
  ASSERT_EQ(listed.exit_code, 0) << listed.output;
  // Per arch: 3 head dims x 2 variants x causal off/on attention kernels, for each head dim K
  // smoothing's channel_mean, quantize_rows of K (smoothed; half INT8) and of Q (the LSE term),
  // and for full INT8 K's rows with V's max pass (quantize_k_v_scale) and quantize_v; on sm_90a
  // the short-sequence configs of full and half INT8 at d=64 and d=128, causal off and on. On
  // sm_90a no quantize_rows of Q: the Hopper kernel quantizes Q itself (and writes the LSE term);
  // and per head dim K's rows with all of V in one launch (quantize_k_v).
  const std::size_t archs = device::all_archs().size();
  EXPECT_TRUE(mentions(listed, std::to_string(archs * (12 + 9 + 6) + 8 - 3 + 3) + " kernels"))
      << listed.output;
  EXPECT_FALSE(mentions(listed, "quantize_rows sm_90a d64 f16->i8 q_dot_k_mean")) << listed.output;
  EXPECT_TRUE(mentions(listed, "quantize_rows sm_80 d64 f16->i8 q_dot_k_mean")) << listed.output;
  EXPECT_TRUE(mentions(listed, "p=u8 p-scale=tile v-scale=channel q=in_kernel+q_dot_k_mean"))
      << listed.output;
  // --smooth-k=0 --rotate=0: one quantize_rows for Q and half INT8's K (K's alone on sm_90a),
  // K's rows with V's max pass and quantize_v for full INT8, no channel_mean.
  const CliResult plain = run_cli("precompile --list --smooth-k=0 --rotate=0");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_TRUE(mentions(plain, std::to_string(archs * (12 + 3 + 6) + 8 + 3) + " kernels"))
      << plain.output;
  EXPECT_FALSE(mentions(plain, "channel_mean")) << plain.output;
  // --smooth-k=0 alone: automatic rotation keeps the mean pass (its decisions), per head dim.
  const CliResult unsmoothed = run_cli("precompile --list --smooth-k=0");
  ASSERT_EQ(unsmoothed.exit_code, 0) << unsmoothed.output;
  EXPECT_TRUE(mentions(unsmoothed, std::to_string(archs * (12 + 3 + 3 + 6) + 8 + 3) + " kernels"))
      << unsmoothed.output;
  EXPECT_TRUE(mentions(unsmoothed, "quantize_rows sm_80 d64 f16->i8 rotate=auto"))
      << unsmoothed.output;
}

TEST(PrecompileOptions, TunedConfigsWithoutADatabaseAreAUsageError) {
  const TempDir directory;
  const CliResult result = run_cli("precompile --configs tuned --tuning-db " +
                                   (directory.path() / "absent.json").string() + " --out " +
                                   (directory.path() / "bundle").string());
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_TRUE(mentions(result, "no tuning database at " +
                                   (directory.path() / "absent.json").string() +
                                   " (run intfa tune on the GPU first)"))
      << result.output;
}

// A database as `intfa tune` writes it: on the H100, three length buckets of one kernel (two of
// them won by one config) with a runner-up each; on an A100, one half-INT8 bucket.
tune::TuningEntry tuned_entry(const char* gpu, device::Arch arch, int head_dim, Variant variant,
                              int seq_bucket, KernelConfig best) {
  tune::TuningEntry entry;
  entry.device = tune::DeviceKey{gpu, arch, 13};
  entry.bucket.request.arch = arch;
  entry.bucket.request.head_dim = head_dim;
  entry.bucket.request.variant = variant;
  entry.bucket.seq_bucket = seq_bucket;
  entry.best = tune::TimedConfig{best, 1.0};
  entry.runner_ups = {tune::TimedConfig{KernelConfig{128, 32, 8, 2}, 1.5}};
  entry.measured_on = tune::MeasuredShape{4, 32, seq_bucket};
  entry.tuned_at = "2026-11-23T10:00:00Z";
  return entry;
}

class PrecompileTuned : public ::testing::Test {
 protected:
  void SetUp() override {
    tune::TuningDatabase database;
    database.merge(tuned_entry("H100", device::Arch::kSm90a, 128, Variant::kFullInt8, 1024, kA));
    database.merge(tuned_entry("H100", device::Arch::kSm90a, 128, Variant::kFullInt8, 4096, kB));
    database.merge(tuned_entry("H100", device::Arch::kSm90a, 128, Variant::kFullInt8, 16384, kA));
    database.merge(tuned_entry("A100", device::Arch::kSm80, 64, Variant::kHalfInt8, 2048, kC));
    tune::write_database_file(path(), database);
  }
  std::string path() const { return (directory_.path() / "tuning.json").string(); }
  static std::string attention(device::Arch arch, int head_dim, Variant variant,
                               const KernelConfig& config) {
    attention::SpecRequest request;
    request.arch = arch;
    request.head_dim = head_dim;
    request.variant = variant;
    return attention::make_spec(request, config).to_string();
  }

  static constexpr KernelConfig kA{64, 128, 4, 2};
  static constexpr KernelConfig kB{128, 64, 8, 3};
  static constexpr KernelConfig kC{64, 32, 4, 2};
  TempDir directory_;
};

TEST_F(PrecompileTuned, BundlesExactlyTheWinnersOfTheRequestedArch) {
  const CliResult listed =
      run_cli("precompile --list --configs tuned --arch sm_90a --tuning-db " + path());
  ASSERT_EQ(listed.exit_code, 0) << listed.output;
  // K smoothing's mean pass, K's rows with V's max pass, K's rows with all of V, Q's rows, V for
  // d128 f16, and the two distinct winners.
  EXPECT_TRUE(mentions(listed, "\n7 kernels")) << listed.output;
  const device::Arch h100 = device::Arch::kSm90a;
  EXPECT_TRUE(mentions(listed, attention(h100, 128, Variant::kFullInt8, kA))) << listed.output;
  EXPECT_TRUE(mentions(listed, attention(h100, 128, Variant::kFullInt8, kB))) << listed.output;
  EXPECT_FALSE(mentions(listed, attention(h100, 128, Variant::kFullInt8, {128, 32, 8, 2})))
      << "a runner-up was bundled\n"
      << listed.output;
  EXPECT_FALSE(mentions(listed, "sm_80")) << listed.output;
}

TEST_F(PrecompileTuned, EachEntryKeepsTheVariantItWasTunedFor) {
  const CliResult listed =
      run_cli("precompile --list --configs tuned --arch sm_80 --tuning-db " + path());
  ASSERT_EQ(listed.exit_code, 0) << listed.output;
  // K smoothing's mean pass, K's and Q's rows, attention.
  EXPECT_TRUE(mentions(listed, "\n4 kernels")) << listed.output;
  EXPECT_TRUE(mentions(listed, attention(device::Arch::kSm80, 64, Variant::kHalfInt8, kC)))
      << listed.output;
}

// An entry tuned with per-block K bundles K's per-block quantize kernel with its attention kernel,
// whatever --k-scale says (the entry's numerics apply in tuned mode, as for V's).
TEST_F(PrecompileTuned, APerBlockKEntryBundlesItsQuantizeKernel) {
  tune::TuningDatabase database;
  tune::TuningEntry entry =
      tuned_entry("H100", device::Arch::kSm90a, 64, Variant::kFullInt8, 4096, kA);
  entry.bucket.request.numerics.k_granularity = KScaleGranularity::kPerBlock;
  database.merge(entry);
  tune::write_database_file(path(), database);
  for (const char* k_scale : {"", " --k-scale token", " --k-scale block"}) {
    const CliResult listed = run_cli("precompile --list --configs tuned --arch sm_90a" +
                                     std::string(k_scale) + " --tuning-db " + path());
    ASSERT_EQ(listed.exit_code, 0) << listed.output;
    EXPECT_TRUE(
        mentions(listed, "quantize_rows sm_90a d64 f16->i8 smooth_k rotate=auto k-scale=block"))
        << k_scale << "\n"
        << listed.output;
    EXPECT_FALSE(mentions(listed, "quantize_rows sm_90a d64 f16->i8 smooth_k rotate=auto\n"))
        << k_scale << "\n"
        << listed.output;
    EXPECT_TRUE(mentions(listed, " k-scale=block")) << listed.output;
  }
}

// One entry the arch cannot run (a Hopper kernel's warp count, recorded for an A100) is skipped
// with the runtime's warning, naming the file and the entry; the bundle then holds the heuristic's
// config for that bucket, which the runtime runs there, and every other entry as before.
TEST_F(PrecompileTuned, AnEntryTheArchCannotRunIsSkippedWithAWarningNotTheWholeBundle) {
  tune::TuningDatabase database = *tune::read_database_file(path());
  const KernelConfig hopper_only{128, 128, 12, 2};
  database.merge(
      tuned_entry("A100", device::Arch::kSm80, 128, Variant::kFullInt8, 4096, hopper_only));
  tune::write_database_file(path(), database);
  const CliResult listed =
      run_cli("precompile --list --configs tuned --arch sm_80 --tuning-db " + path());
  ASSERT_EQ(listed.exit_code, 0) << listed.output;
  EXPECT_TRUE(mentions(listed, "the tuned config " + hopper_only.to_string())) << listed.output;
  EXPECT_TRUE(mentions(listed, path())) << listed.output;
  EXPECT_TRUE(mentions(listed, attention(device::Arch::kSm80, 64, Variant::kHalfInt8, kC)))
      << listed.output;
  attention::SpecRequest request;
  request.arch = device::Arch::kSm80;
  request.head_dim = 128;
  for (const KernelConfig& config : attention::heuristic_configs(request)) {
    EXPECT_TRUE(mentions(listed, attention(device::Arch::kSm80, 128, Variant::kFullInt8, config)))
        << listed.output;
  }
}

TEST_F(PrecompileTuned, ADatabaseWithoutEntriesForTheRequestIsAnError) {
  const CliResult result = run_cli(
      "precompile --list --configs tuned --arch sm_80 --head-dims 128 --tuning-db " + path());
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_TRUE(mentions(result, path())) << result.output;
  EXPECT_TRUE(mentions(result, "it has none")) << result.output;
}

TEST_F(PrecompileTuned, ACorruptDatabaseIsAnErrorNamingTheFile) {
  std::ofstream(path(), std::ios::trunc) << "{\"schema_version\": 1, \"entries\": [";
  const CliResult result = run_cli("precompile --list --configs tuned --tuning-db " + path());
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_TRUE(mentions(result, path())) << result.output;
}

TEST(PrecompileOptions, OutIsRequiredAndUnknownValuesAreUsageErrors) {
  EXPECT_EQ(run_cli("precompile").exit_code, 2);
  const CliResult kblock = run_cli("precompile --list --qk-bits 4 --k-scale block");
  EXPECT_EQ(kblock.exit_code, 2) << kblock.output;
  EXPECT_TRUE(mentions(kblock, "--k-scale")) << kblock.output;
  EXPECT_EQ(run_cli("precompile --list --arch sm_75").exit_code, 2);
  EXPECT_EQ(run_cli("precompile --list --head-dims 96").exit_code, 2);
  EXPECT_EQ(run_cli("precompile --list --dtypes f32").exit_code, 2);
  EXPECT_EQ(run_cli("precompile --list --configs some").exit_code, 2);
  EXPECT_EQ(run_cli("precompile --list -j 0").exit_code, 2);
  EXPECT_EQ(run_cli("precompile --list -j2").exit_code, 0);
}

// Every numerics option of the list (include/intfa/numerics.hpp) by its short flag and by its
// member's (--p and --p-encoding; --p-scale is both) selects the kernels listed: a value other
// than the default is named in the spec text. Two spellings of one option are a usage error.
TEST(PrecompileOptions, EveryNumericsFlagBothSpellingsSelectsTheKernels) {
  for_each_numerics_field(AttentionNumerics{}, [&](const auto& field, const auto&) {
    using Enum = std::decay_t<decltype(field.default_value)>;
    const auto& other = OptionTable<Enum>::rows[field.default_value == Enum{} ? 1 : 0];
    std::string member = field.name;
    for (char& c : member) c = c == '_' ? '-' : c;
    for (const std::string& flag : {std::string(field.flag), member}) {
      const CliResult listed = run_cli(
          "precompile --list --arch sm_90a --head-dims 64 "
          "--variants full --" +
          flag + " " + other.name);
      ASSERT_EQ(listed.exit_code, 0) << flag << "\n" << listed.output;
      EXPECT_TRUE(mentions(listed, std::string(" ") + field.flag + "=" + other.name))
          << flag << "\n"
          << listed.output;
    }
    if (member != field.flag) {
      const CliResult both = run_cli(std::string("precompile --list --") + field.flag + " " +
                                     other.name + " --" + member + " " + other.name);
      EXPECT_EQ(both.exit_code, 2) << both.output;
    }
  });
}

TEST(PrecompileOptions, HelpDescribesTheVerb) {
  const CliResult help = run_cli("precompile --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_TRUE(mentions(help, "usage: intfa precompile --out DIR")) << help.output;
  EXPECT_TRUE(mentions(run_cli("--help"), "precompile"));
}

}  // namespace
}  // namespace intfa::cli
