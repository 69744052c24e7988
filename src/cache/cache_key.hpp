// The cache key: XXH3-128 over everything that determines a cubin's bytes, and nothing else.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "device/arch.hpp"
#include "nvrtc/compiler.hpp"
#include "render/kernel_source.hpp"
#include "render/template_set.hpp"

namespace intfa::cache {

// Bumped whenever the entry layout or the key's inputs change (2: the units of issue 43, with
// named constants and without the display line); entries of other versions hash to
// other keys and are never loaded.
constexpr std::uint32_t kFormatVersion = 2;

struct CacheKey {
  std::array<unsigned char, 16> bytes{};

  std::string hex() const;  // 32 lowercase hex digits
  static std::optional<CacheKey> from_hex(std::string_view hex);
  friend bool operator==(const CacheKey& a, const CacheKey& b) { return a.bytes == b.bytes; }
  friend bool operator!=(const CacheKey& a, const CacheKey& b) { return !(a == b); }
  friend bool operator<(const CacheKey& a, const CacheKey& b) { return a.bytes < b.bytes; }
  std::string to_string() const { return hex(); }
};

struct KeyInputs {
  const render::RenderedUnit& unit;
  const render::TemplateSet& templates;  // the bytes of each of unit.headers come from here
  const std::vector<std::string>& options;
  nvrtc::Version nvrtc_version;
  device::Arch arch;
  std::uint32_t format_version = kFormatVersion;
};

// XXH3-128 of: the format version, the NVRTC version, the arch, each option, the unit's text and
// name expression, and for each included template its path and bytes, every field length-prefixed
// so no two different inputs serialise alike.
CacheKey make_key(const KeyInputs& inputs);

}  // namespace intfa::cache
