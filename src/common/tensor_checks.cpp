#include "common/tensor_checks.hpp"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <limits>
#include <string>

#include "intfa/errors.hpp"

namespace intfa::checks {

void require_at_most(int value, int limit, const char* field, const char* why, const char* member) {
  if (value > limit) {
    throw InvalidArgument(std::string(field) + member, std::to_string(value),
                          "expected <= " + std::to_string(limit) + " (" + why + ")");
  }
}

void require_positive(int value, const char* field, const char* member) {
  if (value < 1) {
    throw InvalidArgument(std::string(field) + member, std::to_string(value), "expected >= 1");
  }
}

void require_dtype(const TensorView& view, const std::string& field,
                   std::initializer_list<DType> allowed) {
  if (std::find(allowed.begin(), allowed.end(), view.dtype) != allowed.end()) return;
  std::string names;
  for (DType dtype : allowed) names += (names.empty() ? "" : " or ") + dtype_name(dtype);
  throw InvalidArgument(field + ".dtype", dtype_name(view.dtype), "expected " + names);
}

void validate_shape(const TensorShape& shape, const char* field) {
  require_positive(shape.batch, field, ".batch");
  require_positive(shape.heads, field, ".heads");
  require_positive(shape.seq, field, ".seq");
  if (shape.head_dim != 64 && shape.head_dim != 128 && shape.head_dim != 256) {
    throw InvalidArgument(std::string(field) + ".head_dim", std::to_string(shape.head_dim),
                          "supported head dims are 64, 128 and 256");
  }
  require_at_most(shape.batch, kMaxGridYZ, field, "a grid dimension", ".batch");
  require_at_most(shape.heads, kMaxGridYZ, field, "a grid dimension", ".heads");
  require_at_most(shape.seq, kMaxSeq, field, "32-bit offsets in the kernels", ".seq");
  const long long rows = static_cast<long long>(shape.batch) * shape.heads * shape.seq;
  if (rows > kMaxRows) {
    throw InvalidArgument(field, std::to_string(rows) + " rows (batch * heads * seq)",
                          "expected at most 2^31 - 1 rows (32-bit row indices in the kernels)");
  }
}

void validate_v_seq(int seq_kv) {
  require_positive(seq_kv, "seq_kv");
  require_at_most(seq_kv, kMaxSeq, "seq_kv", "32-bit offsets in the kernels");
}

void validate_v_layout(int batch, int heads_kv, int seq_kv, int head_dim) {
  require_positive(batch, "batch");
  require_positive(heads_kv, "heads_kv");
  require_at_most(batch, kMaxGridYZ, "batch", "a grid dimension");
  require_at_most(heads_kv, kMaxGridYZ, "heads_kv", "a grid dimension");
  validate_v_seq(seq_kv);
  if (head_dim != 64 && head_dim != 128 && head_dim != 256) {
    throw InvalidArgument("head_dim", std::to_string(head_dim),
                          "supported head dims are 64, 128 and 256");
  }
}

template <std::size_t N>
void validate_strides(const std::array<std::int64_t, N>& strides,
                      const std::array<std::int64_t, N>& extents, int element_bytes,
                      const char* field, const char* member) {
  auto refuse = [&](const std::string& expectation) {
    throw InvalidArgument(std::string(field) + member, strides_text(strides), expectation);
  };
  // Overflow-safe: the byte offset of the last element must fit in int64, or products of the
  // strides below wrap around (2^62 strides once aliased, and INT64_MAX - 31 passed).
  std::int64_t last = 0;
  for (std::size_t dim = 0; dim < N; ++dim) {
    if (strides[dim] < 0) {
      refuse("expected strides >= 0");
    }
    std::int64_t step = 0;
    if (__builtin_mul_overflow(strides[dim], extents[dim] - 1, &step) ||
        __builtin_add_overflow(last, step, &last)) {
      refuse("the view spans more than 2^63 elements");
    }
  }
  std::int64_t last_byte = 0;
  if (__builtin_add_overflow(last, 1, &last_byte) ||
      __builtin_mul_overflow(last_byte, std::int64_t{element_bytes}, &last_byte)) {
    refuse("the view spans more than 2^63 bytes");
  }
  // No two elements may share an address: ordered by stride, each dimension must step over the
  // whole extent of the dimensions below it.
  std::array<std::size_t, N> order;
  for (std::size_t dim = 0; dim < N; ++dim) order[dim] = dim;
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return strides[a] < strides[b]; });
  std::int64_t span = 1;
  for (std::size_t dim : order) {
    if (extents[dim] == 1) continue;
    if (strides[dim] < span) {
      refuse("strides overlap: dimension " + std::to_string(dim) + " (stride " +
             std::to_string(strides[dim]) + ") steps inside dimensions that span " +
             std::to_string(span) + " elements");
    }
    // Saturates past the last element: only a later stride >= INT64_MAX could compare with it,
    // and none fits under `last`.
    if (__builtin_mul_overflow(strides[dim], extents[dim], &span)) {
      span = std::numeric_limits<std::int64_t>::max();
    }
  }
}

