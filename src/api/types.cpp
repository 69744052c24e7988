#include "intfa/types.hpp"

#include "intfa/errors.hpp"

namespace intfa {

std::string dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kI8: return "i8";
    case DType::kI4x2: return "i4x2";
  }
  return "unknown";
}

TensorView TensorView::dense(void* data, DType dtype, Layout layout, const TensorShape& shape) {
  // kI4x2 rows hold head_dim / 2 bytes; strides of packed tensors count bytes.
  const std::int64_t row = dtype == DType::kI4x2 ? shape.head_dim / 2 : shape.head_dim;
  TensorView view;
  view.data = data;
  view.dtype = dtype;
  if (layout == Layout::kBHND) {
    view.strides = {static_cast<std::int64_t>(shape.heads) * shape.seq * row,
                    static_cast<std::int64_t>(shape.seq) * row, row, 1};
  } else {
    view.strides = {static_cast<std::int64_t>(shape.seq) * shape.heads * row, row,
                    static_cast<std::int64_t>(shape.heads) * row, 1};
  }
  return view;
}

}  // namespace intfa
