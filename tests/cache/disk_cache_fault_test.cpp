// Damage on disk is never fatal: a bad entry (or a file or link at its name) is dropped with
// exactly one warning, reported as a miss, and rebuilt by the runtime; a link is never followed.
// (A directory at an entry's name is not intfa's and stays: cache_foreign_files_test.cpp.)
#include <gtest/gtest.h>

#include <memory>
#include <ostream>
#include <string>

#include "cache/cache_test_support.hpp"
#include "cache/disk_cache.hpp"
#include "cache/entry_format.hpp"
#include "common/log.hpp"
#include "launch/kernel_runtime.hpp"

namespace intfa::cache {
namespace {

using namespace intfa::testing;

enum class Fault {
  kTruncated,
  kFlippedByte,
  kZeroLength,
  kWrongMagic,
  kWrongVersion,
  kForeignFile,
  kSymlinkOutside,
};

std::string fault_name(Fault fault) {
  switch (fault) {
    case Fault::kTruncated:
      return "Truncated";
    case Fault::kFlippedByte:
      return "FlippedByte";
    case Fault::kZeroLength:
      return "ZeroLength";
    case Fault::kWrongMagic:
      return "WrongMagic";
    case Fault::kWrongVersion:
      return "WrongVersion";
    case Fault::kForeignFile:
      return "ForeignFile";
    case Fault::kSymlinkOutside:
      return "SymlinkOutside";
  }
  return "Unknown";
}
void PrintTo(Fault fault, std::ostream* os) {
  *os << fault_name(fault);
}

// A real compiled kernel, built once for the suite in a cache of its own.
struct CompiledEntry {
  quantize::QuantizeSpec spec = quantize_rows_spec(128, kernels::ElementType::kF16, 4);
  CacheKey key;
  nvrtc::Cubin cubin;
};

class DiskCacheFault : public ::testing::TestWithParam<Fault> {
 protected:
  static void SetUpTestSuite() {
    compiled_ = std::make_unique<CompiledEntry>();
    const TempDirectory directory;
    const RuntimeCacheDirectory runtime_cache(directory.path());
    const launch::CompiledKernel kernel =
        launch::KernelRuntime::instance().compile(compiled_->spec);
    compiled_->key = kernel.key;
    compiled_->cubin = *kernel.cubin;
  }
  static void TearDownTestSuite() { compiled_.reset(); }

  fs::path entry() const { return DiskCache(cache_.path()).entry_path(compiled_->key); }

  // A good entry, then the fault applied to it.
  void plant_fault() const {
    DiskCache(cache_.path())
        .store(compiled_->key, compiled_->cubin, families::kernel_source(compiled_->spec));
    const std::vector<char> good = read_bytes(entry());
    switch (GetParam()) {
      case Fault::kTruncated:
        write_bytes(entry(), {good.begin(), good.begin() + good.size() / 2});
        break;
      case Fault::kFlippedByte: {
        std::vector<char> flipped = good;
        flipped[good.size() - 100] = static_cast<char>(flipped[good.size() - 100] ^ 0x20);
        write_bytes(entry(), flipped);
        break;
      }
      case Fault::kZeroLength:
        write_bytes(entry(), {});
        break;
      case Fault::kWrongMagic: {
        std::vector<char> renamed = good;
        renamed[0] = 'X';
        write_bytes(entry(), renamed);
        break;
      }
      case Fault::kWrongVersion: {
        std::vector<char> next_version = good;
        next_version[8] = static_cast<char>(kFormatVersion + 1);  // u32 LE at byte 8
        write_bytes(entry(), next_version);
        break;
      }
      case Fault::kForeignFile:
        write_text(entry(), "some other program's data\n");
        break;
      case Fault::kSymlinkOutside:
        // A valid entry outside the cache: following the link would turn it into a hit.
        write_bytes(outside_target(), good);
        fs::remove(entry());
        fs::create_symlink(outside_target(), entry());
        break;
    }
  }

  fs::path outside_target() const { return outside_.path() / "planted.cubin"; }

  void expect_outside_target_untouched() const {
    if (GetParam() != Fault::kSymlinkOutside) return;
    ASSERT_TRUE(fs::is_regular_file(outside_target())) << "the link's target was deleted";
    const nvrtc::Cubin target = decode_entry(read_bytes(outside_target()), compiled_->key);
    EXPECT_EQ(target, compiled_->cubin) << "the link's target was changed";
  }

