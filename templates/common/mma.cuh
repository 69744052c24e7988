// Warp-level tensor-core MMAs (PTX ISA "Warp-level matrix multiply-accumulate instructions").
// Fragments are the PTX layouts: for m16n8kK with lane = 4 * group + thread_in_group,
// C/D: c[0], c[1] at (row group, cols 2*thread_in_group + {0,1}), c[2], c[3] at row group + 8.
#pragma once

#include "common/types.h"

namespace intfa {
namespace kernels {

// D = A (16x32 s8, row) * B (32x8 s8, col) + C, s32 accumulate. A: 4 regs, B: 2 regs.
__device__ __forceinline__ void mma_s8s8_m16n8k32(int (&d)[4], const u32 (&a)[4], u32 b0,
                                                  u32 b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// As above with A unsigned (u8 x s8): P >= 0 uses the whole byte.
__device__ __forceinline__ void mma_u8s8_m16n8k32(int (&d)[4], const u32 (&a)[4], u32 b0,
                                                  u32 b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// D = A (16x64 s4, row) * B (64x8 s4, col) + C. Same byte geometry as the s8 m16n8k32 fragments
// (each 32-bit register holds 8 nibbles, element 2i in the low nibble of byte i).
__device__ __forceinline__ void mma_s4s4_m16n8k64(int (&d)[4], const u32 (&a)[4], u32 b0,
                                                  u32 b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// D = A (16x16 f16, row) * B (16x8 f16, col) + C with FP32 accumulation.
__device__ __forceinline__ void mma_f16_m16n8k16(float (&d)[4], const u32 (&a)[4], u32 b0,
                                                 u32 b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void mma_bf16_m16n8k16(float (&d)[4], const u32 (&a)[4], u32 b0,
                                                  u32 b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

}  // namespace kernels
}  // namespace intfa
