// Warpgroup-level tensor-core MMAs of sm_90a (PTX ISA "Asynchronous Warpgroup Level Matrix
// Multiply-Accumulate"): the shared-memory matrix descriptors, the fences around an async MMA, and
// the INT8 shapes the attention kernels use. The accumulator layout of m64nN is the m16n8 one per
// warp: warp w of the warpgroup holds rows 16w..16w+15, and d[j] is the n8 tile j
// (d[j][0..1]: row group, cols 8j + 2*thread_in_group + {0,1}; d[j][2..3]: row group + 8).
// An 8-bit A operand in registers has the m16n8k32 layout of common/mma.cuh.
#pragma once

#include "common/types.h"

namespace intfa {
namespace kernels {

// Descriptor of a K-major tile whose rows are RowBytes (64 or 128) bytes, stored with the
// matching TMA swizzle, 8-row groups contiguous. The tile must start on a 1024-byte boundary (the
// swizzle repeats there, so the descriptor's base offset is zero).
//
// Kept as its two words: the low one holds the start address (in 16-byte units, bits 0..13) and
// the constant leading byte offset, the high one only constants (stride byte offset: one 8-row
// group; layout type). The descriptor of a tile at a known distance from another is therefore
// that one's low word plus the distance in 16-byte units: the address field cannot carry into the
// next field, since shared memory is smaller than 256 KB. Advancing k by 32 bytes inside a row
// adds 2 units. A kernel takes the low words of its tiles once and adds one uniform offset per
// wgmma, instead of masking, shifting and or-ing an address each time.
template <int RowBytes>
struct SharedTileDescriptor {
  static_assert(RowBytes == 64 || RowBytes == 128, "64- or 128-byte swizzled rows");
  static constexpr u32 kSwizzle = RowBytes == 128 ? 1 : 2;  // layout type: 1 = 128B, 2 = 64B
  static constexpr u32 kGroupStride = 8 * RowBytes;          // stride byte offset: one 8-row group
  static constexpr u32 kHighWord = (kGroupStride >> 4) | (kSwizzle << 30);

  __device__ __forceinline__ static u32 low_word(u32 address) {
    return ((address & 0x3FFFF) >> 4) | (1u << 16);
  }
  // The descriptor of the tile `units` 16-byte units past the one whose low word is `low`.
  __device__ __forceinline__ static u64 at(u32 low, u32 units) {
    return (static_cast<u64>(kHighWord) << 32) | (low + units);
  }
};

// Descriptor of an MN-major tile of 16-bit elements (the B operand V of half-INT8 P.V: rows are
// keys, the k dimension, and each row holds 64 channels, the n dimension, in 128 bytes), stored
// with the 128-byte TMA swizzle as slabs of 64 channels, `SlabBytes` apart. In the canonical
// MN-major layout ((8 x 16 B, n), (8 rows, k)) the leading byte offset steps n (to the next
// slab) and the stride byte offset steps k by 8 rows (1024 bytes). A k16 step adds 16 rows,
// 2048 bytes (128 units); like SharedTileDescriptor, a tile's descriptor is its low word plus an
// offset in 16-byte units.
template <int SlabBytes>
struct MnMajorTileDescriptor {
  static_assert(SlabBytes % 1024 == 0 && SlabBytes / 16 < (1 << 14), "slabs of whole 8-row groups");
  static constexpr u32 kHighWord = (1024u >> 4) | (1u << 30);  // SBO: 8 rows; 128B swizzle
  static constexpr u32 kUnitsPerK16 = 16 * 128 / 16;

  __device__ __forceinline__ static u32 low_word(u32 address) {
    return ((address & 0x3FFFF) >> 4) | (static_cast<u32>(SlabBytes >> 4) << 16);
  }
  __device__ __forceinline__ static u64 at(u32 low, u32 units) {
    return (static_cast<u64>(kHighWord) << 32) | (low + units);
  }
};

template <int RowBytes>
__device__ __forceinline__ u64 smem_descriptor(u32 address) {
  using Descriptor = SharedTileDescriptor<RowBytes>;
  return Descriptor::at(Descriptor::low_word(address), 0);
}

// Orders earlier register writes (accumulators, register A operands) before the next wgmma.
// Orders this thread's ordinary (generic-proxy) stores to shared memory before later reads of it
// by the async proxy (wgmma's shared-memory operands, TMA stores): needed where threads, not TMA,
// write a tile that wgmma reads (PTX ISA, "fence.proxy.async").
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

// Waits until at most `Pending` committed wgmma groups of this warpgroup are in flight.
template <int Pending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(Pending) : "memory");
}

