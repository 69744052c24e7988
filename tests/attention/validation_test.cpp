// Every validation rule of attention_forward, table-driven: bad input is refused with the
// documented typed error naming the field, before anything is launched (these run without a GPU:
// validation comes before the driver is touched).
#include "attention/validation.hpp"

#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <thread>

#include "device/device_info.hpp"
#include "attention/attention_test_support.hpp"
#include "intfa/attention.hpp"
#include "intfa/errors.hpp"
#include "intfa/intfa.h"
#include "intfa/quantize.hpp"
#include "launch/kernel_runtime.hpp"
#include "support/c_api_from_c.h"
#include "support/gpu.hpp"

namespace intfa {
namespace {

using testing::fake_pointer;

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
      // Strides whose products overflow int64 once wrapped around to offsets that looked apart.
      {"out head stride near INT64_MAX",
       [](Call& c) { c.tensors.out.strides[1] = std::numeric_limits<std::int64_t>::max() - 31; },
       "tensors.out.strides"},
      {"batch and head strides of 2^62 alias",
       [](Call& c) { c.tensors.q.strides[0] = c.tensors.q.strides[1] = std::int64_t{1} << 62; },
       "tensors.q.strides"},
      {"k row stride of 2^60 bytes times 130 rows",
       [](Call& c) { c.tensors.k.strides[2] = std::int64_t{1} << 60; }, "tensors.k.strides"},
      // The grid's y and z dimensions hold at most 65535 blocks.
      {"heads above 65535",
       [](Call& c) {
         c.problem.heads_q = 65536 * 2;
         c.problem.heads_kv = 2;
       },
       "problem.heads_q"},
      {"batch above 65535", [](Call& c) { c.problem.batch = 65536; }, "problem.batch"},
      // What float32 cannot hold: the kernels take the scale as a float.
      {"softmax scale beyond float32", [](Call& c) { c.options.softmax_scale = 1e300; },
       "options.softmax_scale"},
      {"softmax scale below float32's normal range",
       [](Call& c) { c.options.softmax_scale = 1e-320; }, "options.softmax_scale"},
      // A config is checked before the device is looked up (without a GPU: not NO_DEVICE).
      {"negative block_m",
       [](Call& c) {
         c.options.config = KernelConfig{-1, 64, 4, 2};
       },
       "config.block_m"},
      {"block_m not a multiple of the warps' rows",
       [](Call& c) {
         c.options.config = KernelConfig{100, 64, 8, 2};
       },
       "config.block_m"},
      {"one stage",
       [](Call& c) {
         c.options.config = KernelConfig{64, 64, 4, 1};
       },
       "config.stages"},
      {"three Hopper consumer warpgroups on half INT8 at d=128 (registers)",
       [](Call& c) {
         c.problem.variant = Variant::kHalfInt8;
         c.tensors.v = TensorView::dense(
             fake_pointer(), DType::kF16, Layout::kBHND,
             {c.problem.batch, c.problem.heads_kv, c.problem.seq_kv, c.problem.head_dim});
         c.options.config = KernelConfig{192, 128, 16, 2, KernelPath::kWgmma};
       },
       "config.warps"},
  };
  return list;
}

// Fails the test if anything was compiled or loaded (so nothing could be launched) between its
// construction and its destruction.
class ExpectNothingLaunched {
 public:
  ExpectNothingLaunched()
      : compiles_(nvrtc::compile_count()),
        module_loads_(launch::KernelRuntime::instance().stats().module_loads) {}
  ~ExpectNothingLaunched() {
    EXPECT_EQ(nvrtc::compile_count(), compiles_) << "a kernel was compiled";
    EXPECT_EQ(launch::KernelRuntime::instance().stats().module_loads, module_loads_)
        << "a kernel was loaded";
  }
  ExpectNothingLaunched(const ExpectNothingLaunched&) = delete;
  ExpectNothingLaunched& operator=(const ExpectNothingLaunched&) = delete;

 private:
  std::uint64_t compiles_;
  std::uint64_t module_loads_;
};

TEST(AttentionValidation, AValidCallPassesEveryCheck) {
  // The checks themselves: attention_forward would go on to launch on the fake pointers.
  for (Variant variant : {Variant::kFullInt8, Variant::kHalfInt8}) {
    const Call call = valid_call(variant);
    EXPECT_NO_THROW(attention::validate_problem(call.problem));
    EXPECT_NO_THROW(attention::validate_options(call.problem, call.options));
    EXPECT_NO_THROW(attention::validate_tensors(call.problem, call.tensors, call.options));
  }
}

