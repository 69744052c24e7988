// Reading INTFA_* environment variables. Every malformed value is reported naming the variable;
// docs of each variable live in docs/environment.md.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace intfa::env {

// The value, or nullopt when unset or empty.
std::optional<std::string> get(const char* name);

// 1/true/on/yes -> true, 0/false/off/no -> false, unset -> `when_unset`; anything else throws
// InvalidArgument naming the variable.
bool flag(const char* name, bool when_unset = false);

// A base-10 integer in [min_value, max_value], or nullopt when unset; anything else throws.
std::optional<long> integer(const char* name, long min_value, long max_value);

// The value as a path, or nullopt when unset; a relative path throws InvalidArgument naming the
// variable (what it names is shared by processes of any working directory).
std::optional<std::filesystem::path> absolute_path(const char* name);

}  // namespace intfa::env
