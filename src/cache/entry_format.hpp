// The bytes of one cache entry file (<dir>/<2 hex>/<32 hex>.cubin); see cache/README.md.
// Pure functions, no I/O: they are unit-tested and fuzzed on their own.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "cache/cache_key.hpp"
#include "nvrtc/compiler.hpp"

namespace intfa::cache {

// Why bytes are not a valid entry (truncated, wrong magic, checksum mismatch, ...).
class EntryError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

std::vector<char> encode_entry(const CacheKey& key, const nvrtc::Cubin& cubin);

// Verifies everything (magic, format version, key, sizes, checksum, cubin ELF header) and returns
// the cubin; throws EntryError saying what is wrong.
nvrtc::Cubin decode_entry(const std::vector<char>& bytes, const CacheKey& expected_key);

}  // namespace intfa::cache
