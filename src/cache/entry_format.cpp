#include "cache/entry_format.hpp"

#include <xxhash.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <limits>

namespace intfa::cache {
namespace {

// Byte offsets of the header fields; cache/README.md has the same table.
constexpr std::size_t kFormatVersionAt = 8;
constexpr std::size_t kHeaderSizeAt = 12;
constexpr std::size_t kNvrtcMajorAt = 16;
constexpr std::size_t kNvrtcMinorAt = 18;
constexpr std::size_t kFirstReservedAt = 20;
constexpr std::size_t kKeyAt = 24;
constexpr std::size_t kNameBytesAt = 40;
constexpr std::size_t kSecondReservedAt = 44;
constexpr std::size_t kCubinBytesAt = 48;
constexpr std::size_t kChecksumAt = 56;
static_assert(kChecksumAt + sizeof(std::uint64_t) == kEntryHeaderBytes, "header layout");
static_assert(sizeof kEntryMagic == kFormatVersionAt, "the magic fills the first 8 bytes");

// Little-endian by construction rather than by memcpy, so the format does not depend on the host.
template <typename Unsigned>
void put_little_endian(std::vector<char>& bytes, std::size_t at, Unsigned value) {
  for (std::size_t i = 0; i < sizeof(Unsigned); ++i) {
    bytes[at + i] = static_cast<char>(static_cast<unsigned char>(value >> (8 * i)));
  }
}

template <typename Unsigned>
Unsigned get_little_endian(const std::vector<char>& bytes, std::size_t at) {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < sizeof(Unsigned); ++i) {
    value |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
  }
  return static_cast<Unsigned>(value);
}

std::uint64_t payload_checksum(const char* payload, std::size_t size) {
  return XXH3_64bits(payload, size);
}

std::string hex64(std::uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof text, "%016" PRIx64, value);
  return text;
}

std::uint16_t version_field(int number, const char* which) {
  if (number < 0 || number > std::numeric_limits<std::uint16_t>::max()) {
    throw EntryError(std::string("NVRTC ") + which + " version " + std::to_string(number) +
                     " does not fit the header's 16-bit field");
  }
  return static_cast<std::uint16_t>(number);
}

// The lowered name and the cubin after the header, checked against the sizes the header records.
void check_payload_sizes(const EntryHeader& header, std::size_t file_bytes) {
  const std::uint64_t after_header = file_bytes - kEntryHeaderBytes;
  if (header.name_bytes == 0) throw EntryError("the lowered kernel name is empty");
  if (header.name_bytes > after_header) {
    throw EntryError("truncated: the lowered name needs " + std::to_string(header.name_bytes) +
                     " bytes but only " + std::to_string(after_header) + " follow the header");
  }
  const std::uint64_t after_name = after_header - header.name_bytes;
  if (header.cubin_bytes > after_name) {
    throw EntryError("truncated: the cubin needs " + std::to_string(header.cubin_bytes) +
                     " bytes but only " + std::to_string(after_name) + " follow the name");
  }
  if (header.cubin_bytes < after_name) {
    throw EntryError(std::to_string(after_name - header.cubin_bytes) +
                     " trailing bytes after the " + std::to_string(header.cubin_bytes) +
                     "-byte cubin");
  }
}

}  // namespace

std::vector<char> encode_entry(const CacheKey& key, const nvrtc::Cubin& cubin) {
  return encode_entry(key, cubin, nvrtc::version());
}

std::vector<char> encode_entry(const CacheKey& key, const nvrtc::Cubin& cubin,
                               const nvrtc::Version& recorded_nvrtc) {
  if (cubin.lowered_name.size() > std::numeric_limits<std::uint32_t>::max()) {
    throw EntryError("the lowered kernel name is longer than the header's 32-bit length field");
  }
  const std::size_t payload_bytes = cubin.lowered_name.size() + cubin.image.size();
  std::vector<char> bytes(kEntryHeaderBytes + payload_bytes, 0);
  std::copy(std::begin(kEntryMagic), std::end(kEntryMagic), bytes.begin());
  put_little_endian<std::uint32_t>(bytes, kFormatVersionAt, kFormatVersion);
  put_little_endian<std::uint32_t>(bytes, kHeaderSizeAt, kEntryHeaderBytes);
  put_little_endian(bytes, kNvrtcMajorAt, version_field(recorded_nvrtc.major, "major"));
  put_little_endian(bytes, kNvrtcMinorAt, version_field(recorded_nvrtc.minor, "minor"));
  std::memcpy(bytes.data() + kKeyAt, key.bytes.data(), key.bytes.size());
  put_little_endian(bytes, kNameBytesAt, static_cast<std::uint32_t>(cubin.lowered_name.size()));
  put_little_endian<std::uint64_t>(bytes, kCubinBytesAt, cubin.image.size());
  char* payload = bytes.data() + kEntryHeaderBytes;
  std::memcpy(payload, cubin.lowered_name.data(), cubin.lowered_name.size());
  if (!cubin.image.empty()) {
    std::memcpy(payload + cubin.lowered_name.size(), cubin.image.data(), cubin.image.size());
  }
  put_little_endian(bytes, kChecksumAt, payload_checksum(payload, payload_bytes));
  return bytes;
}

