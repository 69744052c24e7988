#include "common/locations.hpp"

#include "common/env.hpp"

namespace intfa::locations {
namespace fs = std::filesystem;

std::optional<CacheLocation> default_cache_location() {
  if (env::flag("INTFA_CACHE_DISABLE")) return std::nullopt;
  if (auto forced = env::absolute_path("INTFA_CACHE_DIR")) {
    return CacheLocation{std::move(*forced), "INTFA_CACHE_DIR"};
  }
  // The XDG base directory specification says relative values are invalid and to be ignored.
  if (const auto xdg = env::get("XDG_CACHE_HOME"); xdg && fs::path(*xdg).is_absolute()) {
    return CacheLocation{fs::path(*xdg) / "intfa", "XDG_CACHE_HOME"};
  }
  if (const auto home = env::get("HOME"); home && fs::path(*home).is_absolute()) {
    return CacheLocation{fs::path(*home) / ".cache" / "intfa", "HOME"};
  }
  return std::nullopt;
}

std::optional<fs::path> default_cache_directory() {
  if (auto location = default_cache_location()) return std::move(location->directory);
  return std::nullopt;
}

}  // namespace intfa::locations
