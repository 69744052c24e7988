// Hopper (sm_90) asynchronous copies: tensor-map (TMA) loads into shared memory, the mbarriers
// that count their bytes, and the register reallocation of warp-specialised kernels
// (PTX ISA: "cp.async.bulk.tensor", "mbarrier", "setmaxnreg").
#pragma once

#include "common/tensor_map.h"
#include "common/types.h"

namespace intfa {
namespace kernels {

__device__ __forceinline__ void mbarrier_init(u32 barrier, int arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(barrier), "r"(arrivals));
}

// Makes barrier initialisation visible to the async proxy (the TMA unit arrives on them).
__device__ __forceinline__ void fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

__device__ __forceinline__ void mbarrier_arrive(u32 barrier) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(barrier) : "memory");
}

// Arrives and adds `bytes` to the transaction count the current phase waits for.
__device__ __forceinline__ void mbarrier_arrive_expect_bytes(u32 barrier, int bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(barrier),
               "r"(bytes)
               : "memory");
}

// Blocks until the phase with parity `parity` of the barrier has completed.
__device__ __forceinline__ void mbarrier_wait(u32 barrier, int parity) {
  u32 done = 0;
  do {
    asm volatile(
        "{\n.reg .pred complete;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 complete, [%1], %2;\n"
        "selp.u32 %0, 1, 0, complete;\n}\n"
        : "=r"(done)
        : "r"(barrier), "r"(parity)
        : "memory");
  } while (done == 0);
}

// One box of a tensor map into shared memory; the barrier's transaction count drops by the box's
// bytes when it lands (elements outside the tensor arrive as zeros). The box's first element must
// lie on a 16-byte boundary of global memory.
__device__ __forceinline__ void tma_load_4d(u32 destination, const TensorMap* map, u32 barrier,
                                            int x, int y, int z, int w) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5, %6}], [%2];\n" ::"r"(destination),
      "l"(reinterpret_cast<u64>(map)), "r"(barrier), "r"(x), "r"(y), "r"(z), "r"(w)
      : "memory");
}

// Moves registers between the warpgroups of a block: the producer gives up what the consumers
// take (sm_90a). Every warp of a warpgroup must execute the same instruction.
template <int Registers>
__device__ __forceinline__ void release_registers() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(Registers));
}

template <int Registers>
__device__ __forceinline__ void acquire_registers() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(Registers));
}

}  // namespace kernels
}  // namespace intfa
