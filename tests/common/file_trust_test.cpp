// Which directories intfa takes code from: its own user's or root's, writable by no one else.
#include "common/file_trust.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "support/temp_dir.hpp"

namespace intfa::files {
namespace {

namespace fs = std::filesystem;
using intfa::testing::TempDir;
using Verdict = DirectoryCheck::Verdict;

TEST(CheckDirectory, AMissingDirectoryIsMissing) {
  const TempDir directory;
  EXPECT_EQ(check_directory(directory.path() / "missing").verdict, Verdict::kMissing);
}

TEST(CheckDirectory, TrustsAPrivateDirectoryOfThisUser) {
  const TempDir directory;  // mkdtemp: 0700, this user's
  const DirectoryCheck check = check_directory(directory.path());
  EXPECT_EQ(check.verdict, Verdict::kTrusted) << check.problem;
  EXPECT_TRUE(check.problem.empty());
}

TEST(CheckDirectory, RefusesAGroupOrWorldWritableDirectory) {
  for (const unsigned mode : {0770u, 0707u, 0777u}) {
    const TempDir directory;
    ASSERT_EQ(::chmod(directory.path().c_str(), mode), 0);
    const DirectoryCheck check = check_directory(directory.path());
    EXPECT_EQ(check.verdict, Verdict::kUntrusted) << std::oct << mode;
    EXPECT_NE(check.problem.find("writable"), std::string::npos) << check.problem;
    EXPECT_FALSE(check.owned_by_another_user);
  }
}

TEST(CheckDirectory, RefusesAFileInADirectorysPlace) {
  const TempDir directory;
  std::ofstream(directory.path() / "a-file") << "not a directory\n";
  const DirectoryCheck check = check_directory(directory.path() / "a-file");
  EXPECT_EQ(check.verdict, Verdict::kUntrusted);
  EXPECT_EQ(check.problem, "it is a regular file, not a directory");
}

TEST(TrustedOwner, IsThisUserOrRoot) {
  EXPECT_TRUE(trusted_owner(::geteuid()));
  EXPECT_TRUE(trusted_owner(0));
  EXPECT_FALSE(trusted_owner(::geteuid() + 1));  // another user (not root: euid + 1 > 0)
}

}  // namespace
}  // namespace intfa::files