// Each rule broken on a fresh `valid()` call: attention_forward refuses it naming the rule's field,
// before anything is compiled or loaded.
void expect_each_rule_refused(const std::vector<Rule>& rule_list,
                              const std::function<Call()>& valid) {
  const ExpectNothingLaunched nothing_launched;
  for (const Rule& rule : rule_list) {
    Call call = valid();
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

TEST(AttentionValidation, EveryRuleRefusesWithTheFieldNamed) {
  expect_each_rule_refused(rules(), [] { return valid_call(); });
}

// A varlen call: 2 sequences packed into 150 query and 170 key rows (longest 100 and 130).
Call valid_varlen_call(Variant variant) {
  Call call = valid_call(variant);
  const AttentionProblem& p = call.problem;
  AttentionTensors& t = call.tensors;
  t.varlen.cu_seqlens_q = static_cast<const int*>(fake_pointer());
  t.varlen.cu_seqlens_kv = static_cast<const int*>(fake_pointer());
  t.varlen.total_q = 150;
  t.varlen.total_kv = 170;
  const TensorShape q{1, p.heads_q, 150, p.head_dim};
  const TensorShape kv{1, p.heads_kv, 170, p.head_dim};
  t.q = TensorView::dense(fake_pointer(), DType::kI8, Layout::kBNHD, q);
  t.k = TensorView::dense(fake_pointer(), DType::kI8, Layout::kBNHD, kv);
  if (variant == Variant::kHalfInt8) {
    t.v = TensorView::dense(fake_pointer(), DType::kF16, Layout::kBNHD, kv);
  }
  t.out = TensorView::dense(fake_pointer(), DType::kBF16, Layout::kBNHD, q);
  return call;
}

const std::vector<Rule>& varlen_rules() {
  static const std::vector<Rule> list = {
      {"null cu_seqlens_q", [](Call& c) { c.tensors.varlen.cu_seqlens_q = nullptr; },
       "tensors.varlen.cu_seqlens_q"},
      {"misaligned cu_seqlens_kv",
       [](Call& c) { c.tensors.varlen.cu_seqlens_kv = static_cast<const int*>(fake_pointer(2)); },
       "tensors.varlen.cu_seqlens_kv"},
      {"zero total_q", [](Call& c) { c.tensors.varlen.total_q = 0; }, "tensors.varlen.total_q"},
      {"negative total_kv", [](Call& c) { c.tensors.varlen.total_kv = -5; },
       "tensors.varlen.total_kv"},
      // Packed views span all rows: rows 16 bytes apart would overlap 128-byte rows.
      {"packed q rows overlap", [](Call& c) { c.tensors.q.strides[2] = 16; }, "tensors.q.strides"},
  };
  return list;
}

TEST(AttentionValidation, VarlenCallsPassAndEachVarlenRuleNamesItsField) {
  for (Variant variant : {Variant::kFullInt8, Variant::kHalfInt8}) {
    const Call call = valid_varlen_call(variant);
    EXPECT_NO_THROW(attention::validate_tensors(call.problem, call.tensors, call.options));
  }
  expect_each_rule_refused(varlen_rules(), [] { return valid_varlen_call(Variant::kFullInt8); });
}

// Totals without offsets: the caller meant packed sequences, and would get a dense call. (The C
// API refuses null offsets in intfa_attention_forward_varlen itself: CApiValidation.*.)
TEST(AttentionValidation, VarlenTotalsWithoutOffsetsAreRefused) {
  expect_each_rule_refused({{"totals set, no offsets",
                             [](Call& c) {
                               c.tensors.varlen.cu_seqlens_q = nullptr;
                               c.tensors.varlen.cu_seqlens_kv = nullptr;
                             },
                             "tensors.varlen.total_q"}},
                           [] { return valid_varlen_call(Variant::kFullInt8); });
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

// The rules of a config itself are checked before the device is looked up; only whether it fits
// the device's shared memory, and a Hopper config's arch, wait for the device.
TEST(AttentionValidation, AValidConfigPassesTheChecksMadeBeforeTheDevice) {
  Call call = valid_call();
  for (const KernelConfig& config :
       {KernelConfig{64, 128, 4, 2}, KernelConfig{128, 128, 12, 2, KernelPath::kWgmma}}) {
    call.options.config = config;
    EXPECT_NO_THROW(attention::validate_options(call.problem, call.options)) << config.to_string();
  }
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
  // Grid limits (65535 blocks in y and z) and 32-bit row indices, before any launch.
  EXPECT_EQ(field_of([&] {
              quantize_qk({70000, 1, 10, 64}, input, output, scales, nullptr);
            }),
            "shape.batch");
  EXPECT_EQ(field_of([&] {
              quantize_v({1, 70000, 10, 64}, input, fake_pointer(), scales,
                         VScaleGranularity::kPerTensor, nullptr);
            }),
            "shape.heads");
  EXPECT_EQ(field_of([&] {
              quantize_qk({65535, 65535, 1024, 64}, input, output, scales, nullptr);
            }),
            "shape");
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
  const int* offsets = static_cast<const int*>(fake_pointer());
  const TensorView packed =
      TensorView::dense(fake_pointer(), DType::kF16, Layout::kBNHD, {1, 2, 25, 64});
  auto quantize_v_varlen_field = [&](int total, const int* cu, const TensorView& view) {
    return field_of([&] {
      quantize_v_varlen(shape, view, total, cu, fake_pointer(), scales,
                        VScaleGranularity::kPerChannel, nullptr);
    });
  };
  EXPECT_EQ(quantize_v_varlen_field(25, offsets, packed), "(passed validation)");
  EXPECT_EQ(quantize_v_varlen_field(0, offsets, packed), "total_kv");
  EXPECT_EQ(quantize_v_varlen_field(25, nullptr, packed), "cu_seqlens_kv");
  EXPECT_EQ(quantize_v_varlen_field(
                25, static_cast<const int*>(fake_pointer(1)), packed),
            "cu_seqlens_kv");
  TensorView overlapping = packed;
  overlapping.strides[2] = 8;  // rows of 64 elements 8 apart
  EXPECT_EQ(quantize_v_varlen_field(25, offsets, overlapping), "input.strides");
}

// --- The C API: the same rules through intfa_attention_forward, and what only C can get wrong ---

// No exception can cross the C API: seen from C++, every function is noexcept.
static_assert(noexcept(intfa_attention_forward(nullptr, nullptr, nullptr, nullptr)));
static_assert(noexcept(intfa_quantize_qk(nullptr, nullptr, nullptr, nullptr, 8, nullptr)));
static_assert(noexcept(intfa_quantize_k_smoothed(nullptr, nullptr, nullptr, nullptr, 8, nullptr,
                                                 nullptr)));
static_assert(noexcept(intfa_attention_forward_varlen(nullptr, nullptr, nullptr, nullptr,
                                                      nullptr)));
static_assert(noexcept(intfa_quantize_v_varlen(nullptr, nullptr, 0, nullptr, nullptr, nullptr,
                                               INTFA_V_PER_TENSOR, nullptr)));
static_assert(noexcept(intfa_quantize_v(nullptr, nullptr, nullptr, nullptr, INTFA_V_PER_TENSOR,
                                        nullptr)));
static_assert(noexcept(intfa_default_options(nullptr)));
static_assert(noexcept(intfa_default_qk_transforms(nullptr)));
static_assert(noexcept(intfa_default_quantize_options(nullptr)));
static_assert(noexcept(intfa_quantize_qk_with_options(nullptr, nullptr, nullptr, nullptr, nullptr,
                                                      nullptr)));
static_assert(noexcept(intfa_attention_forward_smoothed_k(nullptr, nullptr, nullptr, nullptr,
                                                          nullptr, nullptr)));
static_assert(noexcept(intfa_attention_workspace_bytes(nullptr, nullptr, nullptr)));
static_assert(noexcept(intfa_attention_forward_16bit(nullptr, nullptr, nullptr, nullptr, 0, nullptr,
                                                     nullptr, nullptr)));
static_assert(noexcept(intfa_last_error()));

struct CCall {
  intfa_problem_t problem{};
  intfa_attention_tensors_t tensors{};
  intfa_options_t options{};
};

intfa_tensor_t to_c(const TensorView& view) {
  intfa_tensor_t tensor{};
  tensor.data = view.data;
  tensor.dtype = static_cast<intfa_dtype_t>(view.dtype);
  for (std::size_t i = 0; i < 4; ++i) tensor.strides[i] = view.strides[i];
  return tensor;
}

CCall to_c(const Call& call) {
  CCall c;
  const AttentionProblem& p = call.problem;
  c.problem = {p.batch,  p.heads_q,  p.heads_kv, p.seq_q,
               p.seq_kv, p.head_dim, p.causal,   static_cast<intfa_variant_t>(p.variant),
               p.qk_bits};
  const AttentionTensors& t = call.tensors;
  c.tensors = {to_c(t.q), to_c(t.k), to_c(t.v), to_c(t.out),
               t.q_scale, t.k_scale, t.v_scale, t.lse};
  intfa_default_options(&c.options);
  c.options.softmax_scale = call.options.softmax_scale;
  if (call.options.config) {
    c.options.block_m = call.options.config->block_m;
    c.options.block_n = call.options.config->block_n;
    c.options.warps = call.options.config->warps;
    c.options.stages = call.options.config->stages;
  }
  return c;
}

// The status is INTFA_INVALID_ARGUMENT and this thread's message names `field`.
void expect_refused(intfa_status_t status, const std::string& field, const std::string& what) {
  const std::string message = intfa_last_error();
  EXPECT_EQ(status, INTFA_INVALID_ARGUMENT) << what << ": " << message;
  EXPECT_NE(message.find("invalid " + field + " ="), std::string::npos) << what << ": " << message;
}

TEST(CApiValidation, EveryRuleOfTheCppApiIsAnInvalidArgumentNamingTheField) {
  const ExpectNothingLaunched nothing_launched;
  for (const Rule& rule : rules()) {
    Call call = valid_call();
    rule.break_it(call);
    CCall c = to_c(call);
    expect_refused(intfa_attention_forward(&c.problem, &c.tensors, nullptr, &c.options), rule.field,
                   rule.name);
  }
}

TEST(CApiValidation, EveryVarlenRuleIsAnInvalidArgumentNamingTheField) {
  const ExpectNothingLaunched nothing_launched;
  for (const Rule& rule : varlen_rules()) {
    Call call = valid_varlen_call(Variant::kFullInt8);
    rule.break_it(call);
    CCall c = to_c(call);
    const VarlenLayout& layout = call.tensors.varlen;
    const intfa_varlen_t varlen{layout.cu_seqlens_q, layout.cu_seqlens_kv, layout.total_q,
                                layout.total_kv};
    expect_refused(
        intfa_attention_forward_varlen(&c.problem, &c.tensors, &varlen, nullptr, &c.options),
        rule.field, rule.name);
  }
  CCall c = to_c(valid_varlen_call(Variant::kFullInt8));
  expect_refused(intfa_attention_forward_varlen(&c.problem, &c.tensors, nullptr, nullptr, nullptr),
                 "varlen", "null varlen");
  // Both offsets null would run a dense call: the varlen entry point is for packed sequences.
  const intfa_varlen_t no_offsets{nullptr, nullptr, 0, 0};
  expect_refused(
      intfa_attention_forward_varlen(&c.problem, &c.tensors, &no_offsets, nullptr, nullptr),
      "varlen.cu_seqlens_q", "both offsets null");
  const intfa_shape_t shape{2, 2, 20, 64};
  const intfa_tensor_t packed = to_c(
      TensorView::dense(fake_pointer(), DType::kF16, Layout::kBNHD, TensorShape{1, 2, 25, 64}));
  float* scales = static_cast<float*>(fake_pointer());
  expect_refused(intfa_quantize_v_varlen(&shape, &packed, 25, nullptr, fake_pointer(), scales,
                                         INTFA_V_PER_CHANNEL, nullptr),
                 "cu_seqlens_kv", "v varlen: null offsets");
  const int* offsets = static_cast<const int*>(fake_pointer());
  expect_refused(intfa_quantize_v_varlen(&shape, &packed, 0, offsets, fake_pointer(), scales,
                                         INTFA_V_PER_CHANNEL, nullptr),
                 "total_kv", "v varlen: zero total");
  expect_refused(intfa_quantize_v_varlen(nullptr, &packed, 25, nullptr, fake_pointer(), scales,
                                         INTFA_V_PER_CHANNEL, nullptr),
                 "shape", "v varlen: null shape");
}

// Stores `value` in a C enum member as C code may: C++ cannot convert an int outside the
// enumerators' range to the enum type without undefined behaviour, so it writes the int's bytes.
template <typename CEnum>
void store_raw(CEnum& member, int value) {
  static_assert(sizeof(CEnum) == sizeof(int), "C enums here are int-sized");
  std::memcpy(&member, &value, sizeof value);
}

struct CRule {
  const char* name;
  std::function<void(CCall&)> break_it;
  const char* field;
};

TEST(CApiValidation, EnumsOutsideTheirTypesAreInvalidArgumentsNamingTheMember) {
  const std::vector<CRule> rules = {
      {"variant 2", [](CCall& c) { store_raw(c.problem.variant, 2); },
       "problem.variant"},
      {"variant -1", [](CCall& c) { store_raw(c.problem.variant, -1); },
       "problem.variant"},
      {"q dtype 9", [](CCall& c) { store_raw(c.tensors.q.dtype, 9); },
       "tensors.q.dtype"},
      {"out dtype -3", [](CCall& c) { store_raw(c.tensors.out.dtype, -3); },
       "tensors.out.dtype"},
      {"p encoding 2", [](CCall& c) { store_raw(c.options.p_encoding, 2); },
       "options.p_encoding"},
      {"p scale 7", [](CCall& c) { store_raw(c.options.p_scale, 7); },
       "options.p_scale"},
      {"v granularity 3", [](CCall& c) { store_raw(c.options.v_granularity, 3); },
       "options.v_granularity"},
      {"k granularity 2", [](CCall& c) { store_raw(c.options.k_granularity, 2); },
       "options.k_granularity"},
      {"k granularity -1", [](CCall& c) { store_raw(c.options.k_granularity, -1); },
       "options.k_granularity"},
  };
  const ExpectNothingLaunched nothing_launched;
  for (const CRule& rule : rules) {
    CCall c = to_c(valid_call());
    rule.break_it(c);
    expect_refused(intfa_attention_forward(&c.problem, &c.tensors, nullptr, &c.options), rule.field,
                   rule.name);
  }
}

TEST(CApiValidation, NullStructPointersAreInvalidArgumentsAndNullOptionsMeanTheDefaults) {
  const ExpectNothingLaunched nothing_launched;
  CCall c = to_c(valid_call());
  expect_refused(intfa_attention_forward(nullptr, &c.tensors, nullptr, &c.options), "problem",
                 "null problem");
  expect_refused(intfa_attention_forward(&c.problem, nullptr, nullptr, &c.options), "tensors",
                 "null tensors");
  c.problem.batch = 0;  // refused after the options are read: a null options pointer is fine
  expect_refused(intfa_attention_forward(&c.problem, &c.tensors, nullptr, nullptr), "problem.batch",
                 "null options");
}

TEST(CApiValidation, QuantizeRefusesBadInputNamingTheField) {
  const intfa_shape_t shape{1, 2, 10, 64};
  const TensorShape cpp_shape{1, 2, 10, 64};
  const intfa_tensor_t input =
      to_c(TensorView::dense(fake_pointer(), DType::kF16, Layout::kBHND, cpp_shape));
  const intfa_tensor_t output =
      to_c(TensorView::dense(fake_pointer(), DType::kI8, Layout::kBHND, cpp_shape));
  float* scales = static_cast<float*>(fake_pointer());
  intfa_tensor_t bad_dtype = input;
  store_raw(bad_dtype.dtype, 11);
  const intfa_shape_t zero_heads{1, 0, 10, 64};
  const ExpectNothingLaunched nothing_launched;
  expect_refused(intfa_quantize_qk(nullptr, &input, &output, scales, 8, nullptr), "shape",
                 "qk: null shape");
  expect_refused(intfa_quantize_qk(&shape, nullptr, &output, scales, 8, nullptr), "input",
                 "qk: null input");
  expect_refused(intfa_quantize_qk(&shape, &input, nullptr, scales, 8, nullptr), "output",
                 "qk: null output");
  expect_refused(intfa_quantize_qk(&shape, &bad_dtype, &output, scales, 8, nullptr), "input.dtype",
                 "qk: dtype 11");
  expect_refused(intfa_quantize_qk(&zero_heads, &input, &output, scales, 8, nullptr), "shape.heads",
                 "qk: zero heads");
  expect_refused(intfa_quantize_qk(&shape, &input, &output, scales, 5, nullptr), "options.bits",
                 "qk: 5 bits");
  expect_refused(intfa_quantize_qk(&shape, &input, &output, nullptr, 8, nullptr), "scales",
                 "qk: null scales");
  expect_refused(intfa_quantize_k_smoothed(&shape, &input, &output, scales, 8, nullptr, nullptr),
                 "channel_mean", "k smoothed: null means");
  expect_refused(intfa_quantize_k_smoothed(&shape, &input, &output, scales, 8,
                                           static_cast<float*>(fake_pointer(2)), nullptr),
                 "options.smooth_k_channel_mean", "k smoothed: misaligned means");
  expect_refused(
      intfa_quantize_v(nullptr, &input, fake_pointer(), scales, INTFA_V_PER_TENSOR, nullptr),
      "shape", "v: null shape");
  expect_refused(intfa_quantize_v(&shape, &input, nullptr, scales, INTFA_V_PER_TENSOR, nullptr),
                 "output", "v: null output");
  expect_refused(
      intfa_test_quantize_v_with_granularity(&shape, &input, fake_pointer(), scales, 3),
      "granularity", "v: granularity 3");

  // K smoothing's LSE term and the rotation (intfa_quantize_qk_with_options).
  intfa_quantize_options_t options;
  intfa_default_quantize_options(&options);
  EXPECT_EQ(options.bits, 8);
  EXPECT_EQ(options.rotate, 0);
  EXPECT_EQ(options.smooth_k_channel_mean, nullptr);
  expect_refused(intfa_quantize_qk_with_options(&shape, &input, &output, scales, nullptr, nullptr),
                 "options", "qk with options: null options");
  intfa_quantize_options_t automatic = options;
  automatic.rotate = INTFA_ROTATE_AUTO;  // needs the C++ API's rotated heads
  expect_refused(
      intfa_quantize_qk_with_options(&shape, &input, &output, scales, &automatic, nullptr),
      "options.rotate", "qk with options: automatic rotation");
  intfa_quantize_options_t half_term = options;
  half_term.k_channel_mean = static_cast<const float*>(fake_pointer());
  expect_refused(
      intfa_quantize_qk_with_options(&shape, &input, &output, scales, &half_term, nullptr),
      "options.q_dot_k_mean", "qk with options: means without the term's output");
  intfa_quantize_options_t both = half_term;
  both.q_dot_k_mean = static_cast<float*>(fake_pointer());
  both.smooth_k_channel_mean = static_cast<float*>(fake_pointer());
  expect_refused(intfa_quantize_qk_with_options(&shape, &input, &output, scales, &both, nullptr),
                 "options.smooth_k_channel_mean", "qk with options: smoothing and the term");
  intfa_quantize_options_t bad_heads = half_term;
  bad_heads.q_dot_k_mean = static_cast<float*>(fake_pointer());
  bad_heads.k_channel_mean_heads = 3;  // does not divide 2
  expect_refused(
      intfa_quantize_qk_with_options(&shape, &input, &output, scales, &bad_heads, nullptr),
      "options.k_channel_mean_heads", "qk with options: 3 KV heads for 2 heads");
  intfa_quantize_options_t misaligned = bad_heads;
  misaligned.k_channel_mean_heads = 1;
  misaligned.q_dot_k_mean = static_cast<float*>(fake_pointer(2));
  expect_refused(
      intfa_quantize_qk_with_options(&shape, &input, &output, scales, &misaligned, nullptr),
      "options.q_dot_k_mean", "qk with options: misaligned terms");
}

TEST(CApiValidation, TheSixteenBitEntryPointsDefaultToKSmoothingAndNameBadFields) {
  intfa_qk_transforms_t transforms{-1, -1};
  intfa_default_qk_transforms(&transforms);
  EXPECT_EQ(transforms.smooth_k, AttentionOptions{}.smooth_k ? 1 : 0);
  EXPECT_EQ(transforms.rotate, static_cast<int>(AttentionOptions{}.rotate_qk));
  EXPECT_EQ(transforms.rotate, INTFA_ROTATE_AUTO) << "automatic rotation is on by default";
  EXPECT_EQ(transforms.smooth_k, 1) << "K smoothing is on by default";

  const intfa_problem_t problem{1, 2, 2, 10, 10, 64, 0, INTFA_FULL_INT8, 8};
  std::size_t bytes = 0;
  EXPECT_EQ(intfa_attention_workspace_bytes(&problem, nullptr, &bytes), INTFA_OK)
      << intfa_last_error();
  AttentionProblem cpp_problem;
  cpp_problem.batch = 1;
  cpp_problem.heads_q = cpp_problem.heads_kv = 2;
  cpp_problem.seq_q = cpp_problem.seq_kv = 10;
  cpp_problem.head_dim = 64;
  EXPECT_EQ(bytes, attention_workspace_bytes(cpp_problem));
  expect_refused(intfa_attention_workspace_bytes(nullptr, nullptr, &bytes), "problem",
                 "workspace: null problem");
  expect_refused(intfa_attention_workspace_bytes(&problem, nullptr, nullptr), "bytes",
                 "workspace: null result");

  const ExpectNothingLaunched nothing_launched;
  const TensorShape shape{1, 2, 10, 64};
  intfa_attention_inputs_t inputs{};
  inputs.q = inputs.k = inputs.v = inputs.out =
      to_c(TensorView::dense(fake_pointer(), DType::kF16, Layout::kBHND, shape));
  expect_refused(intfa_attention_forward_16bit(&problem, nullptr, nullptr, fake_pointer(), bytes,
                                               nullptr, nullptr, nullptr),
                 "inputs", "16-bit: null inputs");
  expect_refused(intfa_attention_forward_16bit(&problem, &inputs, nullptr, nullptr, bytes, nullptr,
                                               nullptr, &transforms),
                 "workspace", "16-bit: null workspace");
  expect_refused(intfa_attention_forward_16bit(&problem, &inputs, nullptr, fake_pointer(),
                                               bytes - 1, nullptr, nullptr, &transforms),
                 "workspace_bytes", "16-bit: a byte short");
  intfa_qk_transforms_t bad_rotation = transforms;
  bad_rotation.rotate = INTFA_ROTATE_AUTO + 1;
  expect_refused(intfa_attention_forward_16bit(&problem, &inputs, nullptr, fake_pointer(), bytes,
                                               nullptr, nullptr, &bad_rotation),
                 "transforms.rotate", "16-bit: a rotation past auto");
  intfa_attention_tensors_t tensors{};
  expect_refused(
      intfa_attention_forward_smoothed_k(&problem, &tensors, nullptr, nullptr, nullptr, nullptr),
      "q_dot_k_mean", "smoothed K: null terms");
}

// Within the problem's limits a workspace can pass 2^64 bytes: batch 60047, heads_q 32768,
// seq_q 130210491 came back INTFA_OK with 25.8 MiB (Q's parts summed past 2^64 and wrapped); K's
// rows of 65535 batches and heads of 2^28 keys at d = 256 wrap in one product.
TEST(CApiValidation, AWorkspaceOf2To64BytesOrMoreIsRefusedNamingTheLengthThatSizesIt) {
  std::size_t bytes = 0;
  const intfa_problem_t long_q{60047, 32768, 1, 130210491, 1, 64, 0, INTFA_FULL_INT8, 8};
  expect_refused(intfa_attention_workspace_bytes(&long_q, nullptr, &bytes), "problem.seq_q",
                 "Q's parts");
  const intfa_problem_t long_kv{65535, 65535, 65535, 1, 1 << 28, 256, 0, INTFA_HALF_INT8, 8};
  expect_refused(intfa_attention_workspace_bytes(&long_kv, nullptr, &bytes), "problem.seq_kv",
                 "K's rows");
  // The INT8 V layout's bytes of the same sizes, in the helper the workspace uses.
  expect_refused(intfa_v_int8_bytes_checked(65535, 65535, 1 << 28, 256, &bytes), "seq_kv",
                 "V's bytes");
  EXPECT_EQ(intfa_v_int8_bytes(65535, 65535, 1 << 28, 256), 0u);
}

// The V layout helpers refuse what no problem can have (their C forms once returned
// -2147483584, 1.8e19 and a batch stride of 0): the _checked functions with a status and the
// message, the old ones with -1, 0 or a null view and the same message.
TEST(CApiValidation, TheVLayoutHelpersRefuseOutOfRangeInputNamingIt) {
  int padded = 0;
  EXPECT_EQ(intfa_v_padded_seq_checked(1000, &padded), INTFA_OK);
  EXPECT_EQ(padded, intfa_v_padded_seq(1000));
  EXPECT_EQ(padded, 1024);
  expect_refused(intfa_v_padded_seq_checked(INT_MAX, &padded), "seq_kv", "padded seq INT_MAX");
  EXPECT_EQ(intfa_v_padded_seq(INT_MAX), -1);
  EXPECT_NE(std::string(intfa_last_error()).find("seq_kv"), std::string::npos);
  expect_refused(intfa_v_padded_seq_checked(0, &padded), "seq_kv", "padded seq 0");
  expect_refused(intfa_v_padded_seq_checked(16, nullptr), "padded_seq", "null result");

  size_t bytes = 0;
  EXPECT_EQ(intfa_v_int8_bytes_checked(2, 8, 1000, 128, &bytes), INTFA_OK);
  EXPECT_EQ(bytes, intfa_v_int8_bytes(2, 8, 1000, 128));
  EXPECT_EQ(bytes, size_t{2} * 8 * 128 * 1024);
  expect_refused(intfa_v_int8_bytes_checked(-1, 1, 64, 64, &bytes), "batch", "bytes: batch -1");
  EXPECT_EQ(intfa_v_int8_bytes(-1, 1, 64, 64), 0u);
  expect_refused(intfa_v_int8_bytes_checked(1, 1 << 24, 1000, 256, &bytes), "heads_kv",
                 "bytes: 2^24 heads");

  intfa_tensor_t view{};
  EXPECT_EQ(intfa_v_int8_view_checked(fake_pointer(), 2, 8, 1000, 128, &view), INTFA_OK);
  EXPECT_EQ(view.strides[0], std::int64_t{8} * 128 * 1024);
  EXPECT_EQ(view.strides[3], 1024);
  expect_refused(intfa_v_int8_view_checked(fake_pointer(), 1, 1 << 24, 1000, 256, &view),
                 "heads_kv", "view: 2^24 heads");
  intfa_v_int8_view(fake_pointer(), 1, 1 << 24, 1000, 256, &view);
  EXPECT_EQ(view.data, nullptr) << "a view with a batch stride of 0";
  EXPECT_NE(std::string(intfa_last_error()).find("heads_kv"), std::string::npos);
  expect_refused(intfa_v_int8_view_checked(fake_pointer(), 1, 1, 64, 96, &view), "head_dim",
                 "view: head dim 96");

  size_t count = 0;
  EXPECT_EQ(intfa_v_scale_count_checked(INTFA_V_PER_BLOCK, 2, 8, 1000, 128, &count), INTFA_OK);
  EXPECT_EQ(count, size_t{2} * 8 * 16 * 128);
  expect_refused(intfa_v_scale_count_checked(INTFA_V_PER_CHANNEL, 0, 8, 1000, 128, &count), "batch",
                 "scale count: batch 0");
  EXPECT_EQ(intfa_v_scale_count(INTFA_V_PER_CHANNEL, 0, 8, 1000, 128), 0u);
}

TEST(CApiValidation, KScalesArePerTokenByDefault) {
  intfa_options_t options;
  std::memset(&options, 0xff, sizeof options);
  intfa_default_options(&options);
  EXPECT_EQ(options.k_granularity, INTFA_K_PER_TOKEN);
  EXPECT_EQ(static_cast<int>(options.k_granularity),
            static_cast<int>(AttentionOptions{}.numerics.k_granularity));
  intfa_quantize_options_t quantize_options;
  std::memset(&quantize_options, 0xff, sizeof quantize_options);
  intfa_default_quantize_options(&quantize_options);
  EXPECT_EQ(quantize_options.k_granularity, INTFA_K_PER_TOKEN);
  EXPECT_EQ(static_cast<int>(quantize_options.k_granularity),
            static_cast<int>(QuantizeOptions{}.k_granularity));
}

TEST(CApiValidation, AnUnknownKGranularityIsRefusedNamingTheMember) {
  const intfa_shape_t shape{1, 2, 10, 64};
  const TensorShape cpp_shape{1, 2, 10, 64};
  const intfa_tensor_t input =
      to_c(TensorView::dense(fake_pointer(), DType::kF16, Layout::kBHND, cpp_shape));
  const intfa_tensor_t output =
      to_c(TensorView::dense(fake_pointer(), DType::kI8, Layout::kBHND, cpp_shape));
  intfa_quantize_options_t quantize_options;
  intfa_default_quantize_options(&quantize_options);
  store_raw(quantize_options.k_granularity, 2);
  const ExpectNothingLaunched nothing_launched;
  expect_refused(
      intfa_quantize_qk_with_options(&shape, &input, &output, static_cast<float*>(fake_pointer()),
                                     &quantize_options, nullptr),
      "options.k_granularity", "quantize: k granularity 2");
  // intfa_precompile reads the options before it names an arch or compiles anything.
  const intfa_problem_t problem{1, 2, 2, 10, 10, 64, 0, INTFA_FULL_INT8, 8};
  intfa_options_t options;
  intfa_default_options(&options);
  store_raw(options.k_granularity, 2);
  expect_refused(intfa_precompile(&problem, INTFA_F16, &options, "sm_90a", nullptr, nullptr),
                 "options.k_granularity", "precompile: k granularity 2");
  size_t count = 0;
  expect_refused(intfa_test_k_scale_count_with_granularity(2, 1, 1, 64, &count), "granularity",
                 "k scale count: granularity 2");
}

TEST(CApiValidation, KScaleCountIsOnePerKeyOrOnePerBlockOf64Keys) {
  size_t count = 0;
  EXPECT_EQ(intfa_k_scale_count_checked(INTFA_K_PER_BLOCK, 2, 8, 1000, &count), INTFA_OK)
      << intfa_last_error();
  EXPECT_EQ(count, size_t{2} * 8 * 16);  // ceil(1000 / 64) blocks per (batch, head)
  EXPECT_EQ(count, k_scale_count(KScaleGranularity::kPerBlock, 2, 8, 1000));
  EXPECT_EQ(intfa_k_scale_count(INTFA_K_PER_BLOCK, 2, 8, 1000), count);
  EXPECT_EQ(intfa_k_scale_count(INTFA_K_PER_BLOCK, 3, 5, 1024), size_t{3} * 5 * 16);
  EXPECT_EQ(intfa_k_scale_count(INTFA_K_PER_BLOCK, 1, 1, 1), 1u);
  EXPECT_EQ(intfa_k_scale_count(INTFA_K_PER_BLOCK, 1, 1, 65), 2u);
  EXPECT_EQ(intfa_k_scale_count_checked(INTFA_K_PER_TOKEN, 2, 8, 1000, &count), INTFA_OK)
      << intfa_last_error();
  EXPECT_EQ(count, size_t{2} * 8 * 1000);
  EXPECT_EQ(intfa_k_scale_count(INTFA_K_PER_TOKEN, 3, 5, 65), size_t{3} * 5 * 65);

  expect_refused(intfa_k_scale_count_checked(INTFA_K_PER_TOKEN, 0, 8, 1000, &count), "batch",
                 "k scale count: batch 0");
  EXPECT_EQ(intfa_k_scale_count(INTFA_K_PER_BLOCK, 0, 8, 1000), 0u);
  EXPECT_NE(std::string(intfa_last_error()).find("batch"), std::string::npos);
  expect_refused(intfa_k_scale_count_checked(INTFA_K_PER_BLOCK, 1, 1, 0, &count), "seq_kv",
                 "k scale count: seq_kv 0");
  expect_refused(intfa_k_scale_count_checked(INTFA_K_PER_BLOCK, 1, 1, 64, nullptr), "count",
                 "k scale count: null result");
}

TEST(AttentionValidation, TheVLayoutHelpersThrowForOutOfRangeInput) {
  EXPECT_EQ(v_padded_seq(65), 128);
  for (int seq_kv : {0, -5, INT_MAX, (1 << 28) + 1}) {
    try {
      v_padded_seq(seq_kv);
      ADD_FAILURE() << seq_kv << " accepted";
    } catch (const InvalidArgument& error) {
      EXPECT_EQ(error.field(), "seq_kv");
    }
  }
  EXPECT_THROW(v_int8_bytes(-1, 1, 64, 64), InvalidArgument);
  EXPECT_THROW(v_int8_view(fake_pointer(), 1, 1 << 24, 1000, 256), InvalidArgument);
  EXPECT_THROW(v_scale_count(VScaleGranularity::kPerTensor, 70000, 1, 64, 64), InvalidArgument);
}

TEST(CApiValidation, TheLastErrorBelongsToTheFailingThread) {
  CCall c = to_c(valid_call());
  c.problem.head_dim = 96;
  EXPECT_EQ(intfa_attention_forward(&c.problem, &c.tensors, nullptr, &c.options),
            INTFA_INVALID_ARGUMENT);
  const std::string message = intfa_last_error();
  EXPECT_NE(message.find("problem.head_dim"), std::string::npos) << message;
  std::string other_thread_message = "unset";
  std::thread([&] { other_thread_message = intfa_last_error(); }).join();
  EXPECT_EQ(other_thread_message, "");
  EXPECT_STREQ(intfa_status_string(INTFA_INVALID_ARGUMENT), "invalid_argument");
  EXPECT_STREQ(intfa_test_status_string(99), "unknown");
}

// A context of its own on device 0 with a stream in it; the primary context is current again
// afterwards. Needs a GPU.
class StreamOfAnotherContext {
 public:
  StreamOfAnotherContext() {
    INTFA_DRIVER(cuCtxCreate, &context_, nullptr, 0, device::current_device());
    INTFA_DRIVER(cuStreamCreate, &stream_, CU_STREAM_NON_BLOCKING);
    device::use_primary_context();
  }
  ~StreamOfAnotherContext() {
    const device::DriverApi& api = device::driver();
    api.cuCtxSetCurrent(context_);
    api.cuStreamDestroy(stream_);
    api.cuCtxDestroy(context_);
    device::use_primary_context();
  }
  StreamOfAnotherContext(const StreamOfAnotherContext&) = delete;
  StreamOfAnotherContext& operator=(const StreamOfAnotherContext&) = delete;
  CUstream get() const { return stream_; }

 private:
  CUcontext context_ = nullptr;
  CUstream stream_ = nullptr;
};

TEST(AttentionValidationGpu, AStreamOfAnotherContextIsRefusedBeforeAnyLaunch) {
  INTFA_REQUIRE_GPU();
  const StreamOfAnotherContext other;
  const ExpectNothingLaunched nothing_launched;
  const Call call = valid_call();
  try {
    attention_forward(call.problem, call.tensors, other.get(), call.options);
    ADD_FAILURE() << "accepted a stream of another context";
  } catch (const InvalidArgument& error) {
    EXPECT_EQ(error.field(), "stream") << error.what();
  }
  CCall c = to_c(call);
  expect_refused(intfa_attention_forward(&c.problem, &c.tensors, other.get(), &c.options), "stream",
                 "C API");
}

}  // namespace
}  // namespace intfa
