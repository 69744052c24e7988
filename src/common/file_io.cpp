#include "common/file_io.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>

namespace intfa::files {
namespace fs = std::filesystem;
namespace {

// Test hooks (cache/README.md, "Test hooks"), set only by the test binary: a library in a user's
// process never stops or fails a write on its own.
std::atomic<bool> g_fail_writes_for_testing{false};
std::atomic<bool> g_pause_writes_for_testing{false};

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
// is the one that must leave neither the destination nor a temp file that could be read as one.
void write_halfway_hooks(const fs::path& temp) {
  if (g_pause_writes_for_testing.load()) {
    // The parent test sees the stop (waitpid WUNTRACED) and sends SIGKILL: a writer that dies
    // mid-write, deterministically.
    ::raise(SIGSTOP);
  }
  if (g_fail_writes_for_testing.load()) {
    throw std::system_error(
        ENOSPC, std::generic_category(),
        "cannot write " + temp.string() + " (simulated by files::set_write_failure_for_testing)");
  }
}

}  // namespace

FileDescriptor::~FileDescriptor() {
  if (descriptor_ >= 0) ::close(descriptor_);
}

int FileDescriptor::close_now() {
  const int result = ::close(descriptor_);
  descriptor_ = -1;
  return result;
}

TempFileGuard::~TempFileGuard() {
  if (!path_.empty()) ::unlink(path_.c_str());
}

void throw_errno(const std::string& what, const fs::path& path, int error) {
  throw std::system_error(error, std::generic_category(), what + " " + path.string());
}

fs::file_type file_type_of(mode_t mode) {
  if (S_ISREG(mode)) return fs::file_type::regular;
  if (S_ISDIR(mode)) return fs::file_type::directory;
  if (S_ISLNK(mode)) return fs::file_type::symlink;
  if (S_ISFIFO(mode)) return fs::file_type::fifo;
  if (S_ISSOCK(mode)) return fs::file_type::socket;
  if (S_ISCHR(mode)) return fs::file_type::character;
  if (S_ISBLK(mode)) return fs::file_type::block;
  return fs::file_type::unknown;
}

std::string file_type_name(fs::file_type type) {
  switch (type) {
    case fs::file_type::regular:
      return "a regular file";
    case fs::file_type::directory:
      return "a directory";
    case fs::file_type::symlink:
      return "a symbolic link";
    case fs::file_type::fifo:
      return "a FIFO";
    case fs::file_type::socket:
      return "a socket";
    case fs::file_type::character:
      return "a character device";
    case fs::file_type::block:
      return "a block device";
    default:
      return "a special file";
  }
}

std::string not_regular_file_problem(fs::file_type type) {
  return "is " + file_type_name(type) + ", not a regular file" +
         (type == fs::file_type::symlink ? " (never followed)" : "");
}

std::vector<char> read_regular_file(const fs::path& path, std::uint64_t max_bytes) {
  // O_NONBLOCK: a FIFO planted at an entry's name must not hang the open.
  FileDescriptor file(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (!file.valid()) {
    if (errno == ELOOP) throw UnexpectedFileError(not_regular_file_problem(fs::file_type::symlink));
    throw_errno("cannot open", path, errno);
  }
  struct stat info {};
  if (::fstat(file.get(), &info) != 0) throw_errno("cannot stat", path, errno);
  if (!S_ISREG(info.st_mode)) {
    throw UnexpectedFileError(not_regular_file_problem(file_type_of(info.st_mode)));
  }
  if (static_cast<std::uint64_t>(info.st_size) > max_bytes) {
    throw UnexpectedFileError("is " + std::to_string(info.st_size) +
                              " bytes, larger than intfa writes at this name (" +
                              std::to_string(max_bytes) + " bytes at most)");
  }
  std::vector<char> bytes(static_cast<std::size_t>(info.st_size));
  std::size_t filled = 0;
  while (filled < bytes.size()) {
    const ssize_t got = ::read(file.get(), bytes.data() + filled, bytes.size() - filled);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw_errno("cannot read", path, errno);
    if (got == 0) break;  // shrank since fstat: the caller's decoder reports the truncation
    filled += static_cast<std::size_t>(got);
  }
  bytes.resize(filled);
  return bytes;
}

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

void create_private_directories(const fs::path& directory) {
  std::error_code error;
  if (fs::is_directory(directory, error)) return;
  const fs::path parent = directory.parent_path();
  if (!parent.empty() && parent != directory) create_private_directories(parent);
  if (::mkdir(directory.c_str(), 0700) != 0 && errno != EEXIST) {
    throw_errno("cannot create directory", directory, errno);
  }
}

void sync_directory(const fs::path& directory) {
  FileDescriptor folder(::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (folder.valid()) ::fsync(folder.get());
}

void set_write_failure_for_testing(bool fail) {
  g_fail_writes_for_testing.store(fail);
}

void set_write_pause_for_testing(bool pause) {
  g_pause_writes_for_testing.store(pause);
}

}  // namespace intfa::files
