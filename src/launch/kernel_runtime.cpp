#include "launch/kernel_runtime.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <mutex>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <tuple>
#include <unordered_map>

#include "cache/bundle.hpp"
#include "cache/disk_cache.hpp"
#include "common/env.hpp"
#include "common/locations.hpp"
#include "common/log.hpp"
#include "device/arch.hpp"
#include "device/driver_api.hpp"
#include "intfa/errors.hpp"
#include "render/kernel_source.hpp"
#include "render/template_set.hpp"

namespace intfa::launch {
namespace {

// Owns one CUmodule.
class Module {
 public:
  Module(CUcontext context, const std::vector<char>& image) : context_(context) {
    INTFA_DRIVER(cuModuleLoadData, &handle_, image.data());
  }
  ~Module() {
    if (handle_ == nullptr) return;
    // Unloading needs the module's context current; a failure here has no caller to tell.
    const device::DriverApi& api = device::driver();
    CUcontext previous = nullptr;
    api.cuCtxGetCurrent(&previous);
    if (previous != context_) api.cuCtxSetCurrent(context_);
    api.cuModuleUnload(handle_);
    if (previous != context_) api.cuCtxSetCurrent(previous);
  }
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  CUmodule get() const { return handle_; }

 private:
  CUcontext context_;
  CUmodule handle_ = nullptr;
};

// Without opting in, a block may use 48 KiB of shared memory, static and dynamic together.
constexpr unsigned kSharedBytesWithoutOptIn = 48 * 1024;

struct LoadedEntry {
  std::unique_ptr<Module> module;
  LoadedKernel kernel;
  // The dynamic shared memory a launch may ask for as things stand: what is left of the 48 KiB
  // beside the kernel's static shared memory, until the attribute is raised.
  unsigned shared_bytes_allowed = kSharedBytesWithoutOptIn;
};

struct ContextAndId {
  CUcontext context;
  render::KernelId id;
  friend bool operator==(const ContextAndId& a, const ContextAndId& b) {
    return a.context == b.context && a.id == b.id;
  }
};

struct ContextAndIdHash {
  std::size_t operator()(const ContextAndId& value) const noexcept {
    return render::KernelIdHash{}(value.id) ^ std::hash<void*>{}(value.context);
  }
};

// A source made ready for the cache and NVRTC: its options and the key they hash to.
struct PreparedSource {
  const render::TemplateSet& templates;
  const render::KernelSource& source;
  std::vector<std::string> options;
  cache::CacheKey key;
};

PreparedSource prepare(const render::KernelSource& source, const render::TemplateSet& templates) {
  PreparedSource prepared{templates, source, nvrtc::compile_options(source.arch), {}};
  prepared.key =
      cache::make_key({source.unit, templates, prepared.options, nvrtc::version(), source.arch});
  return prepared;
}

std::shared_ptr<const nvrtc::Cubin> compile_with_nvrtc(const PreparedSource& prepared) {
  const render::KernelSource& source = prepared.source;
  auto cubin = std::make_shared<const nvrtc::Cubin>(
      nvrtc::compile(source, prepared.options, prepared.templates));
  log::info("compiled " + source.text + " in " +
            std::to_string(static_cast<int>(cubin->compile_ms)) + " ms");
  // A compile that succeeds can still warn: ptxas says so when it serializes wgmma or spills,
  // which costs speed and nothing else shows.
  if (cubin->log.find_first_not_of(" \n\r\t") != std::string::npos) {
    log::info("NVRTC's log for " + source.text + ":\n" + cubin->log);
  }
  return cubin;
}

// The key `source` has in `packaged`: `key` (this process's) when the same NVRTC made it, else the
// one its older NVRTC gave the same unit, options and arch.
cache::CacheKey packaged_key(const PreparedSource& prepared, const render::KernelSource& source,
                             const cache::DeploymentBundle& packaged, const cache::CacheKey& key) {
  if (packaged.nvrtc_version() == nvrtc::version()) return key;
  return cache::make_key(
      {source.unit, prepared.templates, prepared.options, packaged.nvrtc_version(), source.arch});
}

// launch::compile of `source`, whose unit's headers come from `templates`.
CompiledKernel compile_source(const render::KernelSource& source,
                              const render::TemplateSet& templates, const CacheChain& chain) {
  const PreparedSource prepared = prepare(source, templates);
  CompiledKernel result;
  result.key = prepared.key;
  result.waits_for_previous_grid = waits_for_previous_grid(source.unit);
  result.arch = source.arch;
  std::optional<nvrtc::Cubin> cached;
  if (chain.bundle != nullptr && (cached = chain.bundle->load(result.key))) {
    result.source = CubinSource::kBundle;
  } else if (chain.packaged != nullptr) {
    const cache::CacheKey key = packaged_key(prepared, source, *chain.packaged, result.key);
    if ((cached = chain.packaged->load(key))) {
      result.key = key;  // the packaged cubin's own (its NVRTC's)
      result.source = CubinSource::kPackaged;
    }
  }
  if (!cached && chain.disk != nullptr && (cached = chain.disk->load(result.key))) {
    result.source = CubinSource::kDisk;
  }
  if (cached) {
    result.cubin = std::make_shared<const nvrtc::Cubin>(std::move(*cached));
    return result;
  }
  result.cubin = compile_with_nvrtc(prepared);
  result.compiled_now = true;
  result.source = CubinSource::kNvrtc;
  if (chain.disk != nullptr) chain.disk->store(result.key, *result.cubin, source);
  return result;
}

// The header of the prologue every template kernel begins with (grid_dependency.cuh).
constexpr const char* kGridDependencyHeader = "common/grid_dependency.cuh";

int function_attribute(CUfunction function, CUfunction_attribute which) {
  int value = 0;
  INTFA_DRIVER(cuFuncGetAttribute, &value, which, function);
  return value;
}

// The folder KernelRuntime::use_packaged_kernels named (process-wide, read when the runtime is
// made and at reset_for_testing).
std::mutex& packaged_directory_mutex() {
  static std::mutex mutex;
  return mutex;
}

std::filesystem::path& packaged_directory_named() {
  static std::filesystem::path directory;
  return directory;
}

}  // namespace

struct KernelRuntime::State {
  std::mutex mutex;
  std::unique_ptr<cache::DeploymentBundle> bundle;  // read-only, under the user cache
  std::filesystem::path packaged_directory;         // use_packaged_kernels', when made
  std::unique_ptr<cache::DeploymentBundle> packaged;  // its bundle, when usable
  std::optional<cache::DiskCache> disk;             // the user cache
  std::unordered_map<render::KernelId, std::shared_future<CompiledKernel>, render::KernelIdHash>
      compiled;
  std::unordered_map<ContextAndId, std::unique_ptr<LoadedEntry>, ContextAndIdHash> loaded;
  std::atomic<std::uint64_t> disk_hits{0};
  std::atomic<std::uint64_t> bundle_hits{0};
  std::atomic<std::uint64_t> packaged_hits{0};
  std::atomic<std::uint64_t> disk_misses{0};
  std::atomic<std::uint64_t> memory_hits{0};
  std::atomic<std::uint64_t> module_loads{0};
  std::atomic<std::uint64_t> fetched{0};
  std::atomic<std::uint64_t> fetch_batches{0};
  std::atomic<std::uint64_t> fetching{0};  // load_all's fetches in flight now
  std::atomic<std::uint64_t> most_fetching_at_once{0};

