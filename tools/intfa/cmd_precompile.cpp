// `intfa precompile`: compiles, with NVRTC and no GPU, every kernel a deployment may launch into a
// bundle directory described by a manifest (format: cache/README.md, "Deployment bundles"). A
// re-run compiles only what the bundle lacks.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "api/kernel_lists.hpp"
#include "cache/bundle.hpp"
#include "cache/disk_cache.hpp"
#include "common/file_io.hpp"
#include "common/locations.hpp"
#include "common/log.hpp"
#include "common/strings.hpp"
#include "device/arch.hpp"
#include "intfa/args.hpp"
#include "intfa/commands.hpp"
#include "intfa/errors.hpp"
#include "intfa/parallel.hpp"
#include "intfa/problem_options.hpp"
#include "launch/kernel_runtime.hpp"
#include "nvrtc/compiler.hpp"
#include "spec/attention_spec.hpp"
#include "tune/database_file.hpp"

namespace intfa::cli {

const char* const kPrecompileUsage =
    "usage: intfa precompile --out DIR [options]\n"
    "       intfa precompile --list [options]\n\n"
    "Compiles, without a GPU, every kernel a deployment may launch (for each arch, head dim,\n"
    "variant, dtype and causal off/on: the attention kernel and the quantize kernels the call\n"
    "runs) into DIR, and writes DIR/manifest.json. Point INTFA_DEPLOY_CACHE at DIR on the target\n"
    "machines and those kernels are never compiled there. Entries DIR already holds and that\n"
    "verify are kept, so a re-run compiles only what is missing; the kernels earlier runs listed\n"
    "stay in the manifest (remove DIR to start over). Runs into one DIR take turns.\n\n"
    "  --out DIR                  the bundle directory: new, empty or an earlier bundle; never\n"
    "                             the kernel cache this user's runs write (required unless\n"
    "                             --list is given)\n"
    "  --arch LIST                sm_80,sm_86,sm_87,sm_89,sm_90a,sm_100a,sm_120,sm_121\n"
    "                             (default: all of them)\n"
    "  --head-dims LIST           64,128,256 (default: all three)\n"
    "  --variants LIST            full,half (default: both)\n"
    "  --dtypes LIST              f16,bf16: inputs and output (default: f16)\n"
    "  --configs default|all|tuned  tile configs of the attention kernel: the heuristic's\n"
    "                             (default), every candidate of the tuner that fits the arch's\n"
    "                             shared memory, or the tuning database's winners (intfa tune)\n"
    "                             for the requested archs, head dims and variants, each with\n"
    "                             the dtype and numerics it was tuned for (--dtypes and the\n"
    "                             numerics options below do not apply)\n"
    "  --tuning-db FILE           the tuning database for --configs tuned (default:\n"
    "                             $INTFA_TUNE_DB, else tuning.json in the cache directory)\n"
    "  -j N, --jobs N             parallel NVRTC compiles (default: all cores)\n"
    "  --list                     print the kernels and stop; compiles nothing\n\n"
    "Numerics: the numerics options below (as for intfa run), and\n"
    "  --qk-bits 8|4              Q.K in INT8 (default) or INT4\n"
    "How Q and K are quantized (which quantize kernels; with --configs tuned too):\n"
    "  --smooth-k[=BOOL]          K smoothing: its mean pass, K's smoothed rows and Q's rows\n"
    "                             with the LSE term (on by default; --smooth-k=0: plain rows)\n"
    "  --rotate[=BOOL|auto]       Q's and K's rows rotated (incoherent processing); auto (the\n"
    "                             default): the heads whose keys have outlier channels\n\n"
    "Paged KV cache (include/intfa/paged.hpp):\n"
    "  --paged-bits LIST          8,4: also every kernel of the paged cache with these cache\n"
    "                             widths (append, decode, merge) for each arch, head dim and\n"
    "                             dtype (default: none)\n\n"
    "A flag is on alone, or takes a value: --list=no (1/0, true/false, on/off, yes/no).\n"
    "Integers take a k suffix (4k = 4096).\n\n"
    "Prints the number of kernels, how many were compiled now and how many were already\n"
    "present, failures, the bundle's size and the wall time. Exit 1 on any failure (the manifest\n"
    "is then left as it was; compiling stops once the bundle cannot be written). Check a bundle\n"
    "with: intfa cache verify DIR\n";

namespace {

namespace fs = std::filesystem;

enum class ConfigMode { kDefault, kAll, kTuned };

// What to put in the bundle: the cross product of these lists, causal off and on.
struct BundlePlan {
  fs::path directory;
  std::vector<device::Arch> archs;
  std::vector<int> head_dims;
  std::vector<Variant> variants;
  std::vector<DType> dtypes;
  ConfigMode configs = ConfigMode::kDefault;
  fs::path tuning_database;
  AttentionOptions numerics;  // p_encoding, p_scale, v_granularity, smooth_k, rotate_qk
  int qk_bits = 8;
  std::vector<int> paged_bits;  // the paged cache's kernels for these widths
  unsigned jobs = 0;  // 0: all cores
  bool list_only = false;
};

// Args knows only long options: "-j N" and "-jN" become "--jobs N".
Arguments with_long_options(const Arguments& arguments) {
  Arguments rewritten;
  for (const std::string& argument : arguments) {
    if (argument == "-j") {
      rewritten.push_back("--jobs");
    } else if (strings::starts_with(argument, "-j") && !strings::starts_with(argument, "--")) {
      rewritten.push_back("--jobs=" + argument.substr(2));
    } else {
      rewritten.push_back(argument);
    }
  }
  return rewritten;
}

std::vector<device::Arch> parse_archs(const Args& args) {
  std::vector<device::Arch> archs;
  for (const std::string& name : args.get_list("arch", {})) {
    const auto arch = device::parse_arch(name);
    if (!arch) throw UsageError("--arch " + name + ": expected " + device::arch_names());
    archs.push_back(*arch);
  }
  return archs.empty() ? device::all_archs() : archs;
}

std::vector<DType> parse_dtypes(const Args& args) {
  std::vector<DType> dtypes;
  for (const std::string& name : args.get_list("dtypes", {"f16"})) {
    if (name != "f16" && name != "bf16")
      throw UsageError("--dtypes " + name + ": expected f16 or bf16");
    dtypes.push_back(name == "f16" ? DType::kF16 : DType::kBF16);
  }
  return dtypes;
}

ConfigMode parse_config_mode(const std::string& text) {
  if (text == "default") return ConfigMode::kDefault;
  if (text == "all") return ConfigMode::kAll;
  if (text == "tuned") return ConfigMode::kTuned;
  throw UsageError("--configs " + text + ": expected default, all or tuned");
}

BundlePlan parse_plan(const Arguments& arguments) {
  Grammar grammar;
  grammar.values = {"out",     "arch",      "head-dims", "variants", "dtypes",
                    "configs", "tuning-db", "jobs",      "qk-bits",  "paged-bits"};
  for (const std::string& name : numerics_flag_names()) grammar.values.push_back(name);
  grammar.flags = qk_transform_flag_names();
  grammar.auto_flags = qk_transform_auto_flag_names();
  grammar.flags.push_back("list");
  const Args args(with_long_options(arguments), grammar);
  BundlePlan plan;
  plan.list_only = args.flag("list");
  const auto out = args.get("out");
  if (!out && !plan.list_only) {
    throw UsageError("missing --out DIR (or --list, to print the kernels without compiling them)");
  }
  if (out) {
    plan.directory = fs::absolute(*out).lexically_normal();
    std::error_code error;
    const fs::file_type type = fs::symlink_status(plan.directory, error).type();
    if (type != fs::file_type::not_found && type != fs::file_type::none &&
        !fs::is_directory(plan.directory, error)) {
      throw UsageError("--out " + *out + ": it is " + files::file_type_name(type) +
                       ", not a directory");
    }
  }
  plan.archs = parse_archs(args);
  plan.head_dims = parse_head_dims(args, {64, 128, 256});
  plan.variants = parse_variant_list(args, {"full", "half"});
  plan.dtypes = parse_dtypes(args);
  plan.configs = parse_config_mode(args.get_or("configs", "default"));
  plan.tuning_database = args.get("tuning-db") ? fs::path(*args.get("tuning-db"))
                                               : tune::default_database_path().value_or(fs::path());
  // The single-valued options of parse_numerics (--variant, --dtype, ...) are rejected above, so
  // it only reads --p, --p-scale, --v-scale, --k-scale and --qk-bits here.
  AttentionProblem unused_problem;
  DType unused_type = DType::kF16;
  parse_numerics(args, unused_problem, plan.numerics, unused_type);
  parse_qk_transforms(args, plan.numerics);
  plan.qk_bits = unused_problem.qk_bits;
  // A combination no call can make (--k-scale block with --qk-bits 4) is a usage error naming
  // the option, as for intfa run, not an error of the kernel list below.
  validate_grid(unused_problem, plan.numerics, plan.variants, plan.head_dims, {1}, 1, 1);
  plan.jobs = static_cast<unsigned>(args.get_int("jobs", 0, 1, 1024));
  for (long bits : args.get_int_list("paged-bits", {}, 4, 8)) {
    if (bits != 8 && bits != 4) {
      throw UsageError("--paged-bits " + std::to_string(bits) + ": expected 8 or 4");
    }
    plan.paged_bits.push_back(static_cast<int>(bits));
  }
  return plan;
}

// --- Which kernels ---

template <typename Value>
bool contains(const std::vector<Value>& values, const Value& value) {
  return std::find(values.begin(), values.end(), value) != values.end();
}

// The tuning database's entries for the plan's archs, head dims and variants.
std::vector<tune::TuningEntry> tuned_entries(const BundlePlan& plan) {
  std::optional<tune::TuningDatabase> database;
  if (!plan.tuning_database.empty()) database = tune::read_database_file(plan.tuning_database);
  if (!database) {
    throw UsageError("no tuning database at " +
                     (plan.tuning_database.empty() ? std::string("(no cache directory)")
                                                   : plan.tuning_database.string()) +
                     " (run intfa tune on the GPU first)");
  }
  std::vector<tune::TuningEntry> entries;
  for (const tune::TuningEntry& entry : database->entries()) {
    const attention::SpecRequest& request = entry.bucket.request;
    if (contains(plan.archs, entry.device.arch) && contains(plan.head_dims, request.head_dim) &&
        contains(plan.variants, request.variant)) {
      entries.push_back(entry);
    }
  }
  if (entries.empty()) {
    throw InvalidArgument("--tuning-db", plan.tuning_database.string(),
                          "expected tuned entries for the requested archs, head dims and "
                          "variants; it has none");
  }
  return entries;
}

// The attention tile configs to bundle for `request` under --configs default or all (checked
// against the arch by aot::attention_call_specs).
std::vector<KernelConfig> attention_configs(const attention::SpecRequest& request,
                                            const BundlePlan& plan) {
  if (plan.configs == ConfigMode::kAll) {
    // The tuner never picks a config that needs more shared memory than the arch offers.
    return attention::fitting_configs(request, attention::candidate_configs(request),
                                      device::default_max_shared_bytes(request.arch));
  }
  return attention::heuristic_configs(request);
}

// Every kernel of the plan, each once, in a stable order: the tuning database's for --configs
// tuned, else by arch, dtype, head dim, variant and causal.
std::vector<families::AnySpec> bundle_specs(const BundlePlan& plan) {
  aot::KernelList list;
  // The paged cache's kernels, after the attention calls' (for every config mode).
  auto add_paged = [&] {
    for (device::Arch arch : plan.archs)
      for (DType dtype : plan.dtypes)
        for (int head_dim : plan.head_dims)
          for (int bits : plan.paged_bits) list.add(aot::paged_specs(arch, head_dim, bits, dtype));
  };
  if (plan.configs == ConfigMode::kTuned) {
    for (const tune::TuningEntry& entry : tuned_entries(plan)) {
      const attention::SpecRequest& request = entry.bucket.request;
      try {
        list.add(aot::attention_call_specs(request, request.output_type, plan.numerics,
                                           {entry.best.config}));
      } catch (const Error& error) {
        // The runtime skips such an entry with a warning and runs the heuristic's config: the
        // bundle holds that one instead, and the other entries are still bundled.
        log::warn("the tuned config " + entry.best.config.to_string() + " for " +
                  entry.bucket.to_string() + " in " + plan.tuning_database.string() +
                  " cannot run on " + device::arch_name(request.arch) + " (" + error.what() +
                  "); the heuristic's config is bundled instead, as the runtime uses it");
        list.add(aot::attention_call_specs(request, request.output_type, plan.numerics));
      }
    }
    add_paged();
    return list.specs();
  }
  for (device::Arch arch : plan.archs) {
    for (DType dtype : plan.dtypes) {
      for (int head_dim : plan.head_dims) {
        for (Variant variant : plan.variants) {
          for (bool causal : {false, true}) {
            AttentionProblem problem;
            problem.head_dim = head_dim;
            problem.variant = variant;
            problem.qk_bits = plan.qk_bits;
            problem.causal = causal;
            const attention::SpecRequest request =
                spec_request(arch, problem, plan.numerics, dtype);
            list.add(aot::attention_call_specs(request, dtype, plan.numerics,
                                               attention_configs(request, plan)));
          }
        }
      }
    }
  }
  add_paged();
  return list.specs();
}

// --- Writing the bundle ---

// Compiles specs into the bundle directory (never into the user cache) and remembers each one's
// key for the manifest. compile() is called from several threads.
class BundleWriter {
 public:
  explicit BundleWriter(const fs::path& directory)
      : entries_(directory, cache::DiskCache::Access::kWriteBundle, "--out") {
    if (!entries_.writable()) throw unwritable();
  }

