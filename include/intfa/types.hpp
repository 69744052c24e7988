// Element types, layouts and strided tensor views of intfa's public API.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace intfa {

enum class DType {
  kF16,    // IEEE half
  kBF16,   // bfloat16
  kI8,     // signed 8-bit integers
  kI4x2,   // signed 4-bit integers, two per byte (element 2i in the low nibble of byte i)
};

std::string dtype_name(DType dtype);

// Memory order of a [batch, heads, seq, head_dim] tensor when it is dense.
enum class Layout {
  kBHND,  // [batch][heads][seq][head_dim]
  kBNHD,  // [batch][seq][heads][head_dim] (FlashAttention's and PyTorch's (B, N, H, D))
};

// Logical extents of one [batch, heads, seq, head_dim] tensor.
struct TensorShape {
  int batch = 0;
  int heads = 0;
  int seq = 0;
  int head_dim = 0;
};

// A device tensor seen as [batch, heads, seq, head_dim] with arbitrary strides, in elements (for
// kI4x2, in bytes' worth of two elements: head_dim strides stay 1 and count bytes).
struct TensorView {
  void* data = nullptr;
  DType dtype = DType::kF16;
  std::array<std::int64_t, 4> strides{};  // batch, heads, seq, head_dim

  // A dense tensor of `shape` in `layout`.
  static TensorView dense(void* data, DType dtype, Layout layout, const TensorShape& shape);
};

}  // namespace intfa
