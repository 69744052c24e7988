// Programmatic dependent launch (PTX ISA, griddepcontrol; sm_90 and later). intfa launches every
// kernel whose unit reaches this header this way there (src/launch/kernel_runtime.hpp, launch):
// it may be scheduled while the kernel before it on the stream is still running, so its blocks
// are resident and its launch latency spent when that one ends. So every kernel begins with
// wait_for_previous_grid(), before it reads or writes any memory, then
// allow_next_grid_to_launch(): a grid completes only after every one of its blocks has waited,
// so each kernel's completion also implies its predecessors' (the attention kernel reads what the
// quantize pass two launches earlier wrote). The test
// KernelTemplates.EveryKernelWaitsForThePreviousGridFirst holds every template to it. Both are
// no-ops on older archs and after a launch without the dependency.
#pragma once

namespace intfa {
namespace kernels {

// Waits until the grid this one depends on has completed and its writes are visible.
__device__ __forceinline__ void wait_for_previous_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Lets the grid launched after this one with a programmatic dependency be scheduled (once every
// block of this grid has said so or exited); it still waits for this grid's completion.
__device__ __forceinline__ void allow_next_grid_to_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

}  // namespace kernels
}  // namespace intfa