// Keeps the compiler from moving reads or writes of an async MMA's registers (accumulators, or a
// register A operand) across the wait that completes it, and from reusing them before it.
template <class Word, int Tiles>
__device__ __forceinline__ void wgmma_pin(Word (&d)[Tiles][4]) {
#pragma unroll
  for (int j = 0; j < Tiles; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) asm volatile("" : "+r"(d[j][i])::"memory");
}

template <int Tiles>
__device__ __forceinline__ void wgmma_pin(float (&d)[Tiles][4]) {
#pragma unroll
  for (int j = 0; j < Tiles; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) asm volatile("" : "+f"(d[j][i])::"memory");
}

// The accumulator operands of m64n64 (d[8][4]: %0..%31) and m64n128 (d[16][4]: %0..%63), as the
// register list of the instruction and as "+r" asm operands; the instruction's other operands are
// numbered after them.
#define INTFA_WGMMA_N64_ACCUMULATOR_LIST                                                           \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "   \
    "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"

#define INTFA_WGMMA_N128_ACCUMULATOR_LIST                                                          \
    INTFA_WGMMA_N64_ACCUMULATOR_LIST                                                               \
    ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, " \
    "%50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"

#define INTFA_WGMMA_N64_ACCUMULATOR(d)                                                             \
    "+r"(d[0][0]), "+r"(d[0][1]), "+r"(d[0][2]), "+r"(d[0][3]), "+r"(d[1][0]), "+r"(d[1][1]),      \
    "+r"(d[1][2]), "+r"(d[1][3]), "+r"(d[2][0]), "+r"(d[2][1]), "+r"(d[2][2]), "+r"(d[2][3]),      \
    "+r"(d[3][0]), "+r"(d[3][1]), "+r"(d[3][2]), "+r"(d[3][3]), "+r"(d[4][0]), "+r"(d[4][1]),      \
    "+r"(d[4][2]), "+r"(d[4][3]), "+r"(d[5][0]), "+r"(d[5][1]), "+r"(d[5][2]), "+r"(d[5][3]),      \
    "+r"(d[6][0]), "+r"(d[6][1]), "+r"(d[6][2]), "+r"(d[6][3]), "+r"(d[7][0]), "+r"(d[7][1]),      \
    "+r"(d[7][2]), "+r"(d[7][3])

#define INTFA_WGMMA_N128_ACCUMULATOR(d)                                                            \
    INTFA_WGMMA_N64_ACCUMULATOR(d),                                                                \
    "+r"(d[8][0]), "+r"(d[8][1]), "+r"(d[8][2]), "+r"(d[8][3]), "+r"(d[9][0]), "+r"(d[9][1]),      \
    "+r"(d[9][2]), "+r"(d[9][3]), "+r"(d[10][0]), "+r"(d[10][1]), "+r"(d[10][2]),                  \
    "+r"(d[10][3]), "+r"(d[11][0]), "+r"(d[11][1]), "+r"(d[11][2]), "+r"(d[11][3]),                \
    "+r"(d[12][0]), "+r"(d[12][1]), "+r"(d[12][2]), "+r"(d[12][3]), "+r"(d[13][0]),                \
    "+r"(d[13][1]), "+r"(d[13][2]), "+r"(d[13][3]), "+r"(d[14][0]), "+r"(d[14][1]),                \
    "+r"(d[14][2]), "+r"(d[14][3]), "+r"(d[15][0]), "+r"(d[15][1]), "+r"(d[15][2]),                \
    "+r"(d[15][3])

// The same register lists with FP32 accumulators ("+f").
#define INTFA_WGMMA_N64_F32_ACCUMULATOR(d)                                                         \
    "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),      \
    "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),      \
    "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]),      \
    "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]),      \
    "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),      \
    "+f"(d[7][2]), "+f"(d[7][3])

