// IEEE half and bfloat16 on the CPU: round-to-nearest-even conversions from float, exact ones back.
#pragma once

#include <cstdint>

namespace intfa::reference {

std::uint16_t float_to_f16_bits(float value);
float f16_bits_to_float(std::uint16_t bits);
std::uint16_t float_to_bf16_bits(float value);
float bf16_bits_to_float(std::uint16_t bits);

// Round a float to the nearest representable 16-bit value of the given kind (bf16 when `bf16`).
float round_to_16bit(float value, bool bf16);
// Its bits (float_to_bf16_bits or float_to_f16_bits).
std::uint16_t float_to_16bit_bits(float value, bool bf16);

}  // namespace intfa::reference
