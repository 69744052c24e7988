// What the attention tests share: the GPU shape set both kernel families are checked over, a
// check case for one of its shapes, the spec request of an sm_90a GPU, and fake device addresses
// for validation tests.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "reference/attention_check.hpp"
#include "reference/reference.hpp"
#include "spec/attention_spec.hpp"

namespace intfa::testing {

struct Shape {
  int batch, heads_q, heads_kv, seq_q, seq_kv, head_dim;
  bool causal;
};

// Tails, length 1, GQA/MQA, seq_q != seq_kv both ways, causal, head dims 64, 128 and 256.
inline const std::vector<Shape>& attention_shapes() {
  static const std::vector<Shape> list = {
      {1, 2, 2, 1, 1, 128, false},        {1, 2, 2, 17, 17, 128, false},
      {2, 2, 2, 1000, 1000, 64, false},   {1, 2, 2, 1000, 1000, 128, true},
      {1, 1, 1, 4097, 4097, 128, false},  {1, 1, 1, 4097, 4097, 64, true},
      {1, 2, 2, 300, 1000, 128, true},    {1, 2, 2, 1000, 300, 128, true},
      {1, 2, 2, 77, 1000, 128, false},    {1, 32, 8, 130, 200, 128, true},
      {1, 32, 1, 100, 257, 64, false},    {1, 2, 2, 333, 333, 256, false},
      {1, 2, 2, 200, 513, 256, true},
  };
  return list;
}

// "B1_H32x8_N130x200_D128_causal", the test's name.
inline std::string shape_name(const ::testing::TestParamInfo<Shape>& info) {
  const Shape& s = info.param;
  return "B" + std::to_string(s.batch) + "_H" + std::to_string(s.heads_q) + "x" +
         std::to_string(s.heads_kv) + "_N" + std::to_string(s.seq_q) + "x" +
         std::to_string(s.seq_kv) + "_D" + std::to_string(s.head_dim) +
         (s.causal ? "_causal" : "");
}
// What gtest prints for GetParam() (as `intfa run` prints a problem).
inline void PrintTo(const Shape& s, std::ostream* os) {
  *os << "B=" << s.batch << " Hq=" << s.heads_q << " Hkv=" << s.heads_kv << " Nq=" << s.seq_q
      << " Nkv=" << s.seq_kv << " D=" << s.head_dim << (s.causal ? " causal" : "");
}

// A check of `shape` with fresh random inputs (the seed is printed with the result).
inline reference::CheckCase make_case(const Shape& s, Variant variant) {
  reference::CheckCase check;
  check.problem.batch = s.batch;
  check.problem.heads_q = s.heads_q;
  check.problem.heads_kv = s.heads_kv;
  check.problem.seq_q = s.seq_q;
  check.problem.seq_kv = s.seq_kv;
  check.problem.head_dim = s.head_dim;
  check.problem.causal = s.causal;
  check.problem.variant = variant;
  check.seed = reference::fresh_seed();
  return check;
}

// Every full-INT8 numerics combination: P encoding x P reference x V granularity.
inline std::vector<AttentionOptions> every_full_int8_numerics() {
  std::vector<AttentionOptions> combinations;
  for (PEncoding encoding : {PEncoding::kSigned127, PEncoding::kUnsigned255}) {
    for (PScaleReference reference : {PScaleReference::kRunningMax, PScaleReference::kTileMax}) {
      for (VScaleGranularity granularity :
           {VScaleGranularity::kPerTensor, VScaleGranularity::kPerChannel,
            VScaleGranularity::kPerBlock}) {
        AttentionOptions options;
        options.numerics.p_encoding = encoding;
        options.numerics.p_scale = reference;
        options.numerics.v_granularity = granularity;
        combinations.push_back(options);
      }
    }
  }
  return combinations;
}

// An address that is never dereferenced: validation must refuse or pass before any launch. A
// call that passes every check would launch on it, so on a GPU only calls with a bad field may
// use it.
inline void* fake_pointer(std::uintptr_t offset = 0) {
  return reinterpret_cast<void*>(std::uintptr_t{1} << 20 | offset);
}

inline attention::SpecRequest sm90a_request(int head_dim) {
  attention::SpecRequest request;
  request.arch = device::Arch::kSm90a;
  request.head_dim = head_dim;
  return request;
}

}  // namespace intfa::testing
