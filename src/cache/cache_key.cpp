#include "cache/cache_key.hpp"

#include <xxhash.h>

#include "common/strings.hpp"
#include "intfa/errors.hpp"

namespace intfa::cache {
namespace {

// Streams length-prefixed fields into one XXH3-128 state.
class KeyHasher {
 public:
  KeyHasher() : state_(XXH3_createState()) {
    if (state_ == nullptr) throw InternalError("XXH3_createState failed (out of memory)");
    XXH3_128bits_reset(state_);
  }
  ~KeyHasher() { XXH3_freeState(state_); }
  KeyHasher(const KeyHasher&) = delete;
  KeyHasher& operator=(const KeyHasher&) = delete;

  void field(std::string_view bytes) {
    const std::uint64_t size = bytes.size();
    XXH3_128bits_update(state_, &size, sizeof size);
    XXH3_128bits_update(state_, bytes.data(), bytes.size());
  }
  void field(std::uint64_t value) { field(std::to_string(value)); }

  CacheKey digest() const {
    const XXH128_hash_t hash = XXH3_128bits_digest(state_);
    XXH128_canonical_t canonical;
    XXH128_canonicalFromHash(&canonical, hash);
    CacheKey key;
    static_assert(sizeof canonical.digest == 16, "XXH128 digest is 16 bytes");
    for (std::size_t i = 0; i < 16; ++i) key.bytes[i] = canonical.digest[i];
    return key;
  }

 private:
  XXH3_state_t* state_;
};

}  // namespace

std::string CacheKey::hex() const { return strings::to_hex(bytes.data(), bytes.size()); }

std::optional<CacheKey> CacheKey::from_hex(std::string_view hex) {
  if (hex.size() != 32) return std::nullopt;
  CacheKey key;
  for (std::size_t i = 0; i < 16; ++i) {
    unsigned value = 0;
    for (std::size_t nibble = 0; nibble < 2; ++nibble) {
      const char c = hex[2 * i + nibble];
      value <<= 4;
      if (c >= '0' && c <= '9') value |= static_cast<unsigned>(c - '0');
      else if (c >= 'a' && c <= 'f') value |= static_cast<unsigned>(c - 'a' + 10);
      else return std::nullopt;
    }
    key.bytes[i] = static_cast<unsigned char>(value);
  }
  return key;
}

CacheKey make_key(const KeyInputs& inputs) {
  KeyHasher hasher;
  hasher.field("intfa-cache-key");
  hasher.field(inputs.format_version);
  hasher.field(inputs.nvrtc_version.to_string());
  hasher.field(device::arch_name(inputs.arch));
  hasher.field(inputs.options.size());
  for (const std::string& option : inputs.options) hasher.field(option);
  hasher.field(inputs.unit.source);
  hasher.field(inputs.unit.name_expression);
  hasher.field(inputs.unit.headers.size());
  for (const std::string& header : inputs.unit.headers) {
    const std::string* contents = inputs.templates.find(header);
    if (contents == nullptr) {
      throw InternalError("cache key: template '" + header + "' is not in the template set");
    }
    hasher.field(header);
    hasher.field(*contents);
  }
  return hasher.digest();
}

}  // namespace intfa::cache