#define INTFA_WGMMA_N128_F32_ACCUMULATOR(d)                                                        \
    INTFA_WGMMA_N64_F32_ACCUMULATOR(d),                                                            \
    "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]),      \
    "+f"(d[9][2]), "+f"(d[9][3]), "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]),                  \
    "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]),                \
    "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]), "+f"(d[13][0]),                \
    "+f"(d[13][1]), "+f"(d[13][2]), "+f"(d[13][3]), "+f"(d[14][0]), "+f"(d[14][1]),                \
    "+f"(d[14][2]), "+f"(d[14][3]), "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]),                \
    "+f"(d[15][3])

// D (64 x 64, FP32) += A (64 x 16 f16/bf16, registers) * B (16 x 64, shared, MN-major: the
// transposed layout, imm-trans-b 1). The accumulator is always added to (scale-d 1): the
// half-INT8 output starts at zero and is rescaled in place.
#define INTFA_WGMMA_16BIT_RS(N, TYPE)                                                              \
  __device__ __forceinline__ void wgmma_m64n##N##k16_f32_##TYPE##_rs(                              \
      float (&d)[N / 8][4], const u32 (&a)[4], u64 b_descriptor) {                                 \
    asm volatile("wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." #TYPE "." #TYPE " {"           \
                 INTFA_WGMMA_N##N##_ACCUMULATOR_LIST "}, {%" INTFA_WGMMA_A0_##N ", %"             \
                 INTFA_WGMMA_A1_##N ", %" INTFA_WGMMA_A2_##N ", %" INTFA_WGMMA_A3_##N "}, %"      \
                 INTFA_WGMMA_B_##N ", 1, 1, 1, 1;\n"                                              \
                 : INTFA_WGMMA_N##N##_F32_ACCUMULATOR(d)                                           \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_descriptor));                 \
  }
// Operand numbers after the accumulators: A's four registers, then B's descriptor.
#define INTFA_WGMMA_A0_64 "32"
#define INTFA_WGMMA_A1_64 "33"
#define INTFA_WGMMA_A2_64 "34"
#define INTFA_WGMMA_A3_64 "35"
#define INTFA_WGMMA_B_64 "36"
#define INTFA_WGMMA_A0_128 "64"
#define INTFA_WGMMA_A1_128 "65"
#define INTFA_WGMMA_A2_128 "66"
#define INTFA_WGMMA_A3_128 "67"
#define INTFA_WGMMA_B_128 "68"
INTFA_WGMMA_16BIT_RS(64, f16)
INTFA_WGMMA_16BIT_RS(128, f16)
INTFA_WGMMA_16BIT_RS(64, bf16)
INTFA_WGMMA_16BIT_RS(128, bf16)

// D (64 x 64) {=, +=} A (64 x 32, shared) * B (64 x 32, shared), s8 x s8, both K-major.
__device__ __forceinline__ void wgmma_m64n64k32_s8s8_ss(int (&d)[8][4], u64 a_descriptor,
                                                        u64 b_descriptor, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8 {" INTFA_WGMMA_N64_ACCUMULATOR_LIST
      "}, %32, %33, p;\n}\n"
      : INTFA_WGMMA_N64_ACCUMULATOR(d)
      : "l"(a_descriptor), "l"(b_descriptor), "r"(accumulate));
}

// D (64 x 64) {=, +=} A (64 x 32 s8, registers) * B (64 x 32 s8, shared, K-major).
__device__ __forceinline__ void wgmma_m64n64k32_s8s8_rs(int (&d)[8][4], const u32 (&a)[4],
                                                        u64 b_descriptor, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8 {" INTFA_WGMMA_N64_ACCUMULATOR_LIST
      "}, {%32, %33, %34, %35}, %36, p;\n}\n"
      : INTFA_WGMMA_N64_ACCUMULATOR(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_descriptor), "r"(accumulate));
}

// D (64 x 64) {=, +=} A (64 x 32 u8, registers) * B (64 x 32 s8, shared, K-major).
__device__ __forceinline__ void wgmma_m64n64k32_u8s8_rs(int (&d)[8][4], const u32 (&a)[4],
                                                        u64 b_descriptor, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k32.s32.u8.s8 {" INTFA_WGMMA_N64_ACCUMULATOR_LIST
      "}, {%32, %33, %34, %35}, %36, p;\n}\n"
      : INTFA_WGMMA_N64_ACCUMULATOR(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_descriptor), "r"(accumulate));
}

// D (64 x 128) {=, +=} A (64 x 32, shared) * B (128 x 32, shared), s8 x s8, both K-major.
__device__ __forceinline__ void wgmma_m64n128k32_s8s8_ss(int (&d)[16][4], u64 a_descriptor,
                                                         u64 b_descriptor, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 {" INTFA_WGMMA_N128_ACCUMULATOR_LIST
      "}, %64, %65, p;\n}\n"
      : INTFA_WGMMA_N128_ACCUMULATOR(d)
      : "l"(a_descriptor), "l"(b_descriptor), "r"(accumulate));
}

// D (64 x 128) {=, +=} A (64 x 32 s8, registers) * B (128 x 32 s8, shared, K-major).
__device__ __forceinline__ void wgmma_m64n128k32_s8s8_rs(int (&d)[16][4], const u32 (&a)[4],
                                                         u64 b_descriptor, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 {" INTFA_WGMMA_N128_ACCUMULATOR_LIST
      "}, {%64, %65, %66, %67}, %68, p;\n}\n"
      : INTFA_WGMMA_N128_ACCUMULATOR(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_descriptor), "r"(accumulate));
}

// D (64 x 128) {=, +=} A (64 x 32 u8, registers) * B (128 x 32 s8, shared, K-major).
__device__ __forceinline__ void wgmma_m64n128k32_u8s8_rs(int (&d)[16][4], const u32 (&a)[4],
                                                         u64 b_descriptor, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.s32.u8.s8 {" INTFA_WGMMA_N128_ACCUMULATOR_LIST
      "}, {%64, %65, %66, %67}, %68, p;\n}\n"
      : INTFA_WGMMA_N128_ACCUMULATOR(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_descriptor), "r"(accumulate));
}

// The shapes above by width: D (64 x N) {=, +=} A (64 x 32) * B (N x 32).
template <int N>
__device__ __forceinline__ void wgmma_s8s8_ss(int (&d)[N / 8][4], u64 a_descriptor,
                                              u64 b_descriptor, int accumulate) {
  static_assert(N == 64 || N == 128, "n64 or n128");
  if constexpr (N == 64) {
    wgmma_m64n64k32_s8s8_ss(d, a_descriptor, b_descriptor, accumulate);
  } else {
    wgmma_m64n128k32_s8s8_ss(d, a_descriptor, b_descriptor, accumulate);
  }
}

template <int N, bool UnsignedA>
__device__ __forceinline__ void wgmma_x8s8_rs(int (&d)[N / 8][4], const u32 (&a)[4],
                                              u64 b_descriptor, int accumulate) {
  static_assert(N == 64 || N == 128, "n64 or n128");
  if constexpr (N == 64 && UnsignedA) {
    wgmma_m64n64k32_u8s8_rs(d, a, b_descriptor, accumulate);
  } else if constexpr (N == 64) {
    wgmma_m64n64k32_s8s8_rs(d, a, b_descriptor, accumulate);
  } else if constexpr (UnsignedA) {
    wgmma_m64n128k32_u8s8_rs(d, a, b_descriptor, accumulate);
  } else {
    wgmma_m64n128k32_s8s8_rs(d, a, b_descriptor, accumulate);
  }
}

// The 16-bit shapes above by width and type: D (64 x N, FP32) += A (64 x 16) * B (16 x N).
template <int N, bool BFloat16>
__device__ __forceinline__ void wgmma_f32_16bit_rs(float (&d)[N / 8][4], const u32 (&a)[4],
                                                   u64 b_descriptor) {
  static_assert(N == 64 || N == 128, "n64 or n128");
  if constexpr (N == 64 && BFloat16) {
    wgmma_m64n64k16_f32_bf16_rs(d, a, b_descriptor);
  } else if constexpr (N == 64) {
    wgmma_m64n64k16_f32_f16_rs(d, a, b_descriptor);
  } else if constexpr (BFloat16) {
    wgmma_m64n128k16_f32_bf16_rs(d, a, b_descriptor);
  } else {
    wgmma_m64n128k16_f32_f16_rs(d, a, b_descriptor);
  }
}

}  // namespace kernels
}  // namespace intfa
