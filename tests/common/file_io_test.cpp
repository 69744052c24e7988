// Safe file I/O: reads take only a regular file within its bound, never following a link nor
// blocking on a FIFO; atomic writes leave the old file or the whole new one, and never a temp
// file; directories intfa creates are private.
#include "common/file_io.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>

#include "support/temp_dir.hpp"

namespace intfa::files {
namespace {

namespace fs = std::filesystem;
using intfa::testing::TempDir;

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

std::string read_text(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(file), {});
}

std::size_t files_in(const fs::path& directory) {
  return static_cast<std::size_t>(std::distance(fs::directory_iterator(directory), {}));
}

// The message of the UnexpectedFileError that reading `path` throws, or "" when none is thrown.
std::string unexpected_file_problem(const fs::path& path, std::uint64_t max_bytes) {
  try {
    read_regular_file(path, max_bytes);
  } catch (const UnexpectedFileError& error) {
    return error.what();
  }
  return "";
}

TEST(ReadRegularFile, ReturnsTheWholeFile) {
  const TempDir directory;
  write_text(directory.path() / "file", "twelve bytes");
  const std::vector<char> bytes = read_regular_file(directory.path() / "file", 12);
  EXPECT_EQ(std::string(bytes.begin(), bytes.end()), "twelve bytes");
}

TEST(ReadRegularFile, NeverFollowsASymbolicLink) {
  const TempDir directory;
  write_text(directory.path() / "target", "code");
  fs::create_symlink(directory.path() / "target", directory.path() / "link");
  EXPECT_EQ(unexpected_file_problem(directory.path() / "link", 1024),
            "is a symbolic link, not a regular file (never followed)");
}

TEST(ReadRegularFile, RefusesAFifoWithoutBlockingOnIt) {
  const TempDir directory;
  const fs::path fifo = directory.path() / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(unexpected_file_problem(fifo, 1024), "is a FIFO, not a regular file");
}

TEST(ReadRegularFile, RefusesAFileLargerThanItsBound) {
  const TempDir directory;
  write_text(directory.path() / "file", "thirteen byte");
  const std::string problem = unexpected_file_problem(directory.path() / "file", 12);
  EXPECT_NE(problem.find("13 bytes"), std::string::npos) << problem;
  EXPECT_NE(problem.find("12 bytes at most"), std::string::npos) << problem;
}

TEST(ReadRegularFile, AMissingFileIsAnIoErrorNamingIt) {
  const TempDir directory;
  try {
    read_regular_file(directory.path() / "missing", 1024);
    FAIL() << "read a missing file";
  } catch (const std::system_error& error) {
    EXPECT_EQ(error.code(), std::errc::no_such_file_or_directory);
    EXPECT_NE(std::string(error.what()).find("missing"), std::string::npos) << error.what();
  }
}

TEST(WriteFileAtomically, ReplacesTheFileAndLeavesNoTempFile) {
  const TempDir directory;
  const fs::path path = directory.path() / "file";
  write_text(path, "old");
  const std::string text = "new contents";
  write_file_atomically(path, ".tmp-file", text.data(), text.size());
  EXPECT_EQ(read_text(path), text);
  EXPECT_EQ(files_in(directory.path()), 1u);
}

TEST(WriteFileAtomically, AFailedWriteKeepsTheOldFileAndLeavesNoTempFile) {
  const TempDir directory;
  const fs::path path = directory.path() / "file";
  write_text(path, "old");
  const std::string text = "new contents";
  set_write_failure_for_testing(true);
  try {
    write_file_atomically(path, ".tmp-file", text.data(), text.size());
    ADD_FAILURE() << "a simulated full disk did not fail the write";
  } catch (const std::system_error& error) {
    EXPECT_EQ(error.code(), std::errc::no_space_on_device);
  }
  set_write_failure_for_testing(false);
  EXPECT_EQ(read_text(path), "old");
  EXPECT_EQ(files_in(directory.path()), 1u);
}

TEST(WriteFileAtomically, NeverWritesThroughATempNameTakenByALink) {
  const TempDir directory;
  write_text(directory.path() / "target", "keep");
  fs::create_symlink(directory.path() / "target", directory.path() / ".tmp-file");
  const std::string text = "new contents";
  EXPECT_THROW(
      write_file_atomically(directory.path() / "file", ".tmp-file", text.data(), text.size()),
      std::system_error);
  EXPECT_EQ(read_text(directory.path() / "target"), "keep");
  EXPECT_FALSE(fs::exists(directory.path() / "file"));
}

TEST(CreatePrivateDirectories, MakesEveryMissingDirectoryWithMode0700) {
  const TempDir directory;
  const fs::path nested = directory.path() / "a" / "b";
  create_private_directories(nested);
  for (const fs::path& made : {directory.path() / "a", nested}) {
    struct stat info {};
    ASSERT_EQ(::stat(made.c_str(), &info), 0) << made;
    EXPECT_TRUE(S_ISDIR(info.st_mode)) << made;
    EXPECT_EQ(info.st_mode & 0777, 0700u) << made;
  }
}

TEST(CreatePrivateDirectories, FailsWhereAFileTakesAParentsPlace) {
  const TempDir directory;
  write_text(directory.path() / "a-file", "not a directory\n");
  EXPECT_THROW(create_private_directories(directory.path() / "a-file" / "cache"),
               std::system_error);
}

TEST(FileTypeName, NamesEachTypeForMessages) {
  EXPECT_EQ(file_type_name(fs::file_type::regular), "a regular file");
  EXPECT_EQ(file_type_name(fs::file_type::directory), "a directory");
  EXPECT_EQ(file_type_name(fs::file_type::symlink), "a symbolic link");
  EXPECT_EQ(file_type_name(fs::file_type::fifo), "a FIFO");
  EXPECT_EQ(file_type_name(fs::file_type::character), "a character device");
  EXPECT_EQ(file_type_name(fs::file_type::unknown), "a special file");
}

}  // namespace
}  // namespace intfa::files
