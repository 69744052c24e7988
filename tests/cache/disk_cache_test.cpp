// The disk cache's contract with the runtime: a miss, then a store, then a verified hit of the
// same cubin; the documented layout and sidecar; no NVRTC work on a hit.
#include "cache/disk_cache.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>

#include "cache/cache_test_support.hpp"
#include "cache/entry_format.hpp"
#include "common/json.hpp"
#include "common/log.hpp"
#include "launch/kernel_runtime.hpp"
#include "support/timing.hpp"

namespace intfa::cache {
namespace {

using namespace intfa::testing;

TEST(DiskCache, MissesThenStoresThenHitsTheSameCubin) {
  const TempDirectory directory;
  DiskCache disk(directory.path());
  const CacheKey key = test_key(0x20);
  const nvrtc::Cubin cubin = fake_cubin(86, 4096, 0x11);
  log::ScopedCapture capture;
  EXPECT_FALSE(disk.load(key));
  disk.store(key, cubin, families::kernel_source(quantize_rows_spec()));
  const auto hit = disk.load(key);
  ASSERT_TRUE(hit);
  EXPECT_EQ(*hit, cubin);
  EXPECT_EQ(hit->image, cubin.image);
  EXPECT_EQ(DiskCache(directory.path()).load(key), cubin) << "another instance sees it too";
  EXPECT_TRUE(capture.warnings().empty());
}

TEST(DiskCache, KeepsEntriesApart) {
  const TempDirectory directory;
  DiskCache disk(directory.path());
  disk.store(test_key(0x20), fake_cubin(80, 256, 0x01),
             families::kernel_source(quantize_rows_spec()));
  disk.store(test_key(0x21), fake_cubin(80, 256, 0x02),
             families::kernel_source(quantize_rows_spec(64)));
  EXPECT_EQ(disk.load(test_key(0x20)), fake_cubin(80, 256, 0x01));
  EXPECT_EQ(disk.load(test_key(0x21)), fake_cubin(80, 256, 0x02));
  EXPECT_FALSE(disk.load(test_key(0x22)));
}

TEST(DiskCache, WritesTheEntryUnderItsKeysFirstTwoHexDigits) {
  const TempDirectory directory;
  DiskCache disk(directory.path());
  const CacheKey key = test_key(0xab);
  const fs::path expected = directory.path() / "ab" / (key.hex() + ".cubin");
  EXPECT_EQ(disk.entry_path(key), expected);
  EXPECT_EQ(disk.sidecar_path(key), directory.path() / "ab" / (key.hex() + ".json"));
  disk.store(key, fake_cubin(), families::kernel_source(quantize_rows_spec()));
  EXPECT_TRUE(fs::is_regular_file(expected));
  EXPECT_EQ(read_bytes(expected), encode_entry(key, fake_cubin()));
}

TEST(DiskCache, WritesAReadableSidecarDescribingTheEntry) {
  const TempDirectory directory;
  DiskCache disk(directory.path());
  const CacheKey key = test_key(0x30);
  const nvrtc::Cubin cubin = fake_cubin(80, 777);
  const quantize::QuantizeSpec spec = quantize_rows_spec(256, kernels::ElementType::kBF16, 4);
  const std::time_t before = std::time(nullptr);
  disk.store(key, cubin, families::kernel_source(spec));
  const std::vector<char> text = read_bytes(disk.sidecar_path(key));
  const json::Value sidecar = json::parse(std::string(text.begin(), text.end()));
  EXPECT_EQ(sidecar.at("key").as_string(), key.hex());
  EXPECT_EQ(quantize::QuantizeSpec::from_json(sidecar.at("spec")), spec);
  EXPECT_EQ(families::AnySpec::from_json(sidecar.at("spec")), families::AnySpec(spec));
  EXPECT_EQ(sidecar.at("spec_text").as_string(), spec.to_string());
  EXPECT_EQ(sidecar.at("nvrtc").as_string(), nvrtc::version().to_string());
  EXPECT_EQ(sidecar.at("format_version").as_int(), kFormatVersion);
  EXPECT_EQ(sidecar.at("lowered_name").as_string(), cubin.lowered_name);
  EXPECT_EQ(sidecar.at("cubin_bytes").as_int(), 777);
  EXPECT_GE(sidecar.at("created").as_int(), before);
  EXPECT_LE(sidecar.at("created").as_int(), std::time(nullptr));
}

TEST(DiskCache, CreatesItsDirectoryOnlyOnTheFirstStoreWithMode0700) {
  const TempDirectory parent;
  const fs::path directory = parent.path() / "home" / ".cache" / "intfa";
  DiskCache disk(directory);
  EXPECT_FALSE(fs::exists(parent.path() / "home")) << "the constructor creates nothing";
  EXPECT_FALSE(disk.load(test_key(0x40)));
  EXPECT_TRUE(disk.list().empty());
  EXPECT_EQ(disk.verify().checked, 0u);
  EXPECT_EQ(disk.clear(false).removed_files, 0u);
  EXPECT_FALSE(fs::exists(parent.path() / "home")) << "reading creates nothing";
  disk.store(test_key(0x40), fake_cubin(), families::kernel_source(quantize_rows_spec()));
  EXPECT_TRUE(disk.writable());
  for (const fs::path& created :
       {parent.path() / "home", parent.path() / "home" / ".cache", directory, directory / "40"}) {
    EXPECT_EQ(file_mode(created), 0700u) << created;
  }
  EXPECT_TRUE(disk.load(test_key(0x40)));
}

TEST(DiskCache, LeavesNoTempFilesBehind) {
  const TempDirectory directory;
  DiskCache disk(directory.path());
  for (unsigned char first = 0; first < 8; ++first) {
    disk.store(test_key(first), fake_cubin(), families::kernel_source(quantize_rows_spec()));
  }
  EXPECT_TRUE(files_named(directory.path(), ".tmp-").empty());
  EXPECT_EQ(disk.list().size(), 8u);
}

TEST(DiskCache, ListsEveryEntrySortedByKeyWithItsSpec) {
  const TempDirectory directory;
  DiskCache disk(directory.path());
  disk.store(test_key(0xf0), fake_cubin(80, 300), families::kernel_source(quantize_rows_spec(64)));
  disk.store(test_key(0x05), fake_cubin(80, 200), families::kernel_source(quantize_rows_spec(128)));
  disk.store(test_key(0x70), fake_cubin(80, 100), families::kernel_source(quantize_rows_spec(256)));
  fs::remove(disk.sidecar_path(test_key(0x70)));
  const std::vector<EntryInfo> entries = disk.list();
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[0].key, test_key(0x05));
  EXPECT_EQ(entries[1].key, test_key(0x70));
  EXPECT_EQ(entries[2].key, test_key(0xf0));
  EXPECT_EQ(entries[0].spec, quantize_rows_spec(128).to_string());
  EXPECT_EQ(entries[1].spec, "") << "no sidecar, no readable spec";
  EXPECT_EQ(entries[0].path, disk.entry_path(test_key(0x05)));
  EXPECT_EQ(entries[0].size_bytes, fs::file_size(entries[0].path));
  EXPECT_LE(std::abs(std::time(nullptr) - entries[0].modified), 60);
}

// `intfa cache ls` once took 26 s over one 1 MiB sidecar. A sidecar is a few hundred bytes; one
// far larger is not read, and costs the listing nothing but its readable spec.
TEST(DiskCache, ASidecarOfAMebibyteCostsTheListingNoTime) {
  const TempDirectory directory;
  DiskCache disk(directory.path());
  disk.store(test_key(0x05), fake_cubin(), families::kernel_source(quantize_rows_spec()));
  std::string sidecar = wide_json_object(55000);  // just under 1 MiB
  sidecar.insert(1, "\"spec_text\": \"planted\", ");
  write_text(disk.sidecar_path(test_key(0x05)), sidecar);
  std::vector<EntryInfo> entries;
  const double ms = least_ms([&] { entries = disk.list(); });
  EXPECT_LT(ms, 50 * kSanitizerSlowdown);
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].spec, "") << "a sidecar that large is not ours";
}

TEST(DiskCache, AHitNeedsNoNvrtcCompile) {
  const TempDirectory directory;
  const RuntimeCacheDirectory runtime_cache(directory.path());
  launch::KernelRuntime& runtime = launch::KernelRuntime::instance();
  const quantize::QuantizeSpec spec = quantize_rows_spec(64, kernels::ElementType::kBF16, 8);

  const std::uint64_t before = nvrtc::compile_count();
  const launch::CompiledKernel first = runtime.compile(spec);
  EXPECT_TRUE(first.compiled_now);
  EXPECT_EQ(nvrtc::compile_count(), before + 1);
  EXPECT_TRUE(fs::is_regular_file(DiskCache(directory.path()).entry_path(first.key)));

  runtime.reset_for_testing();  // forget the in-memory cubin: only the disk can serve it now
  const launch::CompiledKernel second = runtime.compile(spec);
  EXPECT_FALSE(second.compiled_now);
  EXPECT_EQ(nvrtc::compile_count(), before + 1);
  EXPECT_EQ(second.key, first.key);
  EXPECT_EQ(*second.cubin, *first.cubin);
}

}  // namespace
}  // namespace intfa::cache
