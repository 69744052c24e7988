#include "common/env.hpp"

#include <cerrno>
#include <cstdlib>

#include "common/strings.hpp"
#include "intfa/errors.hpp"

namespace intfa::env {

std::optional<std::string> get(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

bool flag(const char* name, bool when_unset) {
  const auto value = get(name);
  if (!value) return when_unset;
  const std::string lowered = strings::to_lower(strings::trim(*value));
  if (lowered == "1" || lowered == "true" || lowered == "on" || lowered == "yes") return true;
  if (lowered == "0" || lowered == "false" || lowered == "off" || lowered == "no") return false;
  throw InvalidArgument(name, "'" + *value + "'", "expected 1/0 (or true/false, on/off, yes/no)");
}

std::optional<long> integer(const char* name, long min_value, long max_value) {
  const auto value = get(name);
  if (!value) return std::nullopt;
  const auto parsed = strings::parse_int(*value);
  if (!parsed || *parsed < min_value || *parsed > max_value) {
    throw InvalidArgument(name, "'" + *value + "'",
                          "expected an integer in [" + std::to_string(min_value) + ", " +
                              std::to_string(max_value) + "]");
  }
  return parsed;
}

std::optional<std::filesystem::path> absolute_path(const char* name) {
  const auto value = get(name);
  if (!value) return std::nullopt;
  if (!std::filesystem::path(*value).is_absolute()) {
    throw InvalidArgument(name, "'" + *value + "'", "expected an absolute path");
  }
  return std::filesystem::path(*value);
}

}  // namespace intfa::env
