// Global -> shared copies (cp.async, PTX ISA "Data Movement and Conversion Instructions"),
// shared -> register fragment loads (ldmatrix) and their converse (stmatrix).
#pragma once

#include "common/types.h"

namespace intfa {
namespace kernels {

__device__ __forceinline__ u32 shared_address(const void* pointer) {
  return static_cast<u32>(__cvta_generic_to_shared(pointer));
}

// Copies 16 bytes, or zero-fills the destination when `valid` is false (tails are padded on chip,
// never by the caller). L2 only (.cg): tiles are reused from shared memory, not L1.
__device__ __forceinline__ void copy_16_bytes_async(u32 destination, const void* source,
                                                    bool valid) {
  const int source_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(destination),
               "l"(source), "r"(source_bytes));
}

// 16 bytes, with L2 asked to fetch the whole 256-byte block around them: for small reads whose
// neighbours other blocks (or this one, soon) read too, as the paged decode's per-token scales,
// where a tile's 64 bytes sit beside the other heads' and tiles' (paged_decode.cuh).
__device__ __forceinline__ void copy_16_bytes_async_prefetch_256(u32 destination,
                                                                const void* source) {
  asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16;\n" ::"r"(destination),
               "l"(source));
}

// 4 bytes (one FP32 scale); zero-fills when invalid.
__device__ __forceinline__ void copy_4_bytes_async(u32 destination, const void* source,
                                                   bool valid) {
  const int source_bytes = valid ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(destination), "l"(source),
               "r"(source_bytes));
}

// Arrives on an mbarrier once this thread's earlier cp.async copies have landed; the arrival is
// one of those the barrier was initialised to expect (.noinc).
__device__ __forceinline__ void async_copies_arrive(u32 barrier) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(barrier) : "memory");
}

__device__ __forceinline__ void commit_async_copies() {
  asm volatile("cp.async.commit_group;\n" ::);
}

// Waits until at most `Pending` committed groups are still in flight.
template <int Pending>
__device__ __forceinline__ void wait_async_copies() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending));
}

// Four 8x8 matrices of 16-bit elements (= 8 rows of 16 bytes each). Lanes 8i..8i+7 give the row
// addresses of matrix i; register i of each lane receives its part of matrix i.
__device__ __forceinline__ void load_matrix_x4(u32 (&fragment)[4], u32 address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(fragment[0]), "=r"(fragment[1]), "=r"(fragment[2]), "=r"(fragment[3])
               : "r"(address));
}

__device__ __forceinline__ void load_matrix_x4_transposed(u32 (&fragment)[4], u32 address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(fragment[0]), "=r"(fragment[1]), "=r"(fragment[2]), "=r"(fragment[3])
               : "r"(address));
}

// The converse of load_matrix_x4 (sm_90 and later): register i of each lane goes to matrix i,
// whose 8 row addresses lanes 8i..8i+7 give.
__device__ __forceinline__ void store_matrix_x4(u32 address, const u32 (&fragment)[4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1,%2,%3,%4};\n" ::"r"(address),
               "r"(fragment[0]), "r"(fragment[1]), "r"(fragment[2]), "r"(fragment[3])
               : "memory");
#else
  asm volatile("trap;");  // no stmatrix before sm_90; only the Hopper kernel calls this
#endif
}

}  // namespace kernels
}  // namespace intfa
