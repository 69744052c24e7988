// I/O failures the file system really produces, not simulated: permission denied on an entry (in
// a process without root, since root ignores permission bits) and a full disk (a 4 KiB tmpfs,
// where the test may mount one). Each is one warning; the call still returns its kernel.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "cache/cache_test_support.hpp"
#include "cache/disk_cache.hpp"
#include "common/log.hpp"
#include "launch/kernel_runtime.hpp"
#include "support/child_test.hpp"

namespace intfa::cache {
namespace {

using namespace intfa::testing;

TEST(DiskCachePermissionDenied, AnUnreadableEntryIsAMissWithOneWarningAndIsLeftInPlace) {
  if (rerun_without_root()) return;
  const TempDirectory directory;
  DiskCache disk(directory.path());
  disk.store(test_key(0x61), fake_cubin(), families::kernel_source(quantize_rows_spec()));
  ASSERT_EQ(::chmod(disk.entry_path(test_key(0x61)).c_str(), 0), 0);
  log::ScopedCapture capture;
  EXPECT_FALSE(disk.load(test_key(0x61)));
  const std::vector<std::string> warnings = capture.warnings();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find(std::strerror(EACCES)), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find(disk.entry_path(test_key(0x61)).string()), std::string::npos);
  EXPECT_TRUE(fs::exists(disk.entry_path(test_key(0x61)))) << "an I/O error proves nothing bad";
}

TEST(DiskCachePermissionDenied, TheRuntimeCompilesAndReplacesAnUnreadableEntry) {
  if (rerun_without_root()) return;
  const TempDirectory directory;
  const quantize::QuantizeSpec spec = quantize_rows_spec(64);
  const RuntimeCacheDirectory runtime_cache(directory.path());
  launch::KernelRuntime& runtime = launch::KernelRuntime::instance();
  const launch::CompiledKernel first = runtime.compile(spec);
  const fs::path entry = DiskCache(directory.path()).entry_path(first.key);
  ASSERT_EQ(::chmod(entry.c_str(), 0), 0);

  runtime.reset_for_testing();  // forget the compiled cubin: the next call goes to disk
  log::ScopedCapture capture;
  const launch::CompiledKernel second = runtime.compile(spec);
  EXPECT_TRUE(second.compiled_now);
  EXPECT_EQ(second.cubin->lowered_name, first.cubin->lowered_name);
  EXPECT_EQ(capture.warnings().size(), 1u);
  EXPECT_EQ(file_mode(entry), 0600u) << "the fresh entry was renamed over the unreadable one";
  EXPECT_TRUE(DiskCache(directory.path()).verify().ok());
}

// A tmpfs of `bytes` (mode 0700) mounted over `directory` for the life of the object, in a mount
// namespace of this thread's own, so no other process ever sees it and a crashed test leaves no
// mount behind. Not possible without CAP_SYS_ADMIN (not root, or a restricted container):
// mounted() is then false and reason() says why.
class SmallTmpfs {
 public:
  SmallTmpfs(const fs::path& directory, std::size_t bytes) : directory_(directory) {
    if (::unshare(CLONE_NEWNS) != 0) {
      reason_ = std::string("cannot enter a mount namespace: ") + std::strerror(errno);
      return;
    }
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
      reason_ = std::string("cannot make the mounts private: ") + std::strerror(errno);
      return;
    }
    const std::string options = "size=" + std::to_string(bytes) + ",mode=0700";
    if (::mount("tmpfs", directory.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                options.c_str()) != 0) {
      reason_ = std::string("cannot mount a tmpfs: ") + std::strerror(errno);
      return;
    }
    mounted_ = true;
  }
  ~SmallTmpfs() {
    if (mounted_) ::umount2(directory_.c_str(), MNT_DETACH);
  }
  SmallTmpfs(const SmallTmpfs&) = delete;
  SmallTmpfs& operator=(const SmallTmpfs&) = delete;
  bool mounted() const { return mounted_; }
  const std::string& reason() const { return reason_; }

 private:
  fs::path directory_;
  bool mounted_ = false;
  std::string reason_;
};

TEST(DiskCacheFullDisk, AFullFileSystemIsOneWarningAndTheRuntimeStillReturnsTheCubin) {
  const TempDirectory mount_point;
  const SmallTmpfs tmpfs(mount_point.path(), 4096);  // a real cubin is over 10 KiB
  if (!tmpfs.mounted()) {
    GTEST_SKIP() << tmpfs.reason()
                 << "; DiskCacheReadOnly.ASimulatedFullDiskWarnsOnceAndTurnsMemoryOnly covers "
                    "this path with a write failure injected halfway through the temp file";
  }
  const RuntimeCacheDirectory runtime_cache(mount_point.path());
  launch::KernelRuntime& runtime = launch::KernelRuntime::instance();
  log::ScopedCapture capture;
  for (const int head_dim : {64, 128}) {
    const launch::CompiledKernel kernel = runtime.compile(quantize_rows_spec(head_dim));
    ASSERT_TRUE(kernel.cubin);
    EXPECT_TRUE(kernel.compiled_now);
    EXPECT_TRUE(nvrtc::cubin_sm_number(kernel.cubin->image));
  }
  const std::vector<std::string> warnings = capture.warnings();
  ASSERT_EQ(warnings.size(), 1u) << "the second store is not even tried";
  EXPECT_NE(warnings[0].find(std::strerror(ENOSPC)), std::string::npos) << warnings[0];
  EXPECT_TRUE(files_named(mount_point.path(), ".tmp-").empty());
  EXPECT_TRUE(DiskCache(mount_point.path()).list().empty());
}

}  // namespace
}  // namespace intfa::cache
