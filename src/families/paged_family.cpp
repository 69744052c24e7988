#include "families/paged_family.hpp"

#include <algorithm>
#include <tuple>

#include "common/strings.hpp"
#include "families/spec_format.hpp"
#include "intfa/errors.hpp"
#include "numerics/numerics.hpp"
#include "numerics/option_names.hpp"

namespace intfa::paged {
namespace {

namespace format = families::spec_format;

constexpr std::size_t kWorkspaceAlignment = 256;

const PagedKernel kKernels[] = {PagedKernel::kAppend, PagedKernel::kDecode,
                                PagedKernel::kMergeStates, PagedKernel::kGather};

std::size_t align_up(std::size_t bytes) {
  return (bytes + kWorkspaceAlignment - 1) / kWorkspaceAlignment * kWorkspaceAlignment;
}

kernels::ElementType element_type(DType dtype) {
  return dtype == DType::kBF16 ? kernels::ElementType::kBF16 : kernels::ElementType::kF16;
}

PagedSpec family_spec(PagedKernel kernel, device::Arch arch, int head_dim) {
  PagedSpec spec;
  spec.kernel = kernel;
  spec.arch = arch;
  spec.head_dim = head_dim;
  return spec;
}

std::string type_argument(kernels::ElementType type) {
  return "intfa::kernels::ElementType::" + render::element_type_enumerator(type);
}

std::string bits_name(int bits) {
  return bits == 4 ? "i4" : "i8";
}

// The unit's header and kernel.
render::Instantiation instantiation(const PagedSpec& spec) {
  const std::string head_dim = std::to_string(spec.head_dim);
  switch (spec.kernel) {
    case PagedKernel::kAppend:
      return {"decode/paged_append.cuh",
              "intfa::kernels::paged_append<" + head_dim + ", " + std::to_string(spec.bits) + ", " +
                  type_argument(spec.input_type) + ">",
              "intfa::kernels::PagedAppendParams"};
    case PagedKernel::kDecode:
      return {
          "decode/paged_decode.cuh",
          "intfa::kernels::paged_decode<" +
              strings::join(
                  {head_dim, std::to_string(spec.bits), type_argument(spec.input_type),
                   type_argument(spec.output_type), std::to_string(spec.config.block_rows),
                   std::to_string(spec.config.stage_tokens), std::to_string(spec.config.stages)},
                  ", ") +
              ">",
          "intfa::kernels::PagedDecodeParams"};
    case PagedKernel::kMergeStates:
      return {"decode/merge_states.cuh",
              "intfa::kernels::merge_states<" + head_dim + ", " + type_argument(spec.input_type) +
                  ", " + type_argument(spec.output_type) + ">",
              "intfa::kernels::MergeStatesParams"};
    case PagedKernel::kGather:
      return {"decode/paged_gather.cuh",
              "intfa::kernels::paged_gather<" + head_dim + ", " + std::to_string(spec.bits) + ", " +
                  type_argument(spec.output_type) + ">",
              "intfa::kernels::PagedGatherParams"};
  }
  throw InternalError("unknown PagedKernel");
}

// What to_string says after "kernel arch dN".
std::string describe(const PagedSpec& spec) {
  switch (spec.kernel) {
    case PagedKernel::kAppend:
      return " " + render::element_type_name(spec.input_type) + "->" + bits_name(spec.bits);
    case PagedKernel::kDecode:
      return " " + bits_name(spec.bits) + " m" + std::to_string(spec.config.block_rows) + " n" +
             std::to_string(spec.config.stage_tokens) + " s" + std::to_string(spec.config.stages) +
             " " + render::element_type_name(spec.input_type) + "->" +
             render::element_type_name(spec.output_type);
    case PagedKernel::kMergeStates:
      return " " + render::element_type_name(spec.input_type) + "->" +
             render::element_type_name(spec.output_type);
    case PagedKernel::kGather:
      return " " + bits_name(spec.bits) + "->i8," + render::element_type_name(spec.output_type);
  }
  throw InternalError("unknown PagedKernel");
}

// The decode kernel's warps (the spec JSON's "warps"; the others have none).
int warps_of(const PagedSpec& spec) {
  return spec.kernel == PagedKernel::kDecode ? kernels::kPagedDecodeWarps : 0;
}

}  // namespace

std::string kernel_name(PagedKernel kernel) {
  switch (kernel) {
    case PagedKernel::kAppend:
      return "paged_append";
    case PagedKernel::kDecode:
      return "paged_decode";
    case PagedKernel::kMergeStates:
      return "merge_states";
    case PagedKernel::kGather:
      return "paged_gather";
  }
  throw InternalError("unknown PagedKernel");
}

bool names_kernel(const std::string& family) {
  for (PagedKernel kernel : kKernels) {
    if (kernel_name(kernel) == family) return true;
  }
  return false;
}

bool operator==(const PagedSpec& a, const PagedSpec& b) {
  auto fields = [](const PagedSpec& s) {
    return std::tie(s.kernel, s.arch, s.head_dim, s.bits, s.input_type, s.output_type,
                    s.config.block_rows, s.config.stage_tokens, s.config.stages);
  };
  return fields(a) == fields(b);
}

std::string PagedSpec::to_string() const {
  return format::text_heading(kernel_name(kernel), arch, head_dim) + describe(*this);
}

json::Value PagedSpec::to_json() const {
  json::Value object = format::object_for(kernel_name(kernel), arch, head_dim);
  object.set("block_m", config.block_rows);
  object.set("block_n", config.stage_tokens);
  object.set("warps", warps_of(*this));
  object.set("stages", config.stages);
  object.set("qk_bits", bits);
  object.set("variant", option_name(Variant::kFullInt8));
  object.set("input_type", render::element_type_name(input_type));
  object.set("output_type", render::element_type_name(output_type));
  // The attention and quantize kernels' members (spec_format.hpp's one list), at the values a
  // paged spec has always written.
  object.set("causal", false);
  numerics::write_json(object, paper_numerics());
  for (const char* member : {"smooth_k", "varlen", "q_dot_k_mean", "rotate", "quantizes_q"}) {
    object.set(member, false);
  }
  return object;
}

PagedSpec PagedSpec::from_json(const json::Value& value) {
  return format::read([&] {
    PagedSpec spec;
    spec.kernel = format::kernel_member(value, kernel_name, kKernels);
    spec.arch = format::arch_member(value);
    spec.head_dim = format::int_member(value, "head_dim");
    spec.config.block_rows = format::int_member(value, "block_m");
    spec.config.stage_tokens = format::int_member(value, "block_n");
    spec.config.stages = format::int_member(value, "stages");
    spec.bits = format::int_member(value, "qk_bits");
    spec.input_type = format::element_type_member(value, "input_type");
    spec.output_type = format::element_type_member(value, "output_type");
    return spec;
  });
}

render::KernelId kernel_id(const PagedSpec& s) {
  using format::small_bit;
  const std::uint64_t small = small_bit(static_cast<unsigned>(s.kernel), format::kKernelTag) |
                              small_bit(static_cast<unsigned>(s.arch), format::kArch) |
                              small_bit(static_cast<unsigned>(s.input_type), format::kInputType) |
                              small_bit(static_cast<unsigned>(s.output_type), format::kOutputType);
  return render::KernelId{{small, format::two_fields(s.head_dim, s.config.block_rows),
                           format::two_fields(s.config.stage_tokens, warps_of(s)),
                           format::two_fields(s.config.stages, s.bits),
                           numerics::code(paper_numerics())}};
}

render::KernelSource kernel_source(const PagedSpec& spec, const render::TemplateSet& templates) {
  return format::source(
      kernel_name(spec.kernel), spec.arch, spec.head_dim, [&] { return instantiation(spec); },
      templates, spec.to_string(), spec.to_json());
}

PagedSpec append_spec(device::Arch arch, int head_dim, int bits, kernels::ElementType input) {
  PagedSpec spec = family_spec(PagedKernel::kAppend, arch, head_dim);
  spec.bits = bits;
  spec.input_type = input;
  return spec;
}

PagedSpec decode_spec(device::Arch arch, int head_dim, int bits, kernels::ElementType query,
                      kernels::ElementType output, const PagedDecodeConfig& config) {
  PagedSpec spec = family_spec(PagedKernel::kDecode, arch, head_dim);
  spec.bits = bits;
  spec.input_type = query;
  spec.output_type = output;
  spec.config = config;
  return spec;
}

PagedSpec merge_spec(device::Arch arch, int head_dim, kernels::ElementType state,
                     kernels::ElementType output) {
  PagedSpec spec = family_spec(PagedKernel::kMergeStates, arch, head_dim);
  spec.input_type = state;
  spec.output_type = output;
  return spec;
}

PagedSpec gather_spec(device::Arch arch, int head_dim, int bits, kernels::ElementType v_type) {
  PagedSpec spec = family_spec(PagedKernel::kGather, arch, head_dim);
  spec.bits = bits;
  spec.output_type = v_type;
  return spec;
}

int decode_shared_bytes(const PagedSpec& decode) {
  return kernels::paged_decode_shared_bytes(decode.head_dim, decode.bits, decode.config.block_rows,
                                            decode.config.stage_tokens, decode.config.stages);
}

void check_decode_config(const PagedSpec& decode, int max_shared_bytes) {
  if (decode.config.block_rows != 8 && decode.config.block_rows != 16 &&
      decode.config.block_rows != 32 && decode.config.block_rows != 64) {
    throw InvalidArgument("config.block_rows", std::to_string(decode.config.block_rows),
                          "expected 8, 16, 32 or 64");
  }
  if (decode.config.stage_tokens != 64 && decode.config.stage_tokens != 128) {
    throw InvalidArgument("config.stage_tokens", std::to_string(decode.config.stage_tokens),
                          "expected 64 or 128");
  }
  if (decode.config.stages < 2 || decode.config.stages > 4) {
    throw InvalidArgument("config.stages", std::to_string(decode.config.stages),
                          "expected 2, 3 or 4");
  }
  const int shared = decode_shared_bytes(decode);
  if (shared > max_shared_bytes) {
    throw Unsupported("the paged decode config m" + std::to_string(decode.config.block_rows) +
                      " n" + std::to_string(decode.config.stage_tokens) + " s" +
                      std::to_string(decode.config.stages) + " needs " + std::to_string(shared) +
                      " bytes of shared memory at d=" + std::to_string(decode.head_dim) + " and " +
                      std::to_string(decode.bits) + " bits; the device allows " +
                      std::to_string(max_shared_bytes));
  }
}

PagedDecodeConfig heuristic_config(int rows, int head_dim, int bits) {
  (void)bits;
  PagedDecodeConfig config;
  // Up to 8 rows (one query of GQA up to 8, or a few queries of smaller groups) the narrow
  // block: no accumulators for rows it does not have, a block more per SM.
  config.block_rows = rows <= 8 ? 8 : rows <= 16 ? 16 : rows <= 32 ? 32 : 64;
  config.stage_tokens = 64;
  // Blocks of one row tile (8 and 16 rows) wait for a stage per warp (paged_decode.cuh); for them
  // two stages measured faster than three, while 64-row blocks lose with two
  // (bench/history/2026-11-27.md, "Why the heuristic chooses what it chooses (moved from code
  // comments)"). d = 256 has room for two.
  config.stages = head_dim > 128 || config.block_rows <= 16 ? 2 : 3;
  return config;
}

std::vector<PagedDecodeConfig> candidate_configs(int rows, int head_dim, int bits,
                                                 int max_shared_bytes) {
  const PagedDecodeConfig heuristic = heuristic_config(rows, head_dim, bits);
  std::vector<PagedDecodeConfig> configs = {heuristic};
  for (int block_rows : {8, 16, 32, 64}) {
    if (block_rows < heuristic.block_rows) continue;  // fewer rows per block only re-read K/V
    for (int stage_tokens : {64, 128}) {
      for (int stages : {2, 3, 4}) {
        const PagedDecodeConfig config{block_rows, stage_tokens, stages};
        if (config.block_rows == heuristic.block_rows &&
            config.stage_tokens == heuristic.stage_tokens && config.stages == heuristic.stages) {
          continue;
        }
        const int shared =
            kernels::paged_decode_shared_bytes(head_dim, bits, block_rows, stage_tokens, stages);
        if (shared <= max_shared_bytes) configs.push_back(config);
      }
    }
  }
  return configs;
}

PagedDecodeConfig resolve_config(const PagedDecodeConfig& requested, int rows, int head_dim,
                                 int bits) {
  const PagedDecodeConfig heuristic = heuristic_config(rows, head_dim, bits);
  PagedDecodeConfig config = requested;
  if (config.block_rows == 0) config.block_rows = heuristic.block_rows;
  if (config.stage_tokens == 0) config.stage_tokens = heuristic.stage_tokens;
  if (config.stages == 0) config.stages = heuristic.stages;
  return config;
}

int heuristic_splits(long long units, int max_seq_len, int resident_blocks) {
  if (units <= 0 || resident_blocks <= 0) return 1;
  const int longest_useful = std::max(1, (max_seq_len + kMinSplitTokens - 1) / kMinSplitTokens);
  const int most = std::min(kMaxSplits, longest_useful);
  int best = 1;
  double best_fill = 0;
  for (int splits = 1; splits <= most; ++splits) {
    const long long blocks = units * splits;
    const long long waves = (blocks + resident_blocks - 1) / resident_blocks;
    const double fill = static_cast<double>(blocks) / static_cast<double>(waves * resident_blocks);
    if (fill >= 0.9) return splits;
    if (fill > best_fill + 1e-9) {
      best = splits;
      best_fill = fill;
    }
  }
  return best;
}

int merge_state_groups(int num_states, int head_dim) {
  int groups = 1;
  while (groups < kernels::paged_rows_per_set(head_dim) &&
         groups * kernels::kMergeStatesPerThread < num_states) {
    groups *= 2;
  }
  return groups;
}

bool splits_may_merge_in_clusters(const PagedSpec& decode, int splits) {
  return splits == kernels::kPagedClusterMergeSplits && device::arch_sm_number(decode.arch) >= 90 &&
         kernels::paged_decode_cluster_state_bytes(decode.head_dim, decode.config.block_rows) <=
             decode_shared_bytes(decode);
}

bool clusters_take_no_more_waves(long long clusters, int splits, long long clusters_at_once,
                                 long long resident_blocks) {
  if (clusters <= 0 || clusters_at_once <= 0 || resident_blocks <= 0) return false;
  const long long cluster_waves = (clusters + clusters_at_once - 1) / clusters_at_once;
  const long long block_waves = (clusters * splits + resident_blocks - 1) / resident_blocks;
  return cluster_waves <= block_waves;
}

int resident_blocks(const PagedSpec& decode, const device::DeviceInfo& info) {
  // The driver reserves 1 KB of shared memory per block (CUDA C++ Programming Guide, "Shared
  // Memory" of compute capabilities 8.x and 9.0).
  constexpr int kReservedSharedBytes = 1024;
  const int per_block = decode_shared_bytes(decode) + kReservedSharedBytes;
  const int by_shared =
      info.max_shared_bytes_per_sm > 0
          ? std::max(1, info.max_shared_bytes_per_sm / per_block)
          : kernels::paged_decode_min_blocks(decode.head_dim, decode.config.block_rows);
  const int per_sm = std::min(
      kernels::paged_decode_min_blocks(decode.head_dim, decode.config.block_rows), by_shared);
  return std::max(1, info.sm_count) * per_sm;
}

std::size_t workspace_lse_offset(int splits, int batch, int q_len, int heads_q, int head_dim) {
  if (splits <= 1) return 0;
  const std::size_t rows = static_cast<std::size_t>(splits) * batch * q_len * heads_q;
  return align_up(rows * head_dim * sizeof(float));
}

std::size_t workspace_bytes(int splits, int batch, int q_len, int heads_q, int head_dim) {
  if (splits <= 1) return 0;
  const std::size_t rows = static_cast<std::size_t>(splits) * batch * q_len * heads_q;
  return workspace_lse_offset(splits, batch, q_len, heads_q, head_dim) +
         align_up(rows * sizeof(float));
}

std::vector<PagedSpec> family_specs(device::Arch arch, int head_dim, int bits, DType dtype) {
  const kernels::ElementType type = element_type(dtype);
  std::vector<PagedSpec> specs = {append_spec(arch, head_dim, bits, type)};
  for (int rows : {8, 16, 32, 64}) {  // each block size the heuristic picks
    specs.push_back(
        decode_spec(arch, head_dim, bits, type, type, heuristic_config(rows, head_dim, bits)));
  }
  specs.push_back(merge_spec(arch, head_dim, kernels::ElementType::kF32, type));
  specs.push_back(merge_spec(arch, head_dim, type, type));
  specs.push_back(gather_spec(arch, head_dim, bits, type));
  return specs;
}

kernels::PagedCacheParams cache_params(const PagedKVCache& cache) {
  kernels::PagedCacheParams params{};
  params.k_data = static_cast<kernels::u8*>(cache.k_data);
  params.v_data = static_cast<kernels::u8*>(cache.v_data);
  params.k_scale = cache.k_scale;
  params.v_scale = cache.v_scale;
  params.k_offset = cache.k_offset;
  params.num_pages = cache.num_pages;
  params.page_size = cache.page_size;
  params.page_shift = 0;
  while ((1 << params.page_shift) < cache.page_size) ++params.page_shift;
  params.heads_kv = cache.heads_kv;
  return params;
}

}  // namespace intfa::paged
