#include <cstring>

#include "reference/half.hpp"

namespace intfa::reference {
namespace {

std::uint32_t float_bits(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

float bits_float(std::uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

}  // namespace

std::uint16_t float_to_f16_bits(float value) {
  const std::uint32_t bits = float_bits(value);
  const std::uint32_t sign = (bits >> 16) & 0x8000u;
  const std::uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) return static_cast<std::uint16_t>(sign | 0x7E00u);  // NaN
  if (magnitude >= 0x477FF000u) return static_cast<std::uint16_t>(sign | 0x7C00u);  // >= 65520
  if (magnitude < 0x38800000u) {
    // Subnormal half (or zero): the value in units of 2^-24, rounded to nearest even.
    if (magnitude < 0x33000000u) return static_cast<std::uint16_t>(sign);  // < 2^-25
    const std::uint32_t exponent = magnitude >> 23;
    const std::uint32_t mantissa = (magnitude & 0x7FFFFFu) | 0x800000u;
    const std::uint32_t shift = 126 - exponent;  // 14..24 for exponents 112..102
    std::uint32_t half = mantissa >> shift;
    const std::uint32_t remainder = mantissa & ((1u << shift) - 1);
    const std::uint32_t halfway = 1u << (shift - 1);
    if (remainder > halfway || (remainder == halfway && (half & 1u))) ++half;
    return static_cast<std::uint16_t>(sign | half);
  }
  // Normal: rebias the exponent and round the 13 dropped mantissa bits to nearest even.
  std::uint32_t half = ((magnitude - 0x38000000u) >> 13);
  const std::uint32_t remainder = magnitude & 0x1FFFu;
  if (remainder > 0x1000u || (remainder == 0x1000u && (half & 1u))) ++half;
  return static_cast<std::uint16_t>(sign | half);
}

float f16_bits_to_float(std::uint16_t bits) {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  const std::uint32_t exponent = (bits >> 10) & 0x1Fu;
  std::uint32_t mantissa = bits & 0x3FFu;
  if (exponent == 0x1F) return bits_float(sign | 0x7F800000u | (mantissa << 13));
  if (exponent == 0) {
    if (mantissa == 0) return bits_float(sign);
    // Subnormal: value = mantissa * 2^-24, exactly representable in float.
    const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-08f;
    return sign ? -magnitude : magnitude;
  }
  return bits_float(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

std::uint16_t float_to_bf16_bits(float value) {
  const std::uint32_t bits = float_bits(value);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40u);
  const std::uint32_t rounding = 0x7FFFu + ((bits >> 16) & 1u);  // nearest, ties to even
  return static_cast<std::uint16_t>((bits + rounding) >> 16);
}

float bf16_bits_to_float(std::uint16_t bits) {
  return bits_float(static_cast<std::uint32_t>(bits) << 16);
}

float round_to_16bit(float value, bool bf16) {
  return bf16 ? bf16_bits_to_float(float_to_bf16_bits(value))
              : f16_bits_to_float(float_to_f16_bits(value));
}

}  // namespace intfa::reference
