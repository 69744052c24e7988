// IEEE binary16 and bfloat16 conversions done on the bits, so that they do not depend on the
// compiler's or the CPU's support for 16-bit floats.
#include "reference/half.hpp"

#include <cstring>

namespace intfa::reference {
namespace {

constexpr std::uint32_t kFloatSignBit = 0x80000000u;
constexpr std::uint32_t kFloatMagnitudeBits = 0x7FFFFFFFu;
constexpr std::uint32_t kFloatInfinityBits = 0x7F800000u;
constexpr std::uint16_t kF16InfinityBits = 0x7C00u;
constexpr std::uint16_t kF16QuietBit = 0x0200u;
constexpr std::uint16_t kBf16QuietBit = 0x0040u;

std::uint32_t bits_of(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

float float_of(std::uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// `value >> shift`, rounded to nearest with ties to even (shift in 1..31).
std::uint32_t shift_right_rounding_to_even(std::uint32_t value, std::uint32_t shift) {
  const std::uint32_t kept = value >> shift;
  const std::uint32_t dropped = value & ((1u << shift) - 1u);
  const std::uint32_t halfway = 1u << (shift - 1u);
  const bool round_up = dropped > halfway || (dropped == halfway && (kept & 1u) != 0);
  return kept + (round_up ? 1u : 0u);
}

// A finite or infinite float magnitude (sign cleared) as half bits.
std::uint16_t f16_magnitude_bits(std::uint32_t magnitude) {
  // Float exponents 113.. map onto normal halves; the rebias subtracts 112 << 23.
  constexpr std::uint32_t kSmallestNormalHalf = 113u << 23;  // 2^-14
  // The midpoint between 65504 (the largest half) and 65536: ties go to the even 65536 = inf.
  constexpr std::uint32_t kFirstOverflow = 0x477FF000u;  // 65520
  if (magnitude >= kFirstOverflow) return kF16InfinityBits;
  if (magnitude >= kSmallestNormalHalf) {
    // The 13 dropped mantissa bits round into the kept ones; a carry correctly bumps the
    // exponent (and 65504 < x < 65520 cannot carry into infinity).
    return static_cast<std::uint16_t>(shift_right_rounding_to_even(magnitude - (112u << 23), 13));
  }
  // Subnormal half: the value in units of 2^-24 with the implicit bit made explicit. Below 2^-25
  // (exponent < 102) everything rounds to zero; 2^-25 itself is a tie that goes to even zero.
  const std::uint32_t exponent = magnitude >> 23;
  if (exponent < 102) return 0;
  const std::uint32_t mantissa = (magnitude & 0x7FFFFFu) | 0x800000u;
  return static_cast<std::uint16_t>(shift_right_rounding_to_even(mantissa, 126u - exponent));
}

}  // namespace

std::uint16_t float_to_f16_bits(float value) {
  const std::uint32_t bits = bits_of(value);
  const auto sign = static_cast<std::uint16_t>((bits & kFloatSignBit) >> 16);
  const std::uint32_t magnitude = bits & kFloatMagnitudeBits;
  if (magnitude > kFloatInfinityBits) {
    // NaN stays NaN (quieted), keeping the top of its payload as the hardware does.
    return static_cast<std::uint16_t>(sign | kF16InfinityBits | kF16QuietBit |
                                      ((magnitude >> 13) & 0x3FFu));
  }
  return static_cast<std::uint16_t>(sign | f16_magnitude_bits(magnitude));
}

float f16_bits_to_float(std::uint16_t bits) {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  const std::uint32_t exponent = (bits >> 10) & 0x1Fu;
  const std::uint32_t mantissa = bits & 0x3FFu;
  if (exponent == 0x1F) return float_of(sign | kFloatInfinityBits | (mantissa << 13));
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24, exact in float.
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return float_of(sign | bits_of(magnitude));
  }
  return float_of(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

std::uint16_t float_to_bf16_bits(float value) {
  const std::uint32_t bits = bits_of(value);
  if ((bits & kFloatMagnitudeBits) > kFloatInfinityBits) {
    return static_cast<std::uint16_t>((bits >> 16) | kBf16QuietBit);
  }
  // bfloat16 is the top half of a float: round the low 16 bits away. A carry moves into the
  // exponent, and the largest finite values round up to infinity, as IEEE rounding requires.
  return static_cast<std::uint16_t>(shift_right_rounding_to_even(bits, 16));
}

float bf16_bits_to_float(std::uint16_t bits) {
  return float_of(static_cast<std::uint32_t>(bits) << 16);
}

std::uint16_t float_to_16bit_bits(float value, bool bf16) {
  return bf16 ? float_to_bf16_bits(value) : float_to_f16_bits(value);
}

float round_to_16bit(float value, bool bf16) {
  return bf16 ? bf16_bits_to_float(float_to_bf16_bits(value))
              : f16_bits_to_float(float_to_f16_bits(value));
}

}  // namespace intfa::reference
