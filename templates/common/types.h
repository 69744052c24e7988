// Fixed-width integer names usable from NVRTC (which has no <cstdint>) and from host code that
// shares parameter structs with the kernels. An include guard, not #pragma once: the build
// installs a copy beside intfa/kernel_enums.h, and a unit may reach both.
#ifndef INTFA_KERNEL_TYPES_H
#define INTFA_KERNEL_TYPES_H

// Functions shared by host code and kernels (layout arithmetic) are written once with this.
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define INTFA_HOST_DEVICE __host__ __device__
#else
#define INTFA_HOST_DEVICE
#endif

namespace intfa {
namespace kernels {

using i8 = signed char;
using u8 = unsigned char;
using i16 = short;
using u16 = unsigned short;
using i32 = int;
using u32 = unsigned int;
using i64 = long long;
using u64 = unsigned long long;

static_assert(sizeof(i64) == 8 && sizeof(i32) == 4 && sizeof(i16) == 2, "unexpected data model");

}  // namespace kernels
}  // namespace intfa

#endif  // INTFA_KERNEL_TYPES_H