  void configure_caches() {
    bundle.reset();
    disk.reset();
    open_packaged();
    std::optional<locations::CacheLocation> user = locations::default_cache_location();
    std::optional<std::filesystem::path> deployed =
        cache::DeploymentBundle::directory_from_environment();
    if (user && cache::holds_manifest(user->directory)) {
      // A bundle named as the user cache is read as a bundle and never written: entries it does
      // not list would make it fail `intfa cache verify`. Said once: every kernel it does not
      // list is then compiled by every process.
      log::warn_once("user-cache-is-bundle:" + user->directory.string(),
                     "the kernel cache " + user->directory.string() + " (named by " +
                         user->variable + ") holds a deployment bundle's " +
                         cache::kManifestFileName + ": it is read as that bundle and never " +
                         "written, so kernels it does not list are compiled in every process " +
                         "(name another cache directory, or INTFA_DEPLOY_CACHE for the bundle)");
      if (!deployed) deployed = user->directory;
      user.reset();
    }
    if (deployed) bundle = cache::DeploymentBundle::open(*deployed);
    if (user) disk.emplace(user->directory, cache::DiskCache::Access::kReadWrite, user->variable);
  }

  void open_packaged() {
    packaged.reset();
    {
      const std::lock_guard<std::mutex> lock(packaged_directory_mutex());
      packaged_directory = packaged_directory_named();
    }
    // INTFA_CACHE_DISABLE=1 turns off every cache, the deployment bundles with the rest.
    if (packaged_directory.empty() || env::flag("INTFA_CACHE_DISABLE")) return;
    packaged =
        cache::DeploymentBundle::open(packaged_directory, cache::DeploymentBundle::Kind::kPackaged);
  }

