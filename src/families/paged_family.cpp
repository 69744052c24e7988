#include "families/paged_family.hpp"

#include <algorithm>

#include "common/strings.hpp"
#include "intfa/errors.hpp"
#include "numerics/option_names.hpp"

namespace intfa::paged {
namespace {

constexpr std::size_t kWorkspaceAlignment = 256;

std::size_t align_up(std::size_t bytes) {
  return (bytes + kWorkspaceAlignment - 1) / kWorkspaceAlignment * kWorkspaceAlignment;
}

kernels::ElementType element_type(DType dtype) {
  return dtype == DType::kBF16 ? kernels::ElementType::kBF16 : kernels::ElementType::kF16;
}

families::KernelSpec family_spec(families::KernelFamily family, device::Arch arch, int head_dim) {
  families::KernelSpec spec;
  spec.family = family;
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

}  // namespace

families::KernelSpec append_spec(device::Arch arch, int head_dim, int bits,
                                 kernels::ElementType input) {
  families::KernelSpec spec = family_spec(families::KernelFamily::kPagedAppend, arch, head_dim);
  spec.qk_bits = bits;
  spec.input_type = input;
  return spec;
}

families::KernelSpec decode_spec(device::Arch arch, int head_dim, int bits,
                                 kernels::ElementType query, kernels::ElementType output,
                                 const PagedDecodeConfig& config) {
  families::KernelSpec spec = family_spec(families::KernelFamily::kPagedDecode, arch, head_dim);
  spec.qk_bits = bits;
  spec.input_type = query;
  spec.output_type = output;
  spec.block_m = config.block_rows;
  spec.block_n = config.stage_tokens;
  spec.stages = config.stages;
  spec.warps = kernels::kPagedDecodeWarps;
  return spec;
}

families::KernelSpec merge_spec(device::Arch arch, int head_dim, kernels::ElementType state,
                                kernels::ElementType output) {
  families::KernelSpec spec = family_spec(families::KernelFamily::kMergeStates, arch, head_dim);
  spec.input_type = state;
  spec.output_type = output;
  return spec;
}

render::Instantiation instantiation(const families::KernelSpec& spec) {
  const std::string head_dim = std::to_string(spec.head_dim);
  switch (spec.family) {
    case families::KernelFamily::kPagedAppend:
      return {"decode/paged_append.cuh",
              "intfa::kernels::paged_append<" + head_dim + ", " + std::to_string(spec.qk_bits) +
                  ", " + type_argument(spec.input_type) + ">",
              "intfa::kernels::PagedAppendParams"};
    case families::KernelFamily::kPagedDecode:
      return {
          "decode/paged_decode.cuh",
          "intfa::kernels::paged_decode<" +
              strings::join({head_dim, std::to_string(spec.qk_bits), type_argument(spec.input_type),
                             type_argument(spec.output_type), std::to_string(spec.block_m),
                             std::to_string(spec.block_n), std::to_string(spec.stages)},
                            ", ") +
              ">",
          "intfa::kernels::PagedDecodeParams"};
    case families::KernelFamily::kMergeStates:
      return {"decode/merge_states.cuh",
              "intfa::kernels::merge_states<" + head_dim + ", " + type_argument(spec.input_type) +
                  ", " + type_argument(spec.output_type) + ">",
              "intfa::kernels::MergeStatesParams"};
    default:
      throw InternalError("not a paged-cache kernel: " + families::family_name(spec.family));
  }
}

std::string describe(const families::KernelSpec& spec) {
  switch (spec.family) {
    case families::KernelFamily::kPagedAppend:
      return " " + render::element_type_name(spec.input_type) + "->" + bits_name(spec.qk_bits);
    case families::KernelFamily::kPagedDecode:
      return " " + bits_name(spec.qk_bits) + " m" + std::to_string(spec.block_m) + " n" +
             std::to_string(spec.block_n) + " s" + std::to_string(spec.stages) + " " +
             render::element_type_name(spec.input_type) + "->" +
             render::element_type_name(spec.output_type);
    case families::KernelFamily::kMergeStates:
      return " " + render::element_type_name(spec.input_type) + "->" +
             render::element_type_name(spec.output_type);
    default:
      throw InternalError("not a paged-cache kernel: " + families::family_name(spec.family));
  }
}

int decode_shared_bytes(const families::KernelSpec& decode) {
  return kernels::paged_decode_shared_bytes(decode.head_dim, decode.qk_bits, decode.block_m,
                                            decode.block_n, decode.stages);
}

void check_decode_config(const families::KernelSpec& decode, int max_shared_bytes) {
  if (decode.block_m != 8 && decode.block_m != 16 && decode.block_m != 32 && decode.block_m != 64) {
    throw InvalidArgument("config.block_rows", std::to_string(decode.block_m),
                          "expected 8, 16, 32 or 64");
  }
  if (decode.block_n != 64 && decode.block_n != 128) {
    throw InvalidArgument("config.stage_tokens", std::to_string(decode.block_n),
                          "expected 64 or 128");
  }
  if (decode.stages < 2 || decode.stages > 4) {
    throw InvalidArgument("config.stages", std::to_string(decode.stages), "expected 2, 3 or 4");
  }
  const int shared = decode_shared_bytes(decode);
  if (shared > max_shared_bytes) {
    throw Unsupported("the paged decode config m" + std::to_string(decode.block_m) + " n" +
                      std::to_string(decode.block_n) + " s" + std::to_string(decode.stages) +
                      " needs " + std::to_string(shared) + " bytes of shared memory at d=" +
                      std::to_string(decode.head_dim) + " and " + std::to_string(decode.qk_bits) +
                      " bits; the device allows " + std::to_string(max_shared_bytes));
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

int resident_blocks(const families::KernelSpec& decode, const device::DeviceInfo& info) {
  // The driver reserves 1 KB of shared memory per block (CUDA C++ Programming Guide, "Shared
  // Memory" of compute capabilities 8.x and 9.0).
  constexpr int kReservedSharedBytes = 1024;
  const int per_block = decode_shared_bytes(decode) + kReservedSharedBytes;
  const int by_shared = info.max_shared_bytes_per_sm > 0
                            ? std::max(1, info.max_shared_bytes_per_sm / per_block)
                            : kernels::paged_decode_min_blocks(decode.head_dim, decode.block_m);
  const int per_sm =
      std::min(kernels::paged_decode_min_blocks(decode.head_dim, decode.block_m), by_shared);
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

std::vector<families::KernelSpec> family_specs(device::Arch arch, int head_dim, int bits,
                                               DType dtype) {
  const kernels::ElementType type = element_type(dtype);
  std::vector<families::KernelSpec> specs = {append_spec(arch, head_dim, bits, type)};
  for (int rows : {8, 16, 32, 64}) {  // each block size the heuristic picks
    specs.push_back(
        decode_spec(arch, head_dim, bits, type, type, heuristic_config(rows, head_dim, bits)));
  }
  specs.push_back(merge_spec(arch, head_dim, kernels::ElementType::kF32, type));
  specs.push_back(merge_spec(arch, head_dim, type, type));
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