  // Once the bundle is known unwritable (a full disk) the remaining kernels are not compiled.
  launch::CompiledKernel compile(const families::AnySpec& spec) {
    if (!entries_.writable()) throw unwritable();
    launch::CompiledKernel compiled = launch::compile(spec, launch::CacheChain{nullptr, &entries_});
    if (!entries_.writable()) throw unwritable();
    std::lock_guard<std::mutex> lock(mutex_);
    keys_[spec] = compiled.key;
    return compiled;
  }

  // The manifest of `specs`, each entry described from its file as it is now.
  cache::Manifest manifest(const std::vector<families::AnySpec>& specs) const {
    cache::Manifest manifest = cache::Manifest::for_this_build();
    for (const families::AnySpec& spec : specs) {
      const auto key = keys_.find(spec);
      if (key == keys_.end()) throw InternalError("no key for " + spec.to_string());
      manifest.entries.push_back(
          cache::describe_entry(directory(), key->second, families::kernel_source(spec)));
    }
    return manifest;
  }

  const fs::path& directory() const { return entries_.directory(); }

  CacheError unwritable() const {
    return CacheError("cannot write the bundle " + directory().string() +
                      " (see the warning above)");
  }

 private:
  cache::DiskCache entries_;
  std::mutex mutex_;
  std::unordered_map<families::AnySpec, cache::CacheKey, families::AnySpecHash> keys_;
};

std::uint64_t directory_bytes(const fs::path& directory) {
  std::uint64_t total = 0;
  std::error_code error;
  for (fs::recursive_directory_iterator it(directory, error), end; !error && it != end;
       it.increment(error)) {
    if (it->is_regular_file(error)) total += it->file_size(error);
  }
  return total;
}

std::size_t unlisted_entries(const fs::path& directory, const cache::Manifest& manifest) {
  std::size_t count = 0;
  for (const cache::EntryInfo& entry :
       cache::DiskCache(directory, cache::DiskCache::Access::kReadOnly).list()) {
    if (manifest.find(entry.key) == nullptr) count++;
  }
  return count;
}

// `path` with every link it passes through followed as far as it leads (a dangling link's target
// too), normalized, without a trailing '/': two spellings of one directory, existing or not,
// compare equal. Where a link cannot be read the path stays as far as it was resolved.
fs::path resolved_directory(const fs::path& path) {
  fs::path current = fs::absolute(path).lexically_normal();
  for (int hops = 0; hops < 40; ++hops) {
    std::error_code error;
    const fs::path canonical = fs::weakly_canonical(current, error);
    if (error) break;
    current = canonical;
    if (fs::symlink_status(current, error).type() != fs::file_type::symlink) break;
    const fs::path target = fs::read_symlink(current, error);
    if (error) break;
    current = (target.is_absolute() ? target : current.parent_path() / target).lexically_normal();
  }
  return current.has_filename() ? current : current.parent_path();
}

// The checks before anything is written into `directory`: precompile writes only into a new or
// empty directory or a bundle, never among a user's files (its CACHEDIR.TAG would drop them from
// backups that honour it, and a user's own manifest.json would be replaced) and never into the
// kernel cache this user's runs write (a manifest there makes the runtime read it as a read-only
// bundle: every later run would compile again).
void check_bundle_directory(const fs::path& directory) {
  if (const auto user_cache = locations::default_cache_location()) {
    if (resolved_directory(directory) == resolved_directory(user_cache->directory)) {
      throw CacheError("--out " + directory.string() + " is the kernel cache this user's runs " +
                       "write (named by " + user_cache->variable +
                       "): a bundle there would make it read-only; give another directory " +
                       "(nothing was written)");
    }
  }
  std::error_code error;
  const fs::file_type type = fs::status(directory, error).type();
  if (type == fs::file_type::not_found) return;
  if (error) throw CacheError("cannot read --out " + directory.string() + ": " + error.message());
  if (cache::is_bundle_directory(directory)) return;
  const bool empty = fs::is_empty(directory, error);
  if (error) throw CacheError("cannot read --out " + directory.string() + ": " + error.message());
  if (!empty) {
    throw CacheError("--out " + directory.string() + " holds files and is not an intfa " +
                     "bundle (no " + cache::kManifestFileName + " of intfa's, no " +
                     cache::kBundleLockFileName + "): give a new or empty directory, or an " +
                     "earlier bundle (nothing was written)");
  }
}

// The bundle's manifest before this run, to merge this run's entries into; nullopt when there is
// none, or none this build can read (said, since its kernels then drop out of the manifest).
std::optional<cache::Manifest> earlier_manifest(const fs::path& directory) {
  if (!cache::holds_manifest(directory)) return std::nullopt;
  try {
    return cache::read_manifest(directory);
  } catch (const cache::ManifestError& error) {
    std::printf("note: the earlier manifest is replaced, it could not be read: %s\n", error.what());
    return std::nullopt;
  }
}

int list_specs(const std::vector<families::AnySpec>& specs) {
  for (const families::AnySpec& spec : specs) std::printf("%s\n", spec.to_string().c_str());
  std::printf("%zu kernels\n", specs.size());
  return 0;
}

}  // namespace

int run_precompile(const Arguments& arguments) {
  const BundlePlan plan = parse_plan(arguments);
  const std::vector<families::AnySpec> specs = bundle_specs(plan);
  if (plan.list_only) return list_specs(specs);

  const auto started = std::chrono::steady_clock::now();
  const std::uint64_t compiles_before = nvrtc::compile_count();
  check_bundle_directory(plan.directory);
  const cache::BundleLock lock(plan.directory, [&plan] {
    std::printf("waiting for another intfa precompile writing into %s\n", plan.directory.c_str());
    std::fflush(stdout);
  });
  BundleWriter writer(plan.directory);
  std::printf("precompiling %zu kernels into %s (NVRTC %s, no GPU needed)\n", specs.size(),
              plan.directory.c_str(), nvrtc::version().to_string().c_str());
  std::fflush(stdout);
  const CompileSummary summary = compile_in_parallel(
      specs, "precompile", plan.jobs,
      [&writer](const families::AnySpec& spec) { return writer.compile(spec); });
  // Every kernel after the bundle turned unwritable fails alike: one line for all of them.
  const std::string unwritable = writer.unwritable().what();
  std::size_t not_written = 0;
  for (const std::string& failure : summary.failures) {
    if (strings::ends_with(failure, unwritable) && not_written++ > 0) continue;
    std::printf("failed: %s\n", failure.c_str());
  }
  if (not_written > 1) {
    std::printf("failed: %zu more kernels: %s\n", not_written - 1, unwritable.c_str());
  }
  std::string manifest_note;
  if (summary.failures.empty()) {
    cache::Manifest manifest = writer.manifest(specs);
    if (const auto earlier = earlier_manifest(plan.directory)) {
      const std::size_t run_entries = manifest.entries.size();
      manifest = cache::merged_manifest(plan.directory, *earlier, std::move(manifest));
      if (const std::size_t kept = manifest.entries.size() - run_entries) {
        manifest_note = std::to_string(kept) + " kernels listed by earlier runs stay listed\n";
      }
      if (const std::string skew = cache::incompatibility(*earlier); !skew.empty()) {
        manifest_note = "note: the earlier manifest's " + std::to_string(earlier->entries.size()) +
                        " kernels are no longer listed: " + skew + "\n";
      }
    }
    cache::write_manifest(plan.directory, manifest);
    manifest_note += "manifest: " + cache::manifest_path(plan.directory).string();
    if (const std::size_t extra = unlisted_entries(plan.directory, manifest)) {
      manifest_note += "\nnote: " + std::to_string(extra) +
                       " entries in the directory are not in this manifest (left by an earlier "
                       "run); the runtime ignores them and intfa cache verify reports them";
    }
  } else {
    manifest_note = "manifest not written: the bundle is incomplete";
  }
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::printf("%zu kernels\n", specs.size());
  std::printf("  compiled now: %llu\n",
              static_cast<unsigned long long>(nvrtc::compile_count() - compiles_before));
  std::printf("  already present: %zu\n", summary.cached);
  std::printf("  failures: %zu\n", summary.failures.size());
  std::printf("  bundle size: %s\n", strings::human_bytes(directory_bytes(plan.directory)).c_str());
  std::printf("  wall time: %.1f s\n", wall_s);
  std::printf("%s\n", manifest_note.c_str());
  return summary.failures.empty() ? 0 : 1;
}

}  // namespace intfa::cli
