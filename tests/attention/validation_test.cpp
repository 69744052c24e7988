// Every validation rule of attention_forward, table-driven: bad input is refused with the
// documented typed error naming the field, before anything is launched (these run without a GPU:
// validation comes before the driver is touched).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "attention/validation.hpp"
#include "intfa/attention.hpp"
#include "intfa/errors.hpp"
#include "intfa/quantize.hpp"

namespace intfa {
namespace {

// Addresses that are never dereferenced: validation must refuse or pass before any launch.
void* fake_pointer(std::uintptr_t offset = 0) {
  return reinterpret_cast<void*>(std::uintptr_t{1} << 20 | offset);
}

struct Call {
  AttentionProblem problem;
  AttentionTensors tensors;
  AttentionOptions options;
};

Call valid_call(Variant variant = Variant::kFullInt8) {
  Call call;
  AttentionProblem& p = call.problem;
  p.batch = 2;
  p.heads_q = 8;
  p.heads_kv = 2;
  p.seq_q = 100;
  p.seq_kv = 130;
  p.head_dim = 128;
  p.variant = variant;
  const TensorShape q{p.batch, p.heads_q, p.seq_q, p.head_dim};
  const TensorShape kv{p.batch, p.heads_kv, p.seq_kv, p.head_dim};
  AttentionTensors& t = call.tensors;
  t.q = TensorView::dense(fake_pointer(), DType::kI8, Layout::kBHND, q);
  t.k = TensorView::dense(fake_pointer(), DType::kI8, Layout::kBNHD, kv);
  t.v = variant == Variant::kFullInt8
            ? v_int8_view(fake_pointer(), p.batch, p.heads_kv, p.seq_kv, p.head_dim)
            : TensorView::dense(fake_pointer(), DType::kF16, Layout::kBHND, kv);
  t.q_scale = static_cast<const float*>(fake_pointer());
  t.k_scale = static_cast<const float*>(fake_pointer());
  t.v_scale = static_cast<const float*>(fake_pointer());
  t.out = TensorView::dense(fake_pointer(), DType::kBF16, Layout::kBNHD, q);
  return call;
}

struct Rule {
  const char* name;
  std::function<void(Call&)> break_it;
  const char* field;  // the field the InvalidArgument must name
};

const std::vector<Rule>& rules() {
  static const std::vector<Rule> list = {
      {"zero batch", [](Call& c) { c.problem.batch = 0; }, "problem.batch"},
      {"negative heads", [](Call& c) { c.problem.heads_q = -8; }, "problem.heads_q"},
      {"zero heads_kv", [](Call& c) { c.problem.heads_kv = 0; }, "problem.heads_kv"},
      {"zero seq_q", [](Call& c) { c.problem.seq_q = 0; }, "problem.seq_q"},
      {"negative seq_kv", [](Call& c) { c.problem.seq_kv = -1; }, "problem.seq_kv"},
      {"head dim 96", [](Call& c) { c.problem.head_dim = 96; }, "problem.head_dim"},
      {"heads not divisible", [](Call& c) { c.problem.heads_kv = 3; }, "problem.heads_q"},
      {"qk bits 6", [](Call& c) { c.problem.qk_bits = 6; }, "problem.qk_bits"},
      {"negative softmax scale", [](Call& c) { c.options.softmax_scale = -1; },
       "options.softmax_scale"},
      {"NaN softmax scale", [](Call& c) { c.options.softmax_scale = std::nan(""); },
       "options.softmax_scale"},
      {"null q", [](Call& c) { c.tensors.q.data = nullptr; }, "tensors.q.data"},
      {"misaligned k", [](Call& c) { c.tensors.k.data = fake_pointer(8); }, "tensors.k.data"},
      {"null v", [](Call& c) { c.tensors.v.data = nullptr; }, "tensors.v.data"},
      {"null out", [](Call& c) { c.tensors.out.data = nullptr; }, "tensors.out.data"},
      {"misaligned out", [](Call& c) { c.tensors.out.data = fake_pointer(2); }, "tensors.out.data"},
      {"null q scale", [](Call& c) { c.tensors.q_scale = nullptr; }, "tensors.q_scale"},
      {"null k scale", [](Call& c) { c.tensors.k_scale = nullptr; }, "tensors.k_scale"},
      {"null v scale", [](Call& c) { c.tensors.v_scale = nullptr; }, "tensors.v_scale"},
      {"misaligned q scale",
       [](Call& c) { c.tensors.q_scale = static_cast<const float*>(fake_pointer(2)); },
       "tensors.q_scale"},
      {"misaligned lse", [](Call& c) { c.tensors.lse = static_cast<float*>(fake_pointer(1)); },
       "tensors.lse"},
      {"q as f16", [](Call& c) { c.tensors.q.dtype = DType::kF16; }, "tensors.q.dtype"},
      {"k as int4 with 8-bit Q.K", [](Call& c) { c.tensors.k.dtype = DType::kI4x2; },
       "tensors.k.dtype"},
      {"full INT8 with f16 V", [](Call& c) { c.tensors.v.dtype = DType::kF16; }, "tensors.v.dtype"},
      {"int8 output", [](Call& c) { c.tensors.out.dtype = DType::kI8; }, "tensors.out.dtype"},
      {"head dim not contiguous", [](Call& c) { c.tensors.q.strides[3] = 2; }, "tensors.q.strides"},
      {"negative stride", [](Call& c) { c.tensors.q.strides[0] = -1; }, "tensors.q.strides"},
      {"rows not 16-byte aligned", [](Call& c) { c.tensors.k.strides[2] = 136; },
       "tensors.k.strides"},
      {"rows overlap", [](Call& c) { c.tensors.q.strides[2] = 64; }, "tensors.q.strides"},
      {"heads overlap", [](Call& c) { c.tensors.out.strides[1] = 0; }, "tensors.out.strides"},
      {"V channels overlap tokens", [](Call& c) { c.tensors.v.strides[3] = 64; },
       "tensors.v.strides"},
  };
  return list;
}

TEST(AttentionValidation, AValidCallPassesEveryCheck) {
  // The checks themselves: attention_forward would go on to launch on the fake pointers.
  for (Variant variant : {Variant::kFullInt8, Variant::kHalfInt8}) {
    const Call call = valid_call(variant);
    EXPECT_NO_THROW(attention::validate_problem(call.problem));
    EXPECT_NO_THROW(attention::validate_options(call.problem, call.options));
    EXPECT_NO_THROW(attention::validate_tensors(call.problem, call.tensors, call.options));
  }
}

TEST(AttentionValidation, EveryRuleRefusesWithTheFieldNamed) {
  for (const Rule& rule : rules()) {
    Call call = valid_call();
    rule.break_it(call);
    try {
      attention_forward(call.problem, call.tensors, nullptr, call.options);
      ADD_FAILURE() << rule.name << ": accepted";
    } catch (const InvalidArgument& error) {
      EXPECT_EQ(error.field(), rule.field) << rule.name << ": " << error.what();
      EXPECT_EQ(error.status(), Status::kInvalidArgument);
    } catch (const Error& error) {
      ADD_FAILURE() << rule.name << ": expected InvalidArgument, got " << error.what();
    }
  }
}

TEST(AttentionValidation, HalfInt8RefusesAnInt8V) {
  Call call = valid_call(Variant::kHalfInt8);
  call.tensors.v.dtype = DType::kI8;
  try {
    attention_forward(call.problem, call.tensors, nullptr, call.options);
    FAIL();
  } catch (const InvalidArgument& error) {
    EXPECT_EQ(error.field(), "tensors.v.dtype");
  }
}

TEST(AttentionValidation, BadTileConfigIsRefusedNamingTheField) {
  // Config checks need the device's shared-memory limit, so they run after the driver is found;
  // without a GPU the call stops at NoDevice first. attention_spec_test covers validate_config.
  Call call = valid_call();
  call.options.config = KernelConfig{100, 64, 8, 2};
  EXPECT_THROW(attention_forward(call.problem, call.tensors, nullptr, call.options), Error);
}

TEST(QuantizeValidation, BadShapesDtypesAndPointersAreRefused) {
  const TensorShape shape{1, 2, 10, 64};
  const TensorView input = TensorView::dense(fake_pointer(), DType::kF16, Layout::kBHND, shape);
  const TensorView output = TensorView::dense(fake_pointer(), DType::kI8, Layout::kBHND, shape);
  float* scales = static_cast<float*>(fake_pointer());
  auto field_of = [](const std::function<void()>& call) -> std::string {
    try {
      call();
    } catch (const InvalidArgument& error) {
      return error.field();
    } catch (const Error&) {
      return "(passed validation)";
    }
    return "(accepted)";
  };
  EXPECT_EQ(field_of([&] { quantize_qk({1, 2, 10, 80}, input, output, scales, nullptr); }),
            "shape.head_dim");
  EXPECT_EQ(field_of([&] { quantize_qk({0, 2, 10, 64}, input, output, scales, nullptr); }),
            "shape.batch");
  EXPECT_EQ(field_of([&] { quantize_qk(shape, output, output, scales, nullptr); }), "input.dtype");
  EXPECT_EQ(field_of([&] { quantize_qk(shape, input, input, scales, nullptr); }), "output.dtype");
  EXPECT_EQ(field_of([&] { quantize_qk(shape, input, output, nullptr, nullptr); }), "scales");
  QuantizeOptions four_bits;
  four_bits.bits = 4;
  EXPECT_EQ(field_of([&] { quantize_qk(shape, input, output, scales, nullptr, four_bits); }),
            "output.dtype");
  QuantizeOptions bad_bits;
  bad_bits.bits = 5;
  EXPECT_EQ(field_of([&] { quantize_qk(shape, input, output, scales, nullptr, bad_bits); }),
            "options.bits");
  EXPECT_EQ(field_of([&] {
              quantize_v(shape, input, nullptr, scales, VScaleGranularity::kPerTensor, nullptr);
            }),
            "output");
  EXPECT_EQ(field_of([&] {
              quantize_v(shape, input, fake_pointer(4), scales, VScaleGranularity::kPerTensor,
                         nullptr);
            }),
            "output");
}

}  // namespace
}  // namespace intfa