  CacheChain chain() { return CacheChain{bundle.get(), disk ? &*disk : nullptr, packaged.get()}; }

  void count(CubinSource source) {
    if (source == CubinSource::kBundle) bundle_hits++;
    if (source == CubinSource::kPackaged) packaged_hits++;
    if (source == CubinSource::kDisk) disk_hits++;
    if (source == CubinSource::kNvrtc) disk_misses++;
  }
};

KernelRuntime& KernelRuntime::instance() {
  // Never destroyed: see the header.
  static KernelRuntime* runtime = new KernelRuntime();
  return *runtime;
}

KernelRuntime::KernelRuntime() : state_(std::make_unique<State>()) {
  state_->configure_caches();
}

KernelRuntime::~KernelRuntime() = default;

CompiledKernel KernelRuntime::compile(const render::KernelRecipe& recipe) {
  std::shared_future<CompiledKernel> future;
  std::promise<CompiledKernel> promise;
  bool owner = false;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    auto it = state_->compiled.find(recipe.id());
    if (it == state_->compiled.end()) {
      future = promise.get_future().share();
      state_->compiled.emplace(recipe.id(), future);
      owner = true;
    } else {
      future = it->second;
    }
  }
  if (!owner) {
    CompiledKernel result = future.get();
    result.compiled_now = false;
    result.source = CubinSource::kMemory;
    return result;
  }
  try {
    const CompiledKernel result = launch::compile(recipe, state_->chain());
    state_->count(result.source);
    promise.set_value(result);
    return result;
  } catch (...) {
    promise.set_exception(std::current_exception());
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->compiled.erase(
        recipe.id());  // a later call may retry (after INTFA_TEMPLATE_DIR is fixed)
    throw;
  }
}

const LoadedKernel& KernelRuntime::load(const render::KernelRecipe& recipe, CUcontext context,
                                        unsigned dynamic_shared_bytes) {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    auto it = state_->loaded.find({context, recipe.id()});
    if (it != state_->loaded.end() && it->second->shared_bytes_allowed >= dynamic_shared_bytes) {
      state_->memory_hits++;
      return it->second->kernel;
    }
  }
  const LoadedKernel* kernel = nullptr;
  const KernelRequest request{recipe, dynamic_shared_bytes, &kernel};
  load_all(&request, 1, context);
  return *kernel;
}

