// libFuzzer target: the cache-entry decoder on arbitrary bytes (what a damaged or planted file at
// an entry's name holds). It must return a cubin or throw EntryError, never read outside its input
// (ASan) nor reach undefined behaviour (UBSan); a decoded entry must encode back to the same bytes,
// so nothing the decoder accepts is ambiguous.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "cache/entry_format.hpp"

namespace {

// The decoder's expected NVRTC version is fixed, so the corpus (written by NVRTC 13.0) keeps
// reaching past the version check whichever toolkit builds the fuzzer.
const intfa::nvrtc::Version kCorpusNvrtc{13, 0};

// The key the header records (bytes 24..40), so inputs get past the key check to the sizes,
// checksum and ELF checks; the key mismatch itself is one flipped byte away.
intfa::cache::CacheKey header_key(const std::uint8_t* data, std::size_t size) {
  intfa::cache::CacheKey key;
  for (std::size_t i = 0; i < key.bytes.size() && 24 + i < size; ++i) key.bytes[i] = data[24 + i];
  return key;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::vector<char> bytes(data, data + size);
  const intfa::cache::CacheKey key = header_key(data, size);
  intfa::nvrtc::Cubin cubin;
  try {
    cubin = intfa::cache::decode_entry(bytes, key, kCorpusNvrtc);
  } catch (const intfa::cache::EntryError&) {
    return 0;
  }
  if (intfa::cache::encode_entry(key, cubin, kCorpusNvrtc) != bytes) __builtin_trap();
  return 0;
}
