// Where intfa keeps what it writes for later processes: the kernel cache directory, which also
// holds the tuning database by default. Read from the environment on every call, so a test or a
// reset runtime sees a changed variable.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace intfa::locations {

// A cache directory and the environment variable that named it, for messages.
struct CacheLocation {
  std::filesystem::path directory;
  std::string variable;  // "INTFA_CACHE_DIR", "XDG_CACHE_HOME" or "HOME"
};

// $INTFA_CACHE_DIR, else $XDG_CACHE_HOME/intfa, else $HOME/.cache/intfa; nullopt when
// INTFA_CACHE_DISABLE=1 or no location can be named. Throws InvalidArgument naming
// INTFA_CACHE_DIR when it is set to a relative path (INTFA_CACHE_DISABLE when it is malformed).
std::optional<CacheLocation> default_cache_location();
std::optional<std::filesystem::path> default_cache_directory();  // default_cache_location()'s

}  // namespace intfa::locations