EntryHeader decode_header(const std::vector<char>& bytes) {
  if (bytes.empty()) throw EntryError("empty file (0 bytes)");
  if (bytes.size() >= sizeof kEntryMagic &&
      std::memcmp(bytes.data(), kEntryMagic, sizeof kEntryMagic) != 0) {
    throw EntryError("not an intfa cache entry (the file does not start with \"INTFACUB\")");
  }
  if (bytes.size() < kEntryHeaderBytes) {
    throw EntryError("truncated: " + std::to_string(bytes.size()) + " bytes, shorter than the " +
                     std::to_string(kEntryHeaderBytes) + "-byte header");
  }
  EntryHeader header;
  header.format_version = get_little_endian<std::uint32_t>(bytes, kFormatVersionAt);
  if (header.format_version != kFormatVersion) {
    throw EntryError("format version " + std::to_string(header.format_version) +
                     ", this build reads version " + std::to_string(kFormatVersion));
  }
  const auto header_bytes = get_little_endian<std::uint32_t>(bytes, kHeaderSizeAt);
  if (header_bytes != kEntryHeaderBytes) {
    throw EntryError("header size " + std::to_string(header_bytes) + " bytes, expected " +
                     std::to_string(kEntryHeaderBytes));
  }
  for (const std::size_t reserved_at : {kFirstReservedAt, kSecondReservedAt}) {
    if (get_little_endian<std::uint32_t>(bytes, reserved_at) != 0) {
      throw EntryError("the reserved header field at byte " + std::to_string(reserved_at) +
                       " is not zero");
    }
  }
  header.nvrtc_version.major = get_little_endian<std::uint16_t>(bytes, kNvrtcMajorAt);
  header.nvrtc_version.minor = get_little_endian<std::uint16_t>(bytes, kNvrtcMinorAt);
  std::memcpy(header.key.bytes.data(), bytes.data() + kKeyAt, header.key.bytes.size());
  header.name_bytes = get_little_endian<std::uint32_t>(bytes, kNameBytesAt);
  header.cubin_bytes = get_little_endian<std::uint64_t>(bytes, kCubinBytesAt);
  header.checksum = get_little_endian<std::uint64_t>(bytes, kChecksumAt);
  return header;
}

nvrtc::Cubin decode_entry(const std::vector<char>& bytes, const CacheKey& expected_key) {
  return decode_entry(bytes, expected_key, nvrtc::version());
}

nvrtc::Cubin decode_entry(const std::vector<char>& bytes, const CacheKey& expected_key,
                          const nvrtc::Version& expected_nvrtc) {
  const EntryHeader header = decode_header(bytes);
  if (header.nvrtc_version != expected_nvrtc) {
    throw EntryError("built by NVRTC " + header.nvrtc_version.to_string() +
                     ", this process uses NVRTC " + expected_nvrtc.to_string());
  }
  if (header.key != expected_key) {
    throw EntryError("the header holds key " + header.key.hex() + ", expected " +
                     expected_key.hex());
  }
  check_payload_sizes(header, bytes.size());
  const char* payload = bytes.data() + kEntryHeaderBytes;
  const std::size_t payload_bytes = bytes.size() - kEntryHeaderBytes;
  const std::uint64_t actual_checksum = payload_checksum(payload, payload_bytes);
  if (actual_checksum != header.checksum) {
    throw EntryError("checksum mismatch: the header records " + hex64(header.checksum) +
                     ", the contents hash to " + hex64(actual_checksum));
  }
  nvrtc::Cubin cubin;
  cubin.lowered_name.assign(payload, header.name_bytes);
  cubin.image.assign(payload + header.name_bytes, payload + payload_bytes);
  if (!nvrtc::cubin_sm_number(cubin.image)) {
    throw EntryError("the payload is not a CUDA cubin (no ELF header for machine EM_CUDA)");
  }
  return cubin;
}

}  // namespace intfa::cache
