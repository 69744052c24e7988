// The entry file format (cache/README.md, "Entry format"): what encode_entry writes, and that
// decode_entry accepts exactly that and refuses every damaged variant with a reason.
#include "cache/entry_format.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cache/cache_test_support.hpp"

namespace intfa::cache {
namespace {

using intfa::testing::fake_cubin;
using intfa::testing::test_key;

const CacheKey kKey = test_key(0x10);

// What decode_entry says about `bytes`, or "" when it accepts them.
std::string decode_problem(const std::vector<char>& bytes, const CacheKey& key = kKey) {
  try {
    decode_entry(bytes, key);
    return "";
  } catch (const EntryError& error) {
    return error.what();
  }
}

void expect_refused(const std::vector<char>& bytes, const std::string& reason_part) {
  const std::string problem = decode_problem(bytes);
  ASSERT_FALSE(problem.empty()) << "accepted bytes that should mention '" << reason_part << "'";
  EXPECT_NE(problem.find(reason_part), std::string::npos) << problem;
}

template <typename Unsigned>
Unsigned field_at(const std::vector<char>& bytes, std::size_t offset) {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < sizeof(Unsigned); ++i) {
    value |= std::uint64_t{static_cast<unsigned char>(bytes[offset + i])} << (8 * i);
  }
  return static_cast<Unsigned>(value);
}

template <typename Unsigned>
void set_field(std::vector<char>& bytes, std::size_t offset, Unsigned value) {
  for (std::size_t i = 0; i < sizeof(Unsigned); ++i) {
    bytes[offset + i] = static_cast<char>(static_cast<unsigned char>(value >> (8 * i)));
  }
}

TEST(EntryFormat, RoundTripsTheCubinAndItsLoweredName) {
  const nvrtc::Cubin cubin = fake_cubin(86, 1000);
  const nvrtc::Cubin decoded = decode_entry(encode_entry(kKey, cubin), kKey);
  EXPECT_EQ(decoded, cubin);
  EXPECT_EQ(decoded.lowered_name, cubin.lowered_name);
  EXPECT_EQ(nvrtc::cubin_sm_number(decoded.image), 86);
}

TEST(EntryFormat, WritesTheDocumentedLittleEndianHeader) {
  const nvrtc::Cubin cubin = fake_cubin();
  const std::vector<char> bytes = encode_entry(kKey, cubin, {12, 8});
  ASSERT_EQ(bytes.size(), 64 + cubin.lowered_name.size() + cubin.image.size());
  EXPECT_EQ(std::string(bytes.data(), 8), "INTFACUB");
  EXPECT_EQ(field_at<std::uint32_t>(bytes, 8), kFormatVersion);
  EXPECT_EQ(field_at<std::uint32_t>(bytes, 12), 64u);
  EXPECT_EQ(field_at<std::uint16_t>(bytes, 16), 12u);
  EXPECT_EQ(field_at<std::uint16_t>(bytes, 18), 8u);
  EXPECT_EQ(field_at<std::uint32_t>(bytes, 20), 0u);
  EXPECT_EQ(std::memcmp(bytes.data() + 24, kKey.bytes.data(), 16), 0);
  EXPECT_EQ(field_at<std::uint32_t>(bytes, 40), cubin.lowered_name.size());
  EXPECT_EQ(field_at<std::uint32_t>(bytes, 44), 0u);
  EXPECT_EQ(field_at<std::uint64_t>(bytes, 48), cubin.image.size());
  EXPECT_EQ(std::string(bytes.data() + 64, cubin.lowered_name.size()), cubin.lowered_name);
  EXPECT_EQ(std::memcmp(bytes.data() + 64 + cubin.lowered_name.size(), cubin.image.data(),
                        cubin.image.size()),
            0);
  const EntryHeader header = decode_header(bytes);
  EXPECT_EQ(header.checksum, field_at<std::uint64_t>(bytes, 56));
  EXPECT_EQ(header.nvrtc_version.to_string(), "12.8");
}

TEST(EntryFormat, RefusesEveryTruncation) {
  const std::vector<char> bytes = encode_entry(kKey, fake_cubin());
  const std::size_t name_end = 64 + fake_cubin().lowered_name.size();
  for (const std::size_t length : {std::size_t{1}, std::size_t{7}, std::size_t{8}, std::size_t{40},
                                   std::size_t{63}, std::size_t{64}, std::size_t{65}, name_end - 1,
                                   name_end, name_end + 1, bytes.size() / 2, bytes.size() - 1}) {
    const std::vector<char> truncated(bytes.begin(), bytes.begin() + length);
    EXPECT_NE(decode_problem(truncated), "") << "accepted the first " << length << " bytes";
  }
  expect_refused({bytes.begin(), bytes.begin() + 63}, "truncated");
  expect_refused({bytes.begin(), bytes.end() - 1}, "truncated");
}

TEST(EntryFormat, RefusesEverySingleFlippedByte) {
  const std::vector<char> bytes = encode_entry(kKey, fake_cubin(80, 300));
  // Every position: header, name and cubin; a low and a high bit, so each field sees two values.
  for (std::size_t position = 0; position < bytes.size(); ++position) {
    for (const unsigned char mask : {0x01, 0x80}) {
      std::vector<char> flipped = bytes;
      flipped[position] = static_cast<char>(flipped[position] ^ mask);
      EXPECT_NE(decode_problem(flipped), "")
          << "accepted a flip of bit mask " << int{mask} << " at byte " << position;
    }
  }
}

TEST(EntryFormat, RefusesAnEmptyFile) {
  expect_refused({}, "empty");
}

TEST(EntryFormat, RefusesForeignBytes) {
  expect_refused(fake_cubin().image, "not an intfa cache entry");  // a bare cubin
  const std::string text = "#!/bin/sh\necho this is not a cache entry\n";
  expect_refused({text.begin(), text.end()}, "not an intfa cache entry");
  expect_refused({'I', 'N', 'T'}, "truncated");
}

TEST(EntryFormat, RefusesAnotherFormatVersion) {
  std::vector<char> bytes = encode_entry(kKey, fake_cubin());
  set_field<std::uint32_t>(bytes, 8, kFormatVersion + 1);
  expect_refused(bytes, "format version " + std::to_string(kFormatVersion + 1));
}

TEST(EntryFormat, RefusesAnotherHeaderSize) {
  std::vector<char> bytes = encode_entry(kKey, fake_cubin());
  set_field<std::uint32_t>(bytes, 12, 72);
  expect_refused(bytes, "header size 72");
}

TEST(EntryFormat, RefusesNonZeroReservedFields) {
  for (const std::size_t offset : {20, 44}) {
    std::vector<char> bytes = encode_entry(kKey, fake_cubin());
    set_field<std::uint32_t>(bytes, offset, 1);
    expect_refused(bytes, "reserved");
  }
}

TEST(EntryFormat, RefusesAnEntryOfAnotherNvrtcVersion) {
  const nvrtc::Version running = nvrtc::version();
  const nvrtc::Version other{running.major, running.minor + 1};
  const std::vector<char> bytes = encode_entry(kKey, fake_cubin(), other);
  expect_refused(bytes, "NVRTC " + other.to_string());
  EXPECT_EQ(decode_entry(bytes, kKey, other), fake_cubin());
}

TEST(EntryFormat, RefusesAKeyOtherThanTheExpectedOne) {
  const std::vector<char> bytes = encode_entry(kKey, fake_cubin());
  EXPECT_NE(decode_problem(bytes, test_key(0x11)).find(kKey.hex()), std::string::npos);
}

TEST(EntryFormat, RefusesTrailingBytes) {
  std::vector<char> bytes = encode_entry(kKey, fake_cubin());
  bytes.push_back('\0');
  expect_refused(bytes, "1 trailing bytes");
}

TEST(EntryFormat, RefusesSizesThatDisagreeWithTheFile) {
  std::vector<char> long_name = encode_entry(kKey, fake_cubin());
  set_field<std::uint32_t>(long_name, 40, std::numeric_limits<std::uint32_t>::max());
  expect_refused(long_name, "lowered name needs");
  std::vector<char> huge_cubin = encode_entry(kKey, fake_cubin());
  set_field<std::uint64_t>(huge_cubin, 48, std::numeric_limits<std::uint64_t>::max());
  expect_refused(huge_cubin, "cubin needs");
  std::vector<char> empty_name = encode_entry(kKey, fake_cubin());
  set_field<std::uint32_t>(empty_name, 40, 0);
  expect_refused(empty_name, "name is empty");
}

TEST(EntryFormat, RefusesAChecksumMismatch) {
  std::vector<char> bytes = encode_entry(kKey, fake_cubin());
  bytes.back() = static_cast<char>(bytes.back() ^ 0x04);
  expect_refused(bytes, "checksum mismatch");
}

TEST(EntryFormat, RefusesAPayloadThatIsNotACudaElf) {
  nvrtc::Cubin not_elf = fake_cubin();
  not_elf.image[1] = 'X';
  expect_refused(encode_entry(kKey, not_elf), "not a CUDA cubin");
  nvrtc::Cubin x86_elf = fake_cubin();
  x86_elf.image[18] = 62;  // EM_X86_64
  expect_refused(encode_entry(kKey, x86_elf), "not a CUDA cubin");
  nvrtc::Cubin tiny = fake_cubin();
  tiny.image.resize(20);
  expect_refused(encode_entry(kKey, tiny), "not a CUDA cubin");
}

// A small in-test fuzzer: random bytes, and valid entries with random header fields and random
// lengths, must be refused or accepted, never crash or read out of bounds (run under
// INTFA_SANITIZE=ON to check the latter).
TEST(EntryFormat, SurvivesArbitraryBytes) {
  std::mt19937_64 random(20240601);
  const std::vector<char> valid = encode_entry(kKey, fake_cubin(80, 128));
  std::size_t accepted = 0;
  for (int round = 0; round < 20000; ++round) {
    std::vector<char> bytes;
    if (round % 2 == 0) {
      bytes.resize(random() % 300);
      for (char& byte : bytes) byte = static_cast<char>(random());
      if (bytes.size() >= 8 && round % 4 == 0) std::memcpy(bytes.data(), "INTFACUB", 8);
    } else {
      bytes = valid;
      const int edits = 1 + static_cast<int>(random() % 4);
      for (int edit = 0; edit < edits; ++edit) {
        bytes[random() % bytes.size()] = static_cast<char>(random());
      }
      bytes.resize(random() % (bytes.size() + 16));
    }
    try {
      decode_entry(bytes, kKey);
      if (bytes != valid) ++accepted;
    } catch (const EntryError&) {
    }
  }
  EXPECT_EQ(accepted, 0u) << "damaged entries passed every check";
}

}  // namespace
}  // namespace intfa::cache
