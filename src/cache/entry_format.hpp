// The bytes of one cache entry file (<dir>/<2 hex>/<32 hex>.cubin); see cache/README.md.
// Pure functions, no I/O: they are unit-tested and fuzzed on their own.
#pragma once

#include <cstddef>
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

// The fixed little-endian header every entry starts with; the lowered name and the cubin follow.
constexpr char kEntryMagic[8] = {'I', 'N', 'T', 'F', 'A', 'C', 'U', 'B'};
constexpr std::size_t kEntryHeaderBytes = 64;

struct EntryHeader {
  std::uint32_t format_version = 0;
  nvrtc::Version nvrtc_version;
  CacheKey key;
  std::uint32_t name_bytes = 0;
  std::uint64_t cubin_bytes = 0;
  std::uint64_t checksum = 0;  // XXH3-64 of the lowered name's bytes followed by the cubin's
};

// Records the running NVRTC's version in the header.
std::vector<char> encode_entry(const CacheKey& key, const nvrtc::Cubin& cubin);
// Records `recorded_nvrtc` instead: for tests that need an entry left behind by another toolkit.
std::vector<char> encode_entry(const CacheKey& key, const nvrtc::Cubin& cubin,
                               const nvrtc::Version& recorded_nvrtc);

// The header's fields after checking the magic, format version, header size and reserved fields;
// says nothing about the bytes after the header. Throws EntryError.
EntryHeader decode_header(const std::vector<char>& bytes);

// Verifies everything (magic, format version, header size, reserved fields, NVRTC version, key,
// sizes, checksum, cubin ELF header) and returns the cubin; throws EntryError saying what is
// wrong. Never reads outside `bytes`, whatever they hold.
//
// The NVRTC version is part of the key, so an entry recording another one than the running
// NVRTC's (or `expected_nvrtc`'s) was left by another toolkit or tampered with: it is refused.
nvrtc::Cubin decode_entry(const std::vector<char>& bytes, const CacheKey& expected_key);
nvrtc::Cubin decode_entry(const std::vector<char>& bytes, const CacheKey& expected_key,
                          const nvrtc::Version& expected_nvrtc);

}  // namespace intfa::cache
