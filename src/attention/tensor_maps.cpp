#include "attention/tensor_maps.hpp"

#include <cuda.h>

#include <cstdint>
#include <cstring>

#include "device/driver_api.hpp"

namespace intfa::attention {
namespace {

static_assert(sizeof(CUtensorMap) == sizeof(kernels::TensorMap), "TensorMap mirrors CUtensorMap");

constexpr std::int64_t kTmaAlignment = 16;
constexpr std::int64_t kMaxTmaStride = std::int64_t{1} << 40;

bool aligned(const void* pointer) {
  return reinterpret_cast<std::uintptr_t>(pointer) % kTmaAlignment == 0;
}

// A stride TMA accepts; a dimension of extent 1 is never stepped, so its stride is free.
bool tma_stride(std::int64_t stride_bytes, int extent) {
  return extent == 1 || (stride_bytes > 0 && stride_bytes % kTmaAlignment == 0 &&
                         stride_bytes < kMaxTmaStride);
}

// The stride of a dimension of extent 1 is never used; the dense value keeps the strides
// ordered as the driver expects.
std::uint64_t stride_or_dense(std::int64_t stride_bytes, int extent, std::uint64_t dense_bytes) {
  return static_cast<std::uint64_t>(extent == 1 ? static_cast<std::int64_t>(dense_bytes)
                                                : stride_bytes);
}

std::string list(const std::uint64_t* values, unsigned count) {
  std::string text;
  for (unsigned i = 0; i < count; ++i) text += (i ? "," : "") + std::to_string(values[i]);
  return text;
}

std::optional<std::string> check_rows(const char* name, const TensorView& view, int batch,
                                      int heads, int seq) {
  const std::string field = std::string("tensors.") + name;
  if (!aligned(view.data)) return field + ".data is not 16-byte aligned";
  if (!tma_stride(view.strides[2], seq)) return field + ".strides[2] (row) is not a multiple of 16";
  if (!tma_stride(view.strides[1], heads)) return field + ".strides[1] is not a multiple of 16";
  if (!tma_stride(view.strides[0], batch)) return field + ".strides[0] is not a multiple of 16";
  return std::nullopt;
}

struct TileShape {
  std::uint64_t dims[4];
  std::uint64_t strides[3];  // bytes, of dims 1..3
  std::uint32_t box[4];
  CUtensorMapSwizzle swizzle;
};

CUtensorMapSwizzle swizzle_for_row(int row_bytes) {
  return row_bytes == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B;
}

// `name` and the arguments go into the error when the driver refuses them.
void encode(const char* name, kernels::TensorMap& out, CUtensorMapDataType type, unsigned rank,
            const void* data, const std::uint64_t* dims, const std::uint64_t* strides,
            const std::uint32_t* box, CUtensorMapSwizzle swizzle) {
  const cuuint32_t element_strides[4] = {1, 1, 1, 1};
  CUtensorMap map;
  const CUresult result = device::driver().cuTensorMapEncodeTiled(
      &map, type, rank, const_cast<void*>(data), dims, strides, box,
      element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (result != CUDA_SUCCESS) {
    const std::uint64_t box64[4] = {box[0], box[1], box[2], box[3]};
    device::check(result, (std::string("cuTensorMapEncodeTiled (") + name + ": dims " +
                           list(dims, rank) + ", strides " + list(strides, rank - 1) + ", box " +
                           list(box64, rank) + ")")
                              .c_str());
  }
  std::memcpy(&out, &map, sizeof map);
}

// Q or K: (head_dim, seq, heads, batch) bytes; boxes of one slab by `block_rows` rows.
void encode_rows(const char* name, kernels::TensorMap& out, const TensorView& view, int batch,
                 int heads, int seq, int head_dim, int block_rows) {
  const int slab = kernels::wgmma_slab_bytes(head_dim);
  const std::uint64_t dims[4] = {static_cast<std::uint64_t>(head_dim),
                                 static_cast<std::uint64_t>(seq),
                                 static_cast<std::uint64_t>(heads),
                                 static_cast<std::uint64_t>(batch)};
  std::uint64_t strides[3];
  strides[0] = stride_or_dense(view.strides[2], seq, dims[0]);
  strides[1] = stride_or_dense(view.strides[1], heads, strides[0] * dims[1]);
  strides[2] = stride_or_dense(view.strides[0], batch, strides[1] * dims[2]);
  const std::uint32_t box[4] = {static_cast<std::uint32_t>(slab),
                                static_cast<std::uint32_t>(block_rows), 1, 1};
  encode(name, out, CU_TENSOR_MAP_DATA_TYPE_UINT8, 4, view.data, dims, strides, box,
         swizzle_for_row(slab));
}

}  // namespace

std::optional<std::string> tma_incompatibility(const AttentionProblem& problem,
                                               const AttentionTensors& tensors) {
  if (auto reason = check_rows("q", tensors.q, problem.batch, problem.heads_q, problem.seq_q)) {
    return reason;
  }
  if (auto reason = check_rows("k", tensors.k, problem.batch, problem.heads_kv, problem.seq_kv)) {
    return reason;
  }
  // The INT8 V layout: rows are channels (strides[3]).
  const TensorView& v = tensors.v;
  if (!aligned(v.data)) return std::string("tensors.v.data is not 16-byte aligned");
  if (!tma_stride(v.strides[3], problem.head_dim) || !tma_stride(v.strides[1], problem.heads_kv) ||
      !tma_stride(v.strides[0], problem.batch)) {
    return std::string("tensors.v strides are not multiples of 16 bytes");
  }
  return std::nullopt;
}

void encode_tensor_maps(kernels::WgmmaAttentionParams& params, const AttentionProblem& problem,
                        const AttentionTensors& tensors, const render::KernelSpec& spec) {
  encode_rows("q", params.q_map, tensors.q, problem.batch, problem.heads_q, problem.seq_q,
              problem.head_dim, spec.block_m);
  encode_rows("k", params.k_map, tensors.k, problem.batch, problem.heads_kv, problem.seq_kv,
              problem.head_dim, spec.block_n);

  // V: (v_padded_seq, head_dim, heads_kv, batch) bytes; a box is a tile's tokens of every channel.
  const TensorView& v = tensors.v;
  const std::uint64_t v_dims[4] = {static_cast<std::uint64_t>(v_padded_seq(problem.seq_kv)),
                                   static_cast<std::uint64_t>(problem.head_dim),
                                   static_cast<std::uint64_t>(problem.heads_kv),
                                   static_cast<std::uint64_t>(problem.batch)};
  std::uint64_t v_strides[3];
  v_strides[0] = stride_or_dense(v.strides[3], problem.head_dim, v_dims[0]);
  v_strides[1] = stride_or_dense(v.strides[1], problem.heads_kv, v_strides[0] * v_dims[1]);
  v_strides[2] = stride_or_dense(v.strides[0], problem.batch, v_strides[1] * v_dims[2]);
  const std::uint32_t v_box[4] = {static_cast<std::uint32_t>(spec.block_n),
                                  static_cast<std::uint32_t>(problem.head_dim), 1, 1};
  encode("v", params.v_map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 4, v.data, v_dims, v_strides, v_box,
         swizzle_for_row(spec.block_n));

}

}  // namespace intfa::attention
