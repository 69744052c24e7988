// The process-wide kernel runtime: a family's spec (as a render::KernelRecipe) -> loaded
// CUfunction, through render, key, disk cache and NVRTC. It names no kernel family: its memory is
// keyed by the family's KernelId, and it renders a spec only when that kernel is not in memory.
// Thread-safe: N threads asking for one spec compile and load it once.
//
// It is one of intfa's documented process-wide caches; it is never destroyed (modules stay loaded
// until their context goes), because unloading during static destruction can race the driver's
// own teardown.
#pragma once

#include <cuda.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cache/bundle.hpp"
#include "cache/cache_key.hpp"
#include "cache/disk_cache.hpp"
#include "device/arch.hpp"
#include "nvrtc/compiler.hpp"
#include "render/kernel_source.hpp"

namespace intfa::launch {

struct RuntimeStats {
  std::uint64_t nvrtc_compiles = 0;  // in this process, by anyone
  std::uint64_t disk_hits = 0;       // the user cache
  std::uint64_t bundle_hits = 0;     // the deployment bundle (INTFA_DEPLOY_CACHE)
  std::uint64_t packaged_hits = 0;   // the kernels a package ships (use_packaged_kernels)
  std::uint64_t disk_misses = 0;
  std::uint64_t memory_hits = 0;  // loaded-kernel lookups served without any work
  std::uint64_t module_loads = 0;
  // Cubins load and load_all fetched (compiled, or read from a cache) for kernels not yet in
  // memory; the batches they came in (one per call that lacked any: all it lacked, together,
  // before its first launch); and the most such fetches that ran at once.
  std::uint64_t fetched = 0;
  std::uint64_t fetch_batches = 0;
  std::uint64_t most_fetching_at_once = 0;
};

// A kernel loaded into one context, ready to launch.
struct LoadedKernel {
  CUfunction function = nullptr;
  device::Arch arch = device::Arch::kSm80;  // the arch it was compiled for
  cache::CacheKey key;
  int registers_per_thread = 0;
  int local_bytes_per_thread = 0;  // > 0 means spills
  int max_threads_per_block = 0;
  bool waits_for_previous_grid = false;  // may be a programmatic dependent launch (launch)
};

struct LaunchShape {
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  unsigned dynamic_shared_bytes = 0;
  // Blocks per thread block cluster along x (sm_90 and later; grid[0] a multiple of it): above 1
  // the launch is cuLaunchKernelEx with a cluster dimension. Above 8 (a non-portable size) the
  // kernel must be allowed such clusters first: cluster_fits does that.
  unsigned cluster_blocks = 1;
};

// Whether launches on sm_90 and later are programmatic dependent launches: unless
// INTFA_PROGRAMMATIC_LAUNCH is 0 (read once, at the first such launch; a malformed value throws
// InvalidArgument naming the variable, at every such launch).
bool programmatic_launches_enabled();

// Where a cubin came from.
enum class CubinSource { kMemory, kBundle, kPackaged, kDisk, kNvrtc };

struct CompiledKernel {
  cache::CacheKey key;
  std::shared_ptr<const nvrtc::Cubin> cubin;
  bool compiled_now = false;  // by NVRTC for this call (source kNvrtc)
  CubinSource source = CubinSource::kMemory;
  bool waits_for_previous_grid = false;  // waits_for_previous_grid(its unit)
  device::Arch arch = device::Arch::kSm80;  // the source's
};

// Whether a unit's kernel starts by waiting for the kernel before it (it reaches
// common/grid_dependency.cuh, whose prologue every template kernel begins with; a test holds the
// templates to that): only such kernels are launched as programmatic dependents. A template tree
// from before that prologue (INTFA_TEMPLATE_DIR) launches as cuLaunchKernel does.
bool waits_for_previous_grid(const render::RenderedUnit& unit);

// The caches a compile looks in, in this order, before NVRTC: a read-only deployment bundle,
// the bundle a package ships (read-only too), then a disk cache, which also receives what NVRTC
// compiles. Any may be absent.
struct CacheChain {
  cache::DeploymentBundle* bundle = nullptr;
  cache::DiskCache* disk = nullptr;
  cache::DeploymentBundle* packaged = nullptr;
};

// The cubin for `source` (or the recipe's source) from `chain`, else compiled by NVRTC (and stored
// in chain.disk). No memory cache and no process-wide state: KernelRuntime::compile puts its memory
// in front of its own chain (INTFA_DEPLOY_CACHE, the user cache); a deployment bundle's writer
// passes the bundle it writes (the caller checks disk->writable() afterwards). Throws
// CompileError.
CompiledKernel compile(const render::KernelSource& source, const CacheChain& chain);
CompiledKernel compile(const render::KernelRecipe& recipe, const CacheChain& chain);

// One kernel of a call, for KernelRuntime::load_all: the recipe and the dynamic shared memory its
// launch asks for, and where to put the loaded kernel. (No member initializers: CallKernels holds
// an array of them that stays uninitialized past its count, on every call's path.)
struct KernelRequest {
  render::KernelRecipe recipe;
  unsigned dynamic_shared_bytes;
  const LoadedKernel** kernel;
};

// Whether load_all compiles a call's missing kernels on several threads: unless
// INTFA_PARALLEL_COMPILE is 0 (read once, at the first call that compiles; a malformed value
// throws InvalidArgument naming the variable, at each such call).
bool parallel_compile_enabled();

class KernelRuntime {
 public:
  static KernelRuntime& instance();

  // The cubin for the recipe: from memory, else launch::compile through the process's cache chain
  // (deployment bundle, user disk cache, else NVRTC, storing the result in the user cache).
  // Needs no GPU.
  CompiledKernel compile(const render::KernelRecipe& recipe);

