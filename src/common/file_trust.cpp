#include "common/file_trust.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/file_io.hpp"

namespace intfa::files {
namespace fs = std::filesystem;

bool trusted_owner(uid_t owner) {
  return owner == ::geteuid() || owner == 0;
}

std::string untrusted_directory_problem(const struct stat& info) {
  if (!S_ISDIR(info.st_mode)) {
    return "it is " + file_type_name(file_type_of(info.st_mode)) + ", not a directory";
  }
  if (!trusted_owner(info.st_uid)) {
    return "it belongs to uid " + std::to_string(info.st_uid) + ", not to this user (uid " +
           std::to_string(::geteuid()) + ") or root, so its owner could plant kernels in it";
  }
  if ((info.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return "it is group- or world-writable, so others could plant kernels in it";
  }
  return "";
}

DirectoryCheck check_directory(const fs::path& directory) {
  DirectoryCheck check;
  struct stat info {};
  if (::stat(directory.c_str(), &info) != 0) {
    if (errno == ENOENT) return check;  // made by the first store
    check.verdict = DirectoryCheck::Verdict::kUnreadable;
    check.problem = std::string("it cannot be read: ") + std::strerror(errno);
    return check;
  }
  check.problem = untrusted_directory_problem(info);
  if (!check.problem.empty()) {
    check.verdict = DirectoryCheck::Verdict::kUntrusted;
    check.owned_by_another_user = S_ISDIR(info.st_mode) && !trusted_owner(info.st_uid);
    return check;
  }
  if (::faccessat(AT_FDCWD, directory.c_str(), R_OK | X_OK, AT_EACCESS) != 0) {
    check.verdict = DirectoryCheck::Verdict::kUnreadable;
    check.problem = std::string("it cannot be read: ") + std::strerror(errno);
    return check;
  }
  check.verdict = DirectoryCheck::Verdict::kTrusted;
  return check;
}

}  // namespace intfa::files