const LoadedKernel& KernelRuntime::load_module(const render::KernelRecipe& recipe,
                                               CUcontext context, unsigned dynamic_shared_bytes) {
  const CompiledKernel compiled = compile(recipe);
  std::lock_guard<std::mutex> lock(state_->mutex);
  auto& slot = state_->loaded[{context, recipe.id()}];
  if (!slot) {
    auto entry = std::make_unique<LoadedEntry>();
    entry->module = std::make_unique<Module>(context, compiled.cubin->image);
    INTFA_DRIVER(cuModuleGetFunction, &entry->kernel.function, entry->module->get(),
                 compiled.cubin->lowered_name.c_str());
    entry->kernel.arch = compiled.arch;
    entry->kernel.key = compiled.key;
    entry->kernel.registers_per_thread =
        function_attribute(entry->kernel.function, CU_FUNC_ATTRIBUTE_NUM_REGS);
    entry->kernel.local_bytes_per_thread =
        function_attribute(entry->kernel.function, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES);
    entry->kernel.max_threads_per_block =
        function_attribute(entry->kernel.function, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
    entry->kernel.waits_for_previous_grid = compiled.waits_for_previous_grid;
    const auto static_shared_bytes = static_cast<unsigned>(
        function_attribute(entry->kernel.function, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES));
    entry->shared_bytes_allowed = static_shared_bytes < kSharedBytesWithoutOptIn
                                      ? kSharedBytesWithoutOptIn - static_shared_bytes
                                      : 0;
    state_->module_loads++;
    slot = std::move(entry);
  }
  if (dynamic_shared_bytes > slot->shared_bytes_allowed) {
    INTFA_DRIVER(cuFuncSetAttribute, slot->kernel.function,
                 CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                 static_cast<int>(dynamic_shared_bytes));
    slot->shared_bytes_allowed = dynamic_shared_bytes;
  }
  return slot->kernel;
}

namespace {

// Joins its threads when it goes, however the scope is left: no thread outlives load_all.
struct JoinedThreads {
  std::vector<std::thread> threads;
  ~JoinedThreads() {
    for (std::thread& thread : threads) {
      if (thread.joinable()) thread.join();
    }
  }
};

}  // namespace

void KernelRuntime::load_all(const KernelRequest* requests, std::size_t count, CUcontext context) {
  std::size_t hits = 0;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    for (std::size_t i = 0; i < count; ++i) {
      const KernelRequest& request = requests[i];
      const auto it = state_->loaded.find({context, request.recipe.id()});
      const bool hit = it != state_->loaded.end() &&
                       it->second->shared_bytes_allowed >= request.dynamic_shared_bytes;
      *request.kernel = hit ? &it->second->kernel : nullptr;
      hits += hit ? 1 : 0;
    }
  }
  state_->memory_hits += hits;
  if (hits == count) return;
  // The recipes of the kernels not loaded whose cubins are not in memory either, each once.
  std::vector<const render::KernelRecipe*> to_fetch;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    for (std::size_t i = 0; i < count; ++i) {
      const render::KernelRecipe* recipe = &requests[i].recipe;
      const bool listed = std::any_of(
          to_fetch.begin(), to_fetch.end(),
          [&](const render::KernelRecipe* other) { return other->id() == recipe->id(); });
      if (*requests[i].kernel == nullptr && !listed && state_->compiled.count(recipe->id()) == 0) {
        to_fetch.push_back(recipe);
      }
    }
  }
  if (!to_fetch.empty()) fetch_together(to_fetch);
  for (std::size_t i = 0; i < count; ++i) {
    if (*requests[i].kernel == nullptr) {
      *requests[i].kernel =
          &load_module(requests[i].recipe, context, requests[i].dynamic_shared_bytes);
    }
  }
}