  // The kernel loaded into `context`, able to use `dynamic_shared_bytes` of shared memory: from
  // memory under one lock, else load_all of one.
  const LoadedKernel& load(const render::KernelRecipe& recipe, CUcontext context,
                           unsigned dynamic_shared_bytes);

  // load() of each of `count` requests, all before the caller launches any. Those already loaded
  // cost one lookup each under one lock (the hot path: no thread, no allocation). Otherwise every
  // cubin not yet in memory is compiled (or read from the disk cache) at once, each on a thread of
  // its own, at most std::thread::hardware_concurrency() together counting the calling thread's
  // (INTFA_PARALLEL_COMPILE=0: one after another on the calling thread); every thread is joined
  // before it returns or throws, and a failure is rethrown as it was thrown (CompileError with
  // NVRTC's log), the first in request order, once all are done. Then the modules are loaded.
  void load_all(const KernelRequest* requests, std::size_t count, CUcontext context);

  RuntimeStats stats() const;

  // Kernels a package ships with the library (`intfa precompile`'s bundle in the installed
  // Python package, python/CMakeLists.txt): read after INTFA_DEPLOY_CACHE and before the user
  // cache, so that the first call of a default shape compiles nothing. A directory without a
  // manifest, or one an NVRTC newer than this process's or of another major version made, is not
  // used (said under INTFA_LOG=1 only). The Python package (at import) and its `intfa` tool (at
  // start) name the package's folder; an empty path names none. Static: it only records the
  // folder, which the runtime opens when it is made and again at reset_for_testing, so naming it
  // reads nothing else (no cache, no environment) and races no compile.
  static void use_packaged_kernels(const std::filesystem::path& directory);
  // That folder while its bundle is in use, else empty.
  std::filesystem::path packaged_kernels() const;

  // Forget compiled cubins and re-read the cache configuration (INTFA_CACHE_DIR,
  // INTFA_DEPLOY_CACHE, ...) from the environment. For tests that point them elsewhere; loaded
  // modules stay loaded.
  void reset_for_testing();

  KernelRuntime(const KernelRuntime&) = delete;
  KernelRuntime& operator=(const KernelRuntime&) = delete;

 private:
  KernelRuntime();
  ~KernelRuntime();
  // compile() of each of `recipes` on up to hardware_concurrency threads; load_all's cold path.
  void fetch_together(const std::vector<const render::KernelRecipe*>& recipes);
  // The module of the recipe's cubin (compile()) loaded into `context` unless it is already there,
  // with `dynamic_shared_bytes` allowed; load_all's slow path.
  const LoadedKernel& load_module(const render::KernelRecipe& recipe, CUcontext context,
                                  unsigned dynamic_shared_bytes);
  struct State;
  std::unique_ptr<State> state_;
};

// The kernels one call launches, gathered while it plans and loaded together before its first
// launch (load_all), so that on a cold cache they compile at once, not one after another. Holds
// pointers to the caller's specs and slots, which must stay where they are until load(); no
// allocation.
class CallKernels {
 public:
  // attention_forward_16bit launches six at most: K's channel means, K's rows, V's max pass, V,
  // Q's rows and the attention kernel (per-block K with the rotation).
  static constexpr std::size_t kCapacity = 8;

  // Asks for the recipe's kernel, launched with `dynamic_shared_bytes`; load() sets `*kernel`.
  // Throws std::logic_error past kCapacity.
  void add(const render::KernelRecipe& recipe, unsigned dynamic_shared_bytes,
           const LoadedKernel** kernel) {
    if (count_ == kCapacity) throw_full();
    requests_[count_++] = KernelRequest{recipe, dynamic_shared_bytes, kernel};
  }
  // KernelRuntime::instance().load_all of every kernel added (load of the one, when it is one).
  void load(CUcontext context) {
    KernelRuntime& runtime = KernelRuntime::instance();
    if (count_ == 1) {
      *requests_[0].kernel =
          &runtime.load(requests_[0].recipe, context, requests_[0].dynamic_shared_bytes);
    } else {
      runtime.load_all(requests_.data(), count_, context);
    }
  }

 private:
  [[noreturn]] static void throw_full();

  std::array<KernelRequest, kCapacity> requests_;
  std::size_t count_ = 0;
};

// The context to launch in: the one current on this thread, else device 0's primary context (made
// current). When `stream` is given it must belong to that context (InvalidArgument otherwise).
CUcontext launch_context(CUstream stream);

// Launches a kernel whose only parameter is the struct at `params` (passed by value). On sm_90
// and later, for a kernel that waits for its predecessor (LoadedKernel::waits_for_previous_grid:
// kernels::wait_for_previous_grid, templates/common/grid_dependency.cuh), as a programmatic
// dependent launch (cuLaunchKernelEx, programmatic stream serialization): the kernel may be
// scheduled before the kernel before it on the stream has ended, so its launch latency hides
// under that kernel's tail. shape.cluster_blocks > 1 launches clusters. Throws DriverError on
// failure.
void launch(const LoadedKernel& kernel, const LaunchShape& shape, CUstream stream,
            const void* params);

// How many clusters of `shape` the device runs at once (cuOccupancyMaxActiveClusters; an error,
// such as a size the GPU does not support, counts as none). A cluster of large blocks needs that
// many free SMs in one GPC, which a smaller part or a MIG slice may not have, and clusters may
// hold fewer blocks at once than the same blocks launched alone. Allows clusters above 8 blocks
// on the kernel first. Asked once per kernel and shape, then remembered.
int max_active_clusters(const LoadedKernel& kernel, const LaunchShape& shape);
// Whether the device can run at least one cluster of `shape` at once.
bool cluster_fits(const LoadedKernel& kernel, const LaunchShape& shape);

}  // namespace intfa::launch
