// The 16-bit conversions every output comparison goes through: known bit patterns, and every tie
// of both formats rounding to even.
#include "reference/half.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace intfa::reference {
namespace {

float float_from_bits(std::uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

bool is_f16_nan(std::uint16_t bits) {
  return (bits & 0x7C00u) == 0x7C00u && (bits & 0x3FFu) != 0;
}

TEST(HalfConversion, KnownF16BitPatterns) {
  EXPECT_EQ(float_to_f16_bits(1.0f), 0x3C00u);
  EXPECT_EQ(float_to_f16_bits(-2.0f), 0xC000u);
  EXPECT_EQ(float_to_f16_bits(0.5f), 0x3800u);
  EXPECT_EQ(float_to_f16_bits(65504.0f), 0x7BFFu);  // the largest finite half
  EXPECT_EQ(float_to_f16_bits(0x1p-14f), 0x0400u);  // the smallest normal
  EXPECT_EQ(float_to_f16_bits(0x1p-24f), 0x0001u);  // the smallest subnormal
  EXPECT_EQ(float_to_f16_bits(0.0f), 0x0000u);
  EXPECT_EQ(float_to_f16_bits(-0.0f), 0x8000u);
  EXPECT_EQ(float_to_f16_bits(std::numeric_limits<float>::infinity()), 0x7C00u);
  EXPECT_EQ(float_to_f16_bits(-std::numeric_limits<float>::infinity()), 0xFC00u);
  EXPECT_EQ(f16_bits_to_float(0x3C00u), 1.0f);
  EXPECT_EQ(f16_bits_to_float(0x7BFFu), 65504.0f);
  EXPECT_EQ(f16_bits_to_float(0x0001u), 0x1p-24f);
  EXPECT_EQ(f16_bits_to_float(0x83FFu), -1023.0f * 0x1p-24f);
}

TEST(HalfConversion, F16RoundsTiesToEvenAndOverflowsToInfinity) {
  // 1 + 2^-11 lies halfway between 1 and 1 + 2^-10: the even neighbour is 1.
  EXPECT_EQ(float_to_f16_bits(1.0f + 0x1p-11f), 0x3C00u);
  // 1 + 3 * 2^-11 lies halfway between 1 + 2^-10 (odd) and 1 + 2^-9 (even).
  EXPECT_EQ(float_to_f16_bits(1.0f + 3 * 0x1p-11f), 0x3C02u);
  EXPECT_EQ(float_to_f16_bits(std::nextafter(1.0f + 0x1p-11f, 2.0f)), 0x3C01u);
  EXPECT_EQ(float_to_f16_bits(0x1p-25f), 0x0000u);  // half the smallest subnormal: to even zero
  EXPECT_EQ(float_to_f16_bits(std::nextafter(0x1p-25f, 1.0f)), 0x0001u);
  EXPECT_EQ(float_to_f16_bits(3 * 0x1p-25f), 0x0002u);  // 1.5 subnormal units: to even 2
  EXPECT_EQ(float_to_f16_bits(65519.0f), 0x7BFFu);
  EXPECT_EQ(float_to_f16_bits(65520.0f), 0x7C00u);  // the tie above 65504 goes to "65536" = inf
  EXPECT_EQ(float_to_f16_bits(-1e10f), 0xFC00u);
  EXPECT_EQ(float_to_f16_bits(1e-30f), 0x0000u);
}

TEST(HalfConversion, NanStaysNanWithItsSign) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(is_f16_nan(float_to_f16_bits(nan)));
  EXPECT_TRUE(is_f16_nan(float_to_f16_bits(-nan)));
  EXPECT_EQ(float_to_f16_bits(-nan) & 0x8000u, 0x8000u);
  // A NaN whose payload lives only in the low 13 bits must not become infinity.
  EXPECT_TRUE(is_f16_nan(float_to_f16_bits(float_from_bits(0x7F800001u))));
  EXPECT_TRUE(std::isnan(f16_bits_to_float(0x7E00u)));
  EXPECT_TRUE(std::isnan(f16_bits_to_float(0x7C01u)));
  EXPECT_TRUE(std::isnan(round_to_16bit(nan, false)));
  EXPECT_TRUE(std::isnan(round_to_16bit(nan, true)));
  EXPECT_TRUE(std::isnan(bf16_bits_to_float(float_to_bf16_bits(float_from_bits(0x7F800001u)))));
}

TEST(HalfConversion, EveryF16PatternRoundTripsThroughFloat) {
  for (std::uint32_t bits = 0; bits <= 0xFFFFu; ++bits) {
    const auto half = static_cast<std::uint16_t>(bits);
    const float value = f16_bits_to_float(half);
    if (is_f16_nan(half)) {
      ASSERT_TRUE(std::isnan(value)) << std::hex << bits;
      const std::uint16_t back = float_to_f16_bits(value);
      ASSERT_TRUE(is_f16_nan(back)) << std::hex << bits;
      ASSERT_EQ(back & 0x8000u, half & 0x8000u) << std::hex << bits;
      continue;
    }
    ASSERT_EQ(float_to_f16_bits(value), half) << std::hex << bits;
  }
}

// Between every two neighbouring finite halves a and b (a < b in magnitude), the midpoint rounds
// to the one with the even mantissa, and anything nearer rounds to the nearer one.
TEST(HalfConversion, EveryF16MidpointRoundsToEven) {
  for (std::uint16_t lower = 0; lower < 0x7C00u; ++lower) {
    const auto upper = static_cast<std::uint16_t>(lower + 1);
    const double a = f16_bits_to_float(lower);
    const double b = upper == 0x7C00u ? 65536.0 : f16_bits_to_float(upper);
    const auto midpoint = static_cast<float>((a + b) / 2);  // exact: 12 significant bits
    ASSERT_EQ(static_cast<double>(midpoint), (a + b) / 2);
    const std::uint16_t even = (lower & 1u) == 0 ? lower : upper;
    ASSERT_EQ(float_to_f16_bits(midpoint), even) << std::hex << lower;
    ASSERT_EQ(float_to_f16_bits(-midpoint), even | 0x8000u) << std::hex << lower;
    ASSERT_EQ(float_to_f16_bits(std::nextafter(midpoint, 0.0f)), lower) << std::hex << lower;
    ASSERT_EQ(float_to_f16_bits(std::nextafter(midpoint, 1e9f)), upper) << std::hex << lower;
  }
}

TEST(HalfConversion, KnownBf16BitPatterns) {
  EXPECT_EQ(float_to_bf16_bits(1.0f), 0x3F80u);
  EXPECT_EQ(float_to_bf16_bits(-2.0f), 0xC000u);
  EXPECT_EQ(float_to_bf16_bits(float_from_bits(0x00010000u)), 0x0001u);       // smallest subnormal
  EXPECT_EQ(float_to_bf16_bits(float_from_bits(0x00008000u)), 0x0000u);       // its half: even zero
  EXPECT_EQ(float_to_bf16_bits(float_from_bits(0x00018000u)), 0x0002u);       // 1.5 units: even 2
  EXPECT_EQ(float_to_bf16_bits(1.0f + 0x1p-8f), 0x3F80u);                     // tie: even 1.0
  EXPECT_EQ(float_to_bf16_bits(1.0f + 3 * 0x1p-8f), 0x3F82u);                 // tie: even 1 + 2^-6
  EXPECT_EQ(float_to_bf16_bits(std::numeric_limits<float>::max()), 0x7F80u);  // rounds to inf
  EXPECT_EQ(float_to_bf16_bits(-std::numeric_limits<float>::max()), 0xFF80u);
  EXPECT_EQ(float_to_bf16_bits(std::numeric_limits<float>::infinity()), 0x7F80u);
  EXPECT_EQ(bf16_bits_to_float(0x3F80u), 1.0f);
  EXPECT_EQ(bf16_bits_to_float(0x7F7Fu), float_from_bits(0x7F7F0000u));
}

TEST(HalfConversion, EveryBf16MidpointRoundsToEven) {
  for (std::uint16_t lower = 0; lower < 0x7F80u; ++lower) {
    const auto upper = static_cast<std::uint16_t>(lower + 1);
    // The midpoint's float has the 16 dropped bits 0x8000: exact.
    const float midpoint = float_from_bits((static_cast<std::uint32_t>(lower) << 16) | 0x8000u);
    const std::uint16_t even = (lower & 1u) == 0 ? lower : upper;
    ASSERT_EQ(float_to_bf16_bits(midpoint), even) << std::hex << lower;
    ASSERT_EQ(float_to_bf16_bits(-midpoint), even | 0x8000u) << std::hex << lower;
    ASSERT_EQ(float_to_bf16_bits(std::nextafter(midpoint, 0.0f)), lower) << std::hex << lower;
    ASSERT_EQ(float_to_bf16_bits(std::nextafter(midpoint, std::numeric_limits<float>::infinity())),
              upper)
        << std::hex << lower;
  }
}

TEST(HalfConversion, RoundTo16BitPicksTheFormat) {
  const float value = 1.0f + 0x1p-9f;  // exact in f16 (10 fraction bits), not in bf16 (7)
  EXPECT_EQ(round_to_16bit(value, false), value);
  EXPECT_EQ(round_to_16bit(value, true), 1.0f);
  EXPECT_EQ(round_to_16bit(100000.0f, false), std::numeric_limits<float>::infinity());
  EXPECT_EQ(round_to_16bit(100000.0f, true), 99840.0f);  // 0x47C3 = 1.5234375 * 2^16
}

}  // namespace
}  // namespace intfa::reference