void KernelRuntime::fetch_together(const std::vector<const render::KernelRecipe*>& recipes) {
  const auto started = std::chrono::steady_clock::now();
  std::vector<std::exception_ptr> failures(recipes.size());
  std::atomic<std::size_t> next{0};
  // The last recipe first: a call asks for its attention kernel last, and it takes longest to
  // compile (0.6 s against 0.1-0.4 s for the quantize kernels of a d=128 call on sm_90a), so
  // with fewer cores than kernels it is not left to start last.
  auto worker = [&]() noexcept {
    for (std::size_t taken = next++; taken < recipes.size(); taken = next++) {
      const std::size_t index = recipes.size() - 1 - taken;
      const std::uint64_t now = ++state_->fetching;
      std::uint64_t most = state_->most_fetching_at_once.load();
      while (now > most && !state_->most_fetching_at_once.compare_exchange_weak(most, now)) {
      }
      try {
        compile(*recipes[index]);
      } catch (...) {  // kept for the caller: the other compiles go on
        failures[index] = std::current_exception();
      }
      --state_->fetching;
    }
  };
  const std::size_t cores = std::max(1u, std::thread::hardware_concurrency());
  const std::size_t workers =
      parallel_compile_enabled() ? std::min(recipes.size(), cores) : std::size_t{1};
  {
    JoinedThreads pool;
    pool.threads.reserve(workers - 1);
    for (std::size_t i = 1; i < workers; ++i) {
      try {
        pool.threads.emplace_back(worker);
      } catch (const std::system_error&) {
        break;  // no more threads to be had: the ones there (and this one) take the rest
      }
    }
    worker();  // the calling thread takes recipes too
  }
  state_->fetched += recipes.size();
  state_->fetch_batches++;
  if (recipes.size() > 1) {
    log::info("fetched " + std::to_string(recipes.size()) + " kernel(s) of one call on " +
              std::to_string(workers) + " thread(s) in " +
              std::to_string(static_cast<int>(std::chrono::duration<double, std::milli>(
                                                  std::chrono::steady_clock::now() - started)
                                                  .count())) +
              " ms");
  }
  for (const std::exception_ptr& failure : failures) {
    if (failure) std::rethrow_exception(failure);
  }
}

void KernelRuntime::use_packaged_kernels(const std::filesystem::path& directory) {
  const std::lock_guard<std::mutex> lock(packaged_directory_mutex());
  packaged_directory_named() = directory;
}

std::filesystem::path KernelRuntime::packaged_kernels() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->packaged ? state_->packaged_directory : std::filesystem::path();
}

RuntimeStats KernelRuntime::stats() const {
  RuntimeStats stats;
  stats.nvrtc_compiles = nvrtc::compile_count();
  stats.disk_hits = state_->disk_hits.load();
  stats.bundle_hits = state_->bundle_hits.load();
  stats.packaged_hits = state_->packaged_hits.load();
  stats.disk_misses = state_->disk_misses.load();
  stats.memory_hits = state_->memory_hits.load();
  stats.module_loads = state_->module_loads.load();
  stats.fetched = state_->fetched.load();
  stats.fetch_batches = state_->fetch_batches.load();
  stats.most_fetching_at_once = state_->most_fetching_at_once.load();
  return stats;
}

void KernelRuntime::reset_for_testing() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->compiled.clear();
  state_->configure_caches();
}

bool waits_for_previous_grid(const render::RenderedUnit& unit) {
  return std::find(unit.headers.begin(), unit.headers.end(), kGridDependencyHeader) !=
         unit.headers.end();
}

CompiledKernel compile(const render::KernelSource& source, const CacheChain& chain) {
  return compile_source(source, render::TemplateSet::active(), chain);
}

CompiledKernel compile(const render::KernelRecipe& recipe, const CacheChain& chain) {
  const render::TemplateSet& templates = render::TemplateSet::active();
  return compile_source(recipe.source(templates), templates, chain);
}

CUcontext launch_context(CUstream stream) {
  CUcontext current = nullptr;
  INTFA_DRIVER(cuCtxGetCurrent, &current);
  if (current == nullptr) {
    // The primary context is retained once and kept for the life of the process.
    static CUcontext primary = [] {
      CUdevice device = 0;
      INTFA_DRIVER(cuDeviceGet, &device, 0);
      CUcontext context = nullptr;
      INTFA_DRIVER(cuDevicePrimaryCtxRetain, &context, device);
      return context;
    }();
    INTFA_DRIVER(cuCtxSetCurrent, primary);
    current = primary;
  }
  if (stream != nullptr) {
    CUcontext stream_context = nullptr;
    INTFA_DRIVER(cuStreamGetCtx, stream, &stream_context);
    if (stream_context != current) {
      throw InvalidArgument("stream", "(CUstream)",
                            "the stream belongs to another context than the one current on the "
                            "calling thread; make the stream's context current first");
    }
  }
  return current;
}

void CallKernels::throw_full() {
  throw std::logic_error("CallKernels: more than " + std::to_string(kCapacity) +
                         " kernels in one call");
}

bool parallel_compile_enabled() {
  static const bool enabled = env::flag("INTFA_PARALLEL_COMPILE", true);
  return enabled;
}

