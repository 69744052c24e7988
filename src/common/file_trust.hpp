// Whose files intfa may take code from, decided as ssh decides which of its files to trust: only
// what this user or root owns and no one else can write. A kernel cache or a deployment bundle
// that fails these checks could hold a cubin planted by someone else; it is never read.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <filesystem>
#include <string>

namespace intfa::files {

// This process's effective user, or root.
bool trusted_owner(uid_t owner);

// Why code must not be read from the directory `info` (an lstat or stat) describes, or "" when it
// may: not a directory, another user's but root's, or group- or world-writable.
std::string untrusted_directory_problem(const struct stat& info);

// Whether intfa may read kernels from a directory.
struct DirectoryCheck {
  enum class Verdict {
    kMissing,  // nothing there yet (the first store makes it)
    kTrusted,
    kUntrusted,   // not a directory, another user's, or group- or world-writable
    kUnreadable,  // stat or search fails: EACCES, ENAMETOOLONG, a file in the path, ...
  };
  Verdict verdict = Verdict::kMissing;
  std::string problem;  // "it belongs to uid 1001, not to this user ...", for messages
  bool owned_by_another_user = false;
};
DirectoryCheck check_directory(const std::filesystem::path& directory);

}  // namespace intfa::files
