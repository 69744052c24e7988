// Thread block clusters (PTX ISA: "barrier.cluster", "mapa", state space .shared::cluster;
// sm_90 and later): the blocks of a cluster are resident together and can read each other's
// shared memory. Kernels that use these are launched with a cluster dimension
// (launch::LaunchShape::cluster_blocks); a launch without one is a cluster of one block. Before
// sm_90 they trap: no intfa launch uses them there.
#pragma once

#include "common/copy.cuh"
#include "common/types.h"

namespace intfa {
namespace kernels {

// This block's rank in its cluster, and the cluster's blocks (0 and 1 without a cluster launch).
__device__ __forceinline__ u32 cluster_block_rank() {
  u32 rank = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
#endif
  return rank;
}

__device__ __forceinline__ u32 cluster_block_count() {
  u32 count = 1;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(count));
#endif
  return count;
}

// Every thread of every block of the cluster arrives (release: this thread's writes to shared
// memory are visible to the cluster's blocks after their wait), without waiting.
__device__ __forceinline__ void cluster_arrive() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
#else
  asm volatile("trap;");
#endif
}

// Waits until every thread of the cluster has arrived since the last wait (acquire).
__device__ __forceinline__ void cluster_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
#else
  asm volatile("trap;");
#endif
}

// The address in the shared::cluster window of `pointer` (this block's shared memory) in the
// shared memory of block `rank` of the cluster.
__device__ __forceinline__ u32 cluster_block_address(const void* pointer, u32 rank) {
  u32 address = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
               : "=r"(address)
               : "r"(shared_address(pointer)), "r"(rank));
#else
  asm volatile("trap;");
#endif
  return address;
}

// The float at `pointer` (this block's shared memory) in the shared memory of block `rank` of
// the cluster.
__device__ __forceinline__ float load_float_of_cluster_block(const float* pointer, u32 rank) {
  float value = 0.0f;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("ld.shared::cluster.f32 %0, [%1];"
               : "=f"(value)
               : "r"(cluster_block_address(pointer, rank))
               : "memory");
#else
  asm volatile("trap;");
#endif
  return value;
}

// The 16 bytes at `pointer` (this block's shared memory, 16-byte aligned) in the shared memory of
// block `rank` of the cluster.
__device__ __forceinline__ float4 load_float4_of_cluster_block(const float* pointer, u32 rank) {
  float4 value = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(value.x), "=f"(value.y), "=f"(value.z), "=f"(value.w)
               : "r"(cluster_block_address(pointer, rank))
               : "memory");
#else
  asm volatile("trap;");
#endif
  return value;
}

}  // namespace kernels
}  // namespace intfa