bool programmatic_launches_enabled() {
  static const bool enabled = env::flag("INTFA_PROGRAMMATIC_LAUNCH", true);
  return enabled;
}

namespace {

CUlaunchAttribute cluster_attribute(unsigned blocks) {
  CUlaunchAttribute attribute{};
  attribute.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attribute.value.clusterDim.x = blocks;
  attribute.value.clusterDim.y = 1;
  attribute.value.clusterDim.z = 1;
  return attribute;
}

CUlaunchConfig launch_config(const LaunchShape& shape, CUstream stream,
                             CUlaunchAttribute* attributes, unsigned attribute_count) {
  CUlaunchConfig config{};
  config.gridDimX = shape.grid[0];
  config.gridDimY = shape.grid[1];
  config.gridDimZ = shape.grid[2];
  config.blockDimX = shape.block[0];
  config.blockDimY = shape.block[1];
  config.blockDimZ = shape.block[2];
  config.sharedMemBytes = shape.dynamic_shared_bytes;
  config.hStream = stream;
  config.attrs = attributes;
  config.numAttrs = attribute_count;
  return config;
}

}  // namespace

void launch(const LoadedKernel& kernel, const LaunchShape& shape, CUstream stream,
            const void* params) {
  void* arguments[] = {const_cast<void*>(params)};
  // INTFA_PROGRAMMATIC_LAUNCH=0 (docs/environment.md) launches every kernel after the one
  // before it has ended, as cuLaunchKernel does.
  const bool programmatic = kernel.waits_for_previous_grid &&
                            device::has_programmatic_dependent_launch(kernel.arch) &&
                            programmatic_launches_enabled();
  const bool clusters = shape.cluster_blocks > 1;
  if (!programmatic && !clusters) {
    INTFA_DRIVER(cuLaunchKernel, kernel.function, shape.grid[0], shape.grid[1], shape.grid[2],
                 shape.block[0], shape.block[1], shape.block[2], shape.dynamic_shared_bytes, stream,
                 arguments, nullptr);
    return;
  }
  CUlaunchAttribute attributes[2]{};
  unsigned attribute_count = 0;
  if (programmatic) {
    CUlaunchAttribute& attribute = attributes[attribute_count++];
    attribute.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attribute.value.programmaticStreamSerializationAllowed = 1;
  }
  if (clusters) attributes[attribute_count++] = cluster_attribute(shape.cluster_blocks);
  const CUlaunchConfig config = launch_config(shape, stream, attributes, attribute_count);
  INTFA_DRIVER(cuLaunchKernelEx, &config, kernel.function, arguments, nullptr);
}

int max_active_clusters(const LoadedKernel& kernel, const LaunchShape& shape) {
  using Key = std::tuple<CUfunction, unsigned, unsigned, unsigned>;
  static std::mutex mutex;
  static std::map<Key, int> answers;
  const unsigned threads = shape.block[0] * shape.block[1] * shape.block[2];
  const Key key{kernel.function, shape.cluster_blocks, threads, shape.dynamic_shared_bytes};
  std::lock_guard<std::mutex> lock(mutex);
  if (const auto found = answers.find(key); found != answers.end()) return found->second;
  const device::DriverApi& api = device::driver();
  // Portable clusters have at most 8 blocks; larger ones (16 on the H100) are allowed per kernel.
  int clusters = 0;
  if (shape.cluster_blocks <= 8 ||
      api.cuFuncSetAttribute(kernel.function, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED,
                             1) == CUDA_SUCCESS) {
    CUlaunchAttribute attribute = cluster_attribute(shape.cluster_blocks);
    const CUlaunchConfig config = launch_config(shape, nullptr, &attribute, 1);
    if (api.cuOccupancyMaxActiveClusters(&clusters, kernel.function, &config) != CUDA_SUCCESS) {
      clusters = 0;
    }
  }
  answers.emplace(key, clusters);
  return clusters;
}

bool cluster_fits(const LoadedKernel& kernel, const LaunchShape& shape) {
  return max_active_clusters(kernel, shape) > 0;
}

}  // namespace intfa::launch
