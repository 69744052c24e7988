// Reading and writing files that another process (or a person) may have put in intfa's place:
// reads open only regular files, never follow a symbolic link nor block on a FIFO, and are bounded
// in size; writes go through a temp file renamed into place, so a reader sees the old file or the
// whole new one. Every descriptor and temp file is owned by a guard: nothing outlives a failure.
// Used by the cubin cache, deployment bundles and the tuning database alike.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

namespace intfa::files {

// The file at a path is not one intfa would have written there: not a regular file, or larger
// than intfa writes at that name. An I/O failure is std::system_error instead: it proves nothing
// about the file.
class UnexpectedFileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Owns one file descriptor.
class FileDescriptor {
 public:
  explicit FileDescriptor(int descriptor) : descriptor_(descriptor) {}
  ~FileDescriptor();
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return descriptor_; }
  bool valid() const { return descriptor_ >= 0; }
  // close() can report a write error deferred by the file system (NFS, quota), so a writer asks.
  int close_now();

 private:
  int descriptor_;
};

// Unlinks a temp file unless it was renamed into place.
class TempFileGuard {
 public:
  explicit TempFileGuard(std::filesystem::path path) : path_(std::move(path)) {}
  ~TempFileGuard();
  TempFileGuard(const TempFileGuard&) = delete;
  TempFileGuard& operator=(const TempFileGuard&) = delete;
  void release() { path_.clear(); }

 private:
  std::filesystem::path path_;
};

// Throws std::system_error for `error` (an errno value), saying "<what> <path>".
[[noreturn]] void throw_errno(const std::string& what, const std::filesystem::path& path,
                              int error);

// The type of an lstat/stat st_mode.
std::filesystem::file_type file_type_of(mode_t mode);

// "a regular file", "a directory", "a symbolic link", "a FIFO", "a character device", ...
std::string file_type_name(std::filesystem::file_type type);

// "is a FIFO, not a regular file"; a symbolic link adds " (never followed)".
std::string not_regular_file_problem(std::filesystem::file_type type);

// The bytes of a regular file, never following a symbolic link nor blocking on a FIFO. Throws
// UnexpectedFileError when the file itself is bad (not a regular file, over `max_bytes`) and
// std::system_error when it cannot be read.
std::vector<char> read_regular_file(const std::filesystem::path& path, std::uint64_t max_bytes);

// Writes `size` bytes to `destination` through the temp file `temp_name` in its folder (created
// with O_EXCL, written, fsync'ed, renamed over the destination): readers see the old file or the
// whole new one, never a part. When two processes write one destination, the last rename wins.
// Throws std::system_error; the temp file never outlives a failure.
void write_file_atomically(const std::filesystem::path& destination,
                           const std::string& temp_file_name, const char* data, std::size_t size);

// mkdir -p where every directory created is private (0700): what intfa keeps on disk is code it
// runs, or chooses the code it runs. Throws std::system_error.
void create_private_directories(const std::filesystem::path& directory);

// fsync on a directory, making the renames into it durable; a failure only weakens durability,
// never correctness, so it is not reported.
void sync_directory(const std::filesystem::path& directory);

// Test hooks, called only by tests: while set, every write_file_atomically in this process fails
// halfway through its temp file as if the disk were full (ENOSPC), so the full-disk path can be
// tested without a small file system; or stops the process there with SIGSTOP, so a test can kill
// a writer mid-write.
void set_write_failure_for_testing(bool fail);
void set_write_pause_for_testing(bool pause);

}  // namespace intfa::files
