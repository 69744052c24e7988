// Programmatic dependent launch (PTX ISA, griddepcontrol; sm_90 and later): a kernel launched
// with launch::LaunchShape::programmatic_dependency may start while the kernel before it on the
// stream is still running, so its blocks are resident and its launch latency spent when that one
// ends. Before it reads anything the earlier kernel wrote, it waits for that kernel's completion
// and memory flush; the earlier kernel says when the next may be scheduled. Both are no-ops on
// older archs and when the launch had no such dependency.
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