template void validate_strides<3>(const std::array<std::int64_t, 3>&,
                                  const std::array<std::int64_t, 3>&, int, const char*,
                                  const char*);
template void validate_strides<4>(const std::array<std::int64_t, 4>&,
                                  const std::array<std::int64_t, 4>&, int, const char*,
                                  const char*);

void validate_view(const TensorView& view, const ViewRequirements& r) {
  // The field's name only for a message: every launch checks its views.
  auto named = [&r](const char* member) { return std::string(r.field) + member; };
  if (view.data == nullptr) {
    throw InvalidArgument(named(".data"), "null", "expected a device pointer");
  }
  if (reinterpret_cast<std::uintptr_t>(view.data) % r.alignment_bytes != 0) {
    throw InvalidArgument(named(".data"),
                          std::to_string(reinterpret_cast<std::uintptr_t>(view.data)),
                          "expected " + std::to_string(r.alignment_bytes) + "-byte alignment");
  }
  const auto& strides = view.strides;
  if (strides[r.contiguous_dim] != 1) {
    throw InvalidArgument(named(".strides"), strides_text(strides),
                          "expected stride 1 on dimension " + std::to_string(r.contiguous_dim));
  }
  validate_strides(strides, r.extents, r.element_bytes, r.field, ".strides");
  for (int dim = 0; dim < 4; ++dim) {
    if (dim == r.contiguous_dim || r.extents[dim] == 1) continue;
    // No overflow: validate_strides found the last element's byte offset within int64, and a
    // stride of a dimension of extent > 1 is at most that offset.
    if ((strides[dim] * r.element_bytes) % r.alignment_bytes != 0) {
      throw InvalidArgument(named(".strides"), strides_text(strides),
                            "dimension " + std::to_string(dim) + " must step by a multiple of " +
                                std::to_string(r.alignment_bytes) + " bytes");
    }
  }
}

void validate_scales(const float* scales, const char* field) {
  if (scales == nullptr) throw InvalidArgument(field, "null", "expected a device pointer");
  if (reinterpret_cast<std::uintptr_t>(scales) % 4 != 0) {
    throw InvalidArgument(field, std::to_string(reinterpret_cast<std::uintptr_t>(scales)),
                          "expected 4-byte alignment");
  }
}

void validate_offsets(const int* offsets, const char* field) {
  if (offsets == nullptr) throw InvalidArgument(field, "null", "expected a device pointer");
  if (reinterpret_cast<std::uintptr_t>(offsets) % 4 != 0) {
    throw InvalidArgument(field, std::to_string(reinterpret_cast<std::uintptr_t>(offsets)),
                          "expected 4-byte alignment");
  }
}

void validate_varlen(const VarlenLayout& varlen, const std::string& field) {
  validate_offsets(varlen.cu_seqlens_q, (field + ".cu_seqlens_q").c_str());
  validate_offsets(varlen.cu_seqlens_kv, (field + ".cu_seqlens_kv").c_str());
  require_positive(varlen.total_q, field.c_str(), ".total_q");
  require_positive(varlen.total_kv, field.c_str(), ".total_kv");
}

}  // namespace intfa::checks