  static std::unique_ptr<CompiledEntry> compiled_;
  TempDirectory cache_;
  TempDirectory outside_;
};

std::unique_ptr<CompiledEntry> DiskCacheFault::compiled_;

TEST_P(DiskCacheFault, LoadMissesWithOneWarningNamingTheFile) {
  plant_fault();
  log::ScopedCapture capture;
  DiskCache disk(cache_.path());
  EXPECT_FALSE(disk.load(compiled_->key));
  const std::vector<std::string> warnings = capture.warnings();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find(entry().string()), std::string::npos) << warnings[0];
  EXPECT_FALSE(fs::exists(fs::symlink_status(entry()))) << "the bad entry is removed";
  expect_outside_target_untouched();
  EXPECT_FALSE(disk.load(compiled_->key));
  EXPECT_EQ(capture.warnings().size(), 1u) << "once removed, it is a plain miss";
}

TEST_P(DiskCacheFault, TheRuntimeRebuildsTheEntry) {
  plant_fault();
  const RuntimeCacheDirectory runtime_cache(cache_.path());
  const std::uint64_t compiles_before = nvrtc::compile_count();
  log::ScopedCapture capture;
  const launch::CompiledKernel rebuilt = launch::KernelRuntime::instance().compile(compiled_->spec);
  EXPECT_EQ(capture.warnings().size(), 1u);
  EXPECT_TRUE(rebuilt.compiled_now);
  EXPECT_EQ(nvrtc::compile_count(), compiles_before + 1);
  EXPECT_EQ(rebuilt.key, compiled_->key);
  expect_outside_target_untouched();

  DiskCache disk(cache_.path());
  const VerifyReport report = disk.verify();
  EXPECT_EQ(report.checked, 1u);
  EXPECT_TRUE(report.ok()) << report.bad.front().first << ": " << report.bad.front().second;
  EXPECT_EQ(fs::symlink_status(entry()).type(), fs::file_type::regular);
  EXPECT_EQ(disk.load(compiled_->key), *rebuilt.cubin);
}

INSTANTIATE_TEST_SUITE_P(EveryFault, DiskCacheFault,
                         ::testing::Values(Fault::kTruncated, Fault::kFlippedByte,
                                           Fault::kZeroLength, Fault::kWrongMagic,
                                           Fault::kWrongVersion, Fault::kForeignFile,
                                           Fault::kSymlinkOutside),
                         [](const ::testing::TestParamInfo<Fault>& param_info) {
                           return fault_name(param_info.param);
                         });

// A link at a key folder's name is never followed, and never removed either (it is not intfa's):
// the keys of that folder work from memory, after one warning; the others are stored as usual.
TEST(DiskCacheFolder, ALinkInPlaceOfAKeyFolderIsNeverFollowedNorRemoved) {
  const TempDirectory cache;
  const TempDirectory outside;
  const CacheKey key = test_key(0x50);
  write_bytes(outside.path() / (key.hex() + ".cubin"), encode_entry(key, fake_cubin()));
  fs::create_symlink(outside.path(), cache.path() / "50");
  log::ScopedCapture capture;
  DiskCache disk(cache.path());
  EXPECT_FALSE(disk.load(key));
  disk.store(key, fake_cubin(80, 256, 0x77), families::kernel_source(quantize_rows_spec()));
  EXPECT_FALSE(disk.load(key));
  EXPECT_EQ(capture.warnings().size(), 1u);
  EXPECT_EQ(fs::symlink_status(cache.path() / "50").type(), fs::file_type::symlink);
  EXPECT_EQ(read_bytes(outside.path() / (key.hex() + ".cubin")), encode_entry(key, fake_cubin()));
  EXPECT_EQ(fs::directory_entry(outside.path()).is_directory(), true);
  EXPECT_EQ(std::distance(fs::directory_iterator(outside.path()), fs::directory_iterator()), 1);
  disk.store(test_key(0x51), fake_cubin(), families::kernel_source(quantize_rows_spec()));
  EXPECT_EQ(disk.load(test_key(0x51)), fake_cubin());
}

}  // namespace
}  // namespace intfa::cache
