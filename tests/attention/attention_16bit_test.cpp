// intfa::attention_forward_16bit (what intfa.attention runs): its workspace and input checks name
// the field before anything is launched (no GPU needed), and on a GPU it writes exactly what the
// two steps it stands for write: quantize_qk / quantize_v into separate buffers, then
// attention_forward.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "attention/attention_launch.hpp"
#include "attention/attention_test_support.hpp"
#include "intfa/attention.hpp"
#include "intfa/errors.hpp"
#include "intfa/intfa.h"
#include "intfa/quantize.hpp"
#include "numerics/option_names.hpp"
#include "reference/half.hpp"
#include "reference/reference.hpp"
#include "spec/attention_spec.hpp"
#include "support/gpu.hpp"
#include "support/temp_dir.hpp"

namespace intfa {
namespace {

using testing::fake_pointer;

AttentionProblem small_problem(Variant variant) {
  AttentionProblem problem;
  problem.batch = 2;
  problem.heads_q = 4;
  problem.heads_kv = 2;
  problem.seq_q = 77;
  problem.seq_kv = 130;
  problem.head_dim = 64;
  problem.causal = true;
  problem.variant = variant;
  return problem;
}

AttentionInputs fake_inputs(const AttentionProblem& p, DType dtype = DType::kF16) {
  const TensorShape q{p.batch, p.heads_q, p.seq_q, p.head_dim};
  const TensorShape kv{p.batch, p.heads_kv, p.seq_kv, p.head_dim};
  AttentionInputs inputs;
  inputs.q = TensorView::dense(fake_pointer(), dtype, Layout::kBHND, q);
  inputs.k = TensorView::dense(fake_pointer(), dtype, Layout::kBNHD, kv);
  inputs.v = TensorView::dense(fake_pointer(), dtype, Layout::kBNHD, kv);
  inputs.out = TensorView::dense(fake_pointer(), dtype, Layout::kBHND, q);
  return inputs;
}

// The field an InvalidArgument names, or "(no InvalidArgument)" (NoDevice: every check passed).
// Only calls with a bad field may reach here on a GPU: a valid one would launch on fake addresses.
std::string refused_field(const AttentionProblem& problem, const AttentionInputs& inputs,
                          void* workspace, std::size_t bytes) {
  try {
    attention_forward_16bit(problem, inputs, workspace, bytes, nullptr);
  } catch (const InvalidArgument& error) {
    return error.field();
  } catch (const Error&) {
  }
  return "(no InvalidArgument)";
}

TEST(Attention16bit, TheWorkspaceIsSizedFromTheProblemAndGrowsWithWhatItHolds) {
  const AttentionProblem full = small_problem(Variant::kFullInt8);
  const AttentionProblem half = small_problem(Variant::kHalfInt8);
  // Full INT8 holds quantized V too.
  EXPECT_GT(attention_workspace_bytes(full), attention_workspace_bytes(half));
  // At least INT8 Q and K and their scales, K smoothing's means and Q's LSE terms.
  const std::size_t minimum =
      static_cast<std::size_t>(full.batch) *
      (full.heads_q * full.seq_q * (full.head_dim + 8) +
       full.heads_kv * (full.seq_kv * (full.head_dim + 4) + full.head_dim * 4));
  EXPECT_GE(attention_workspace_bytes(half), minimum);
  EXPECT_EQ(attention_workspace_bytes(full) % 256, 0u);
  // A head dim between the kernels' is sized as the next kernel's (its rows zero-extended);
  // one that is no multiple of 8, or above 256, is refused.
  AttentionProblem between = full;
  between.head_dim = 96;
  AttentionProblem next = full;
  next.head_dim = 128;
  EXPECT_EQ(attention_workspace_bytes(between), attention_workspace_bytes(next));
  between.head_dim = 40;
  next.head_dim = 64;
  EXPECT_EQ(attention_workspace_bytes(between), attention_workspace_bytes(next));
  for (int head_dim : {100, 264, 4, 0}) {
    AttentionProblem bad = full;
    bad.head_dim = head_dim;
    try {
      attention_workspace_bytes(bad);
      ADD_FAILURE() << "head_dim " << head_dim << " was sized";
    } catch (const InvalidArgument& error) {
      EXPECT_EQ(error.field(), "problem.head_dim");
    }
  }
  // Packed sequences are sized from their totals.
  VarlenLayout packed;
  packed.total_q = 10;
  packed.total_kv = 20;
  EXPECT_LT(attention_workspace_bytes(full, packed), attention_workspace_bytes(full));
  packed.total_kv = 0;
  try {
    attention_workspace_bytes(full, packed);
    ADD_FAILURE() << "a packed batch without keys was sized";
  } catch (const InvalidArgument& error) {
    EXPECT_EQ(error.field(), "varlen.total_kv");
  }
}

TEST(Attention16bit, EveryBadInputOrWorkspaceIsRefusedNamingIt) {
  const AttentionProblem problem = small_problem(Variant::kFullInt8);
  const std::size_t bytes = attention_workspace_bytes(problem);
  void* const workspace = fake_pointer();
  const AttentionInputs valid = fake_inputs(problem);
  if (!testing::gpu_available()) {
    EXPECT_EQ(refused_field(problem, valid, workspace, bytes), "(no InvalidArgument)");
  }

  // INT4 Q.K: the workspace's Q and K are rows of head_dim / 2 bytes, which the call's own checks
  // accept (halved twice, they were refused as "tensors.q.strides").
  AttentionProblem int4 = problem;
  int4.qk_bits = 4;
  if (!testing::gpu_available()) {
    EXPECT_EQ(refused_field(int4, fake_inputs(int4), workspace, attention_workspace_bytes(int4)),
              "(no InvalidArgument)");
  }

  EXPECT_EQ(refused_field(problem, valid, nullptr, bytes), "workspace");
  EXPECT_EQ(refused_field(problem, valid, fake_pointer(16), bytes), "workspace");
  EXPECT_EQ(refused_field(problem, valid, workspace, bytes - 1), "workspace_bytes");

  AttentionInputs inputs = valid;
  inputs.q.dtype = DType::kI8;
  EXPECT_EQ(refused_field(problem, inputs, workspace, bytes), "inputs.q.dtype");
  inputs = valid;
  inputs.k.dtype = DType::kBF16;
  EXPECT_EQ(refused_field(problem, inputs, workspace, bytes), "inputs.k.dtype");
  inputs = valid;
  inputs.v.strides[3] = 2;
  EXPECT_EQ(refused_field(problem, inputs, workspace, bytes), "inputs.v.strides");
  inputs = valid;
  inputs.q.data = fake_pointer(2);
  EXPECT_EQ(refused_field(problem, inputs, workspace, bytes), "inputs.q.data");
  inputs = valid;
  inputs.out.dtype = DType::kI8;
  EXPECT_EQ(refused_field(problem, inputs, workspace, bytes), "inputs.out.dtype");
  inputs = valid;
  inputs.lse = static_cast<float*>(fake_pointer(2));
  EXPECT_EQ(refused_field(problem, inputs, workspace, bytes), "inputs.lse");
  inputs = valid;
  inputs.varlen.cu_seqlens_q = static_cast<const int*>(fake_pointer());
  EXPECT_EQ(refused_field(problem, inputs, workspace, bytes), "inputs.varlen.cu_seqlens_kv");
  AttentionProblem bad = problem;
  bad.heads_q = 3;
  EXPECT_EQ(refused_field(bad, fake_inputs(bad), workspace, bytes), "problem.heads_q");

  // A head dim between the kernels' takes inputs of that head dim (the kernels read the
  // missing channels as zeros); one that is no multiple of 8 is refused naming it.
  AttentionProblem between = problem;
  between.head_dim = 80;
  const std::size_t between_bytes = attention_workspace_bytes(between);
  if (!testing::gpu_available()) {
    EXPECT_EQ(refused_field(between, fake_inputs(between), workspace, between_bytes),
              "(no InvalidArgument)");
  }
  inputs = fake_inputs(between);
  inputs.q.strides[2] = 81;  // rows no longer 16-byte aligned
  EXPECT_EQ(refused_field(between, inputs, workspace, between_bytes), "inputs.q.strides");
  bad = problem;
  bad.head_dim = 100;
  EXPECT_EQ(refused_field(bad, fake_inputs(bad), workspace, between_bytes), "problem.head_dim");
}

intfa_tensor_t c_tensor(const TensorView& view) {
  intfa_tensor_t tensor{};
  tensor.data = view.data;
  tensor.dtype = view.dtype == DType::kF16 ? INTFA_F16 : INTFA_BF16;
  for (int i = 0; i < 4; ++i) tensor.strides[i] = view.strides[i];
  return tensor;
}

// The C API sizes the workspace as C++ does and refuses what C++ refuses, naming the field.
TEST(Attention16bitCApi, SizesAndRefusesAsTheCppApi) {
  const AttentionProblem problem = small_problem(Variant::kFullInt8);
  intfa_problem_t c_problem{problem.batch,   problem.heads_q,  problem.heads_kv,
                            problem.seq_q,   problem.seq_kv,   problem.head_dim,
                            problem.causal ? 1 : 0, INTFA_FULL_INT8, 8};
  std::size_t bytes = 0;
  ASSERT_EQ(intfa_attention_workspace_bytes(&c_problem, nullptr, &bytes), INTFA_OK);
  EXPECT_EQ(bytes, attention_workspace_bytes(problem));
  EXPECT_EQ(intfa_attention_workspace_bytes(&c_problem, nullptr, nullptr),
            INTFA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(intfa_last_error()).find("bytes"), std::string::npos);

  const AttentionInputs inputs = fake_inputs(problem);
  intfa_attention_inputs_t c_inputs{c_tensor(inputs.q), c_tensor(inputs.k), c_tensor(inputs.v),
                                    c_tensor(inputs.out), nullptr};
  EXPECT_EQ(intfa_attention_forward_16bit(&c_problem, &c_inputs, nullptr, fake_pointer(),
                                          bytes - 1, nullptr, nullptr, nullptr),
            INTFA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(intfa_last_error()).find("workspace_bytes"), std::string::npos);
  c_inputs.k.dtype = INTFA_BF16;
  EXPECT_EQ(intfa_attention_forward_16bit(&c_problem, &c_inputs, nullptr, fake_pointer(), bytes,
                                          nullptr, nullptr, nullptr),
            INTFA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(intfa_last_error()).find("inputs.k.dtype"), std::string::npos);
  c_problem.variant = static_cast<intfa_variant_t>(7);
  EXPECT_EQ(intfa_attention_forward_16bit(&c_problem, &c_inputs, nullptr, fake_pointer(), bytes,
                                          nullptr, nullptr, nullptr),
            INTFA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(intfa_last_error()).find("problem.variant"), std::string::npos);
}

// Random N(0, scale^2) values of `dtype` (f16 or bf16) as device bits for a dense tensor of
// `shape`.
// With `outlier_group` > 0, channels 3 and 17 are 10x larger in the heads of every even KV head
// (head i of [batch * heads] belongs to KV head i / outlier_group): the heads automatic rotation
// rotates, beside heads it leaves alone.
device::DeviceBuffer random_16bit(const TensorShape& shape, DType dtype, std::uint64_t seed,
                                  float scale = 1.0f, int outlier_group = 0) {
  const std::size_t count =
      static_cast<std::size_t>(shape.batch) * shape.heads * shape.seq * shape.head_dim;
  std::vector<float> values =
      reference::random_values(count, reference::Distribution::kNormal, seed);
  if (outlier_group > 0) {
    const std::size_t head_values = static_cast<std::size_t>(shape.seq) * shape.head_dim;
    for (std::size_t i = 0; i < count; ++i) {
      const std::size_t channel = i % static_cast<std::size_t>(shape.head_dim);
      const bool outlier_head = (i / head_values / outlier_group) % 2 == 0;
      if (outlier_head && (channel == 3 || channel == 17)) values[i] *= 10.0f;
    }
  }
  std::vector<std::uint16_t> bits(count);
  for (std::size_t i = 0; i < count; ++i) {
    bits[i] = dtype == DType::kBF16 ? reference::float_to_bf16_bits(scale * values[i])
                                    : reference::float_to_f16_bits(scale * values[i]);
  }
  device::DeviceBuffer buffer(count * 2);
  buffer.upload(bits);
  return buffer;
}

// One call of the GPU test below: the problem, the inputs' dtype and Q's layout (BNHD: rows
// strided by heads * head_dim), and the numerics options.
struct StepsCase {
  AttentionProblem problem;
  DType dtype = DType::kF16;
  Layout q_layout = Layout::kBHND;
  bool smooth_k = false;
  QKRotation rotate = QKRotation::kOff;
  VScaleGranularity v_granularity = VScaleGranularity::kPerChannel;
  // Q and K with outlier channels in the heads of even KV heads (random_16bit): half the heads
  // for automatic rotation to rotate.
  bool outlier_heads = false;

  std::string describe() const {
    return std::string(problem.variant == Variant::kFullInt8 ? "full" : "half") + " d" +
           std::to_string(problem.head_dim) + " " + dtype_name(dtype) +
           (q_layout == Layout::kBNHD ? " q=BNHD" : "") + " smooth_k=" + std::to_string(smooth_k) +
           " rotate=" + option_name(rotate) + " v=" + std::string(option_name(v_granularity)) +
           (outlier_heads ? " outlier heads" : "");
  }
};

std::vector<StepsCase> steps_cases() {
  std::vector<StepsCase> cases;
  for (Variant variant : {Variant::kFullInt8, Variant::kHalfInt8}) {
    // The small problem (GQA, causal, tails) with every transform of Q and K; automatic rotation
    // on heads of which half have outlier channels.
    for (bool smooth_k : {false, true}) {
      for (QKRotation rotate : {QKRotation::kOff, QKRotation::kOn, QKRotation::kAuto}) {
        StepsCase c;
        c.problem = small_problem(variant);
        c.smooth_k = smooth_k;
        c.rotate = rotate;
        c.outlier_heads = rotate == QKRotation::kAuto;
        cases.push_back(c);
      }
    }
    // Where the Hopper kernel quantizes Q itself: several query blocks with a tail, each head
    // dim, bf16, Q with strided rows, K smoothed (the LSE term) or not.
    for (int head_dim : {128, 256}) {
      StepsCase c;
      c.problem = small_problem(variant);
      c.problem.head_dim = head_dim;
      c.problem.seq_q = 333;
      c.problem.seq_kv = 200;
      c.problem.causal = head_dim == 128;
      c.dtype = head_dim == 128 ? DType::kBF16 : DType::kF16;
      c.q_layout = head_dim == 128 ? Layout::kBNHD : Layout::kBHND;
      c.smooth_k = head_dim == 256;
      cases.push_back(c);
      // The same with automatic rotation on heads of which half have outlier channels, K
      // smoothed the other way: the kernel's rotated passes (out of line) at each head dim.
      c.rotate = QKRotation::kAuto;
      c.outlier_heads = true;
      c.smooth_k = !c.smooth_k;
      cases.push_back(c);
    }
    // V per tensor and per block (full INT8): the one call's K and V share launches where V has
    // a max pass (its scales zeroed by K's channel-mean launch, or by a memset without
    // smoothing); per block V has none.
    for (const auto& [smooth_k, granularity] :
         {std::pair{true, VScaleGranularity::kPerTensor},
          std::pair{false, VScaleGranularity::kPerTensor},
          std::pair{true, VScaleGranularity::kPerBlock}}) {
      if (variant != Variant::kFullInt8) break;
      StepsCase c;
      c.problem = small_problem(variant);
      c.smooth_k = smooth_k;
      c.v_granularity = granularity;
      cases.push_back(c);
    }
    if (variant == Variant::kFullInt8) {
      // The shared launch at d=256 (one token per warp in V's max pass), bf16, V per tensor.
      StepsCase c;
      c.problem = small_problem(variant);
      c.problem.head_dim = 256;
      c.problem.seq_kv = 200;
      c.dtype = DType::kBF16;
      c.smooth_k = true;
      c.v_granularity = VScaleGranularity::kPerTensor;
      cases.push_back(c);
    }
    // Past 1k tokens, the heuristic's long-sequence configs: three consumer warpgroups, each on
    // its own (the last query block's third warpgroup has no rows and exits); half INT8 with
    // 64-key tiles at d=128, causal.
    StepsCase c;
    c.problem = small_problem(variant);
    c.problem.head_dim = 128;
    c.problem.seq_q = 1050;
    c.problem.seq_kv = variant == Variant::kFullInt8 ? 1100 : 1050;
    c.problem.causal = variant == Variant::kHalfInt8;
    c.smooth_k = true;
    cases.push_back(c);
    // The same with automatic rotation on heads of which half have outlier channels, bf16 and Q
    // with strided rows: K's rows (with all of V on sm_90a) and the Hopper kernel's Q pass read
    // the decisions.
    c.rotate = QKRotation::kAuto;
    c.outlier_heads = true;
    c.dtype = DType::kBF16;
    c.q_layout = Layout::kBNHD;
    cases.push_back(c);
  }
  return cases;
}

// On a GPU: the one call writes, bit for bit, what quantize_qk, quantize_v and attention_forward
// write into buffers of their own (so the workspace holds each tensor whole and apart), for both
// variants, with and without K smoothing (K, then Q with the LSE term) and the rotation, and with
// the LSE. On sm_90a the one call's Hopper kernel quantizes Q itself (checked through its plan):
// its INT8 Q, scales and LSE term must be quantize_rows' to the bit for the outputs to match.
TEST(Attention16bitGpu, WritesExactlyWhatTheStepsItStandsForWrite) {
  INTFA_REQUIRE_GPU();
  const std::uint64_t seed = reference::fresh_seed();
  testing::ScopedEnv unset("INTFA_QUANTIZE_Q_IN_KERNEL", nullptr);
  int planned_in_kernel = 0;
  for (const StepsCase& c : steps_cases()) {
    const AttentionProblem& p = c.problem;
    const TensorShape q_shape{p.batch, p.heads_q, p.seq_q, p.head_dim};
    const TensorShape kv_shape{p.batch, p.heads_kv, p.seq_kv, p.head_dim};
    const int group = p.heads_q / p.heads_kv;
    const device::DeviceBuffer q =
        random_16bit(q_shape, c.dtype, seed, 1.0f, c.outlier_heads ? group : 0);
    const device::DeviceBuffer k =
        random_16bit(kv_shape, c.dtype, seed + 1, 1.0f, c.outlier_heads ? 1 : 0);
    const device::DeviceBuffer v = random_16bit(kv_shape, c.dtype, seed + 2);
    const std::size_t out_count =
        static_cast<std::size_t>(p.batch) * p.heads_q * p.seq_q * p.head_dim;
    const std::size_t rows_q = static_cast<std::size_t>(p.batch) * p.heads_q * p.seq_q;
    const std::size_t rows_k = static_cast<std::size_t>(p.batch) * p.heads_kv * p.seq_kv;
    device::Stream stream;

    // The one call, into poisoned outputs, on a workspace a first call with 8x larger V left
    // behind: V's scales must be zeroed again (K's channel-mean launch, or a memset), not kept.
    device::DeviceBuffer workspace(attention_workspace_bytes(p));
    workspace.fill_bytes(0xFF);
    device::DeviceBuffer out(out_count * 2), lse(rows_q * 4);
    const device::DeviceBuffer larger_v = random_16bit(kv_shape, c.dtype, seed + 3, 8.0f);
    AttentionInputs inputs;
    inputs.q = TensorView::dense(q.get(), c.dtype, c.q_layout, q_shape);
    inputs.k = TensorView::dense(k.get(), c.dtype, Layout::kBHND, kv_shape);
    inputs.v = TensorView::dense(larger_v.get(), c.dtype, Layout::kBHND, kv_shape);
    inputs.out = TensorView::dense(out.get(), c.dtype, Layout::kBHND, q_shape);
    inputs.lse = lse.as<float>();
    AttentionOptions options;
    options.smooth_k = c.smooth_k;
    options.rotate_qk = c.rotate;
    options.numerics.v_granularity = c.v_granularity;
    attention_forward_16bit(p, inputs, workspace.get(), workspace.bytes(), stream.get(), options);
    stream.synchronize();
    out.fill_bytes(0xFF);
    lse.fill_bytes(0xFF);
    inputs.v = TensorView::dense(v.get(), c.dtype, Layout::kBHND, kv_shape);
    attention_forward_16bit(p, inputs, workspace.get(), workspace.bytes(), stream.get(), options);

    // The steps, each into its own buffer.
    device::DeviceBuffer q8(rows_q * p.head_dim), k8(rows_k * p.head_dim);
    device::DeviceBuffer q_scale(rows_q * 4), k_scale(rows_k * 4), q_dot_k_mean(rows_q * 4);
    device::DeviceBuffer k_mean(static_cast<std::size_t>(p.batch) * p.heads_kv * p.head_dim * 4);
    device::DeviceBuffer v8(v_int8_bytes(p.batch, p.heads_kv, p.seq_kv, p.head_dim));
    device::DeviceBuffer v_scale(v_scale_count(c.v_granularity, p.batch, p.heads_kv, p.seq_kv,
                                               p.head_dim) *
                                 4);
    device::DeviceBuffer expected_out(out_count * 2), expected_lse(rows_q * 4);
    expected_out.fill_bytes(0xFF);
    AttentionTensors tensors;
    tensors.q = TensorView::dense(q8.get(), DType::kI8, Layout::kBHND, q_shape);
    tensors.k = TensorView::dense(k8.get(), DType::kI8, Layout::kBHND, kv_shape);
    const bool automatic = c.rotate == QKRotation::kAuto;
    const std::size_t kv_heads = static_cast<std::size_t>(p.batch) * p.heads_kv;
    device::DeviceBuffer decisions(kv_heads * sizeof(int));
    decisions.fill_bytes(0xFF);
    QuantizeOptions k_options;
    k_options.rotate = c.rotate;
    if (automatic) k_options.rotated_heads = decisions.as<int>();
    if (c.smooth_k) k_options.smooth_k_channel_mean = k_mean.as<float>();
    quantize_qk(kv_shape, inputs.k, tensors.k, k_scale.as<float>(), stream.get(), k_options);
    QuantizeOptions q_options;
    q_options.rotate = c.rotate;
    q_options.k_channel_mean_heads = p.heads_kv;
    if (automatic) q_options.k_rotated_heads = decisions.as<int>();
    if (c.smooth_k) {
      q_options.k_channel_mean = k_mean.as<float>();
      q_options.q_dot_k_mean = q_dot_k_mean.as<float>();
      tensors.q_dot_k_mean = q_dot_k_mean.as<float>();
    }
    quantize_qk(q_shape, inputs.q, tensors.q, q_scale.as<float>(), stream.get(), q_options);
    tensors.v = inputs.v;
    if (p.variant == Variant::kFullInt8) {
      quantize_v(kv_shape, inputs.v, v8.get(), v_scale.as<float>(), c.v_granularity,
                 stream.get());
      tensors.v = v_int8_view(v8.get(), p.batch, p.heads_kv, p.seq_kv, p.head_dim);
      tensors.v_scale = v_scale.as<float>();
    }
    tensors.q_scale = q_scale.as<float>();
    tensors.k_scale = k_scale.as<float>();
    tensors.out = TensorView::dense(expected_out.get(), c.dtype, Layout::kBHND, q_shape);
    tensors.lse = expected_lse.as<float>();
    AttentionOptions steps_options;
    steps_options.numerics.v_granularity = c.v_granularity;
    attention_forward(p, tensors, stream.get(), steps_options);
    stream.synchronize();

    // Which path the one call took: the plan it makes for these tensors.
    attention::SixteenBitCall sixteen_bit;
    sixteen_bit.q = inputs.q;
    sixteen_bit.k_channel_mean = k_mean.as<float>();
    sixteen_bit.q_dot_k_mean = q_dot_k_mean.as<float>();
    const bool in_kernel =
        attention::plan_launch(p, tensors, stream.get(), options, &sixteen_bit).quantizes_q;
    planned_in_kernel += in_kernel ? 1 : 0;
    if (automatic) {
      // The heads with outlier channels, and only they, were rotated.
      const auto decided = decisions.download_as<int>(kv_heads);
      for (std::size_t i = 0; i < kv_heads; ++i) {
        EXPECT_EQ(decided[i], i % 2 == 0 ? 1 : 0) << c.describe() << " KV head " << i;
      }
    }

    const auto got = out.download_as<std::uint16_t>(out_count);
    const auto want = expected_out.download_as<std::uint16_t>(out_count);
    EXPECT_EQ(std::memcmp(got.data(), want.data(), out_count * 2), 0)
        << c.describe() << " Q in the kernel=" << in_kernel << " seed=" << seed;
    const auto got_lse = lse.download_as<float>(rows_q);
    const auto want_lse = expected_lse.download_as<float>(rows_q);
    EXPECT_EQ(std::memcmp(got_lse.data(), want_lse.data(), rows_q * 4), 0)
        << c.describe() << " Q in the kernel=" << in_kernel;
  }
  if (testing::current_arch() == device::Arch::kSm90a) {
    // Every case, the rotated ones too (the kernel rotates Q as quantize_rows does): 2 variants
    // x (6 small + 4 larger + 2 long), and the 4 cases of V's other granularities.
    EXPECT_EQ(planned_in_kernel, 28);
  } else {
    EXPECT_EQ(planned_in_kernel, 0);
  }
}

// Random values of `dtype` for a [batch, heads, seq, channels] tensor, uploaded twice: as given,
// and zero-extended to `padded` channels (dense BHND each).
std::pair<device::DeviceBuffer, device::DeviceBuffer> random_and_padded(const TensorShape& shape,
                                                                        int padded,
                                                                        std::uint64_t seed) {
  const std::size_t rows = static_cast<std::size_t>(shape.batch) * shape.heads * shape.seq;
  const std::vector<float> values = reference::random_values(
      rows * shape.head_dim, reference::Distribution::kNormal, seed);
  std::vector<std::uint16_t> bits(rows * shape.head_dim), padded_bits(rows * padded, 0);
  for (std::size_t row = 0; row < rows; ++row) {
    for (int c = 0; c < shape.head_dim; ++c) {
      const std::uint16_t value = reference::float_to_f16_bits(values[row * shape.head_dim + c]);
      bits[row * shape.head_dim + c] = value;
      padded_bits[row * padded + c] = value;
    }
  }
  device::DeviceBuffer given(bits.size() * 2), widened(padded_bits.size() * 2);
  given.upload(bits);
  widened.upload(padded_bits);
  return {std::move(given), std::move(widened)};
}

// On a GPU: a head dim between the kernels' (40, 80, 96, 160) gives, bit for bit, the output
// channels and LSE of the same call on the inputs zero-extended to the next kernel's head dim
// with that call's softmax scale, on the heuristic's kernel (the Hopper one on an H100), on the
// portable one, and for packed sequences of different lengths; both variants. The zero channels
// the kernels read in place of copies change nothing, and the output's missing channels are not
// written (in a dense output they would land on the next row's first channels).
TEST(Attention16bitGpu, HeadDimsBetweenTheKernelsEqualTheZeroExtendedCall) {
  INTFA_REQUIRE_GPU();
  const std::uint64_t seed = reference::fresh_seed();
  const device::Arch arch = testing::current_arch();
  device::Stream stream;
  // Packed sequences: two of different lengths (the longest is the problem's seq_q / seq_kv).
  const std::vector<int> cu_q{0, 150, 240}, cu_kv{0, 140, 200};
  device::DeviceBuffer cu_q_device(cu_q.size() * 4), cu_kv_device(cu_kv.size() * 4);
  cu_q_device.upload(cu_q);
  cu_kv_device.upload(cu_kv);
  enum class Path { kHeuristic, kPortable, kPacked };
  for (int head_dim : {40, 80, 96, 160}) {
    const int kernel_dim = attention::kernel_head_dim(head_dim, "head_dim");
    for (Variant variant : {Variant::kFullInt8, Variant::kHalfInt8}) {
      for (Path path : {Path::kHeuristic, Path::kPortable, Path::kPacked}) {
        AttentionProblem p = small_problem(variant);
        p.seq_q = 150;
        p.seq_kv = 140;
        p.head_dim = head_dim;
        AttentionProblem padded_problem = p;
        padded_problem.head_dim = kernel_dim;
        VarlenLayout varlen;
        if (path == Path::kPacked) {
          varlen.cu_seqlens_q = cu_q_device.as<int>();
          varlen.cu_seqlens_kv = cu_kv_device.as<int>();
          varlen.total_q = cu_q.back();
          varlen.total_kv = cu_kv.back();
        }
        const bool packed = path == Path::kPacked;
        // Rows as the call sees them: [batch, heads, seq] or, packed, [1, heads, total].
        const TensorShape q_rows{packed ? 1 : p.batch, p.heads_q, packed ? varlen.total_q : p.seq_q,
                                 head_dim};
        const TensorShape kv_rows{packed ? 1 : p.batch, p.heads_kv,
                                  packed ? varlen.total_kv : p.seq_kv, head_dim};
        auto [q, q_padded] = random_and_padded(q_rows, kernel_dim, seed);
        auto [k, k_padded] = random_and_padded(kv_rows, kernel_dim, seed + 1);
        auto [v, v_padded] = random_and_padded(kv_rows, kernel_dim, seed + 2);
        const std::size_t rows_q = static_cast<std::size_t>(q_rows.batch) * q_rows.heads *
                                   q_rows.seq;
        AttentionOptions options;
        options.softmax_scale = 0.0;  // the default: 1/sqrt(head_dim), the caller's
        AttentionOptions padded_options = options;
        padded_options.softmax_scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
        if (path == Path::kPortable) {
          options.config = attention::portable_heuristic_config(
              attention::request_for(arch, padded_problem, options, DType::kF16));
          padded_options.config = options.config;
        }
        const char* path_name =
            path == Path::kHeuristic ? " heuristic" : path == Path::kPortable ? " portable" : " packed";
        const std::string where = std::string(variant == Variant::kFullInt8 ? "full" : "half") +
                                  " d" + std::to_string(head_dim) + path_name + " seed=" +
                                  std::to_string(seed);

        auto run = [&](const AttentionProblem& problem, int width,
                       const device::DeviceBuffer& q_data, const device::DeviceBuffer& k_data,
                       const device::DeviceBuffer& v_data, const AttentionOptions& call_options,
                       device::DeviceBuffer& out, device::DeviceBuffer& lse) {
          TensorShape q_view = q_rows, kv_view = kv_rows;
          q_view.head_dim = kv_view.head_dim = width;
          device::DeviceBuffer workspace(attention_workspace_bytes(problem, varlen));
          workspace.fill_bytes(0xFF);
          AttentionInputs inputs;
          inputs.q = TensorView::dense(q_data.get(), DType::kF16, Layout::kBHND, q_view);
          inputs.k = TensorView::dense(k_data.get(), DType::kF16, Layout::kBHND, kv_view);
          inputs.v = TensorView::dense(v_data.get(), DType::kF16, Layout::kBHND, kv_view);
          inputs.out = TensorView::dense(out.get(), DType::kF16, Layout::kBHND, q_view);
          inputs.lse = lse.as<float>();
          inputs.varlen = varlen;
          attention_forward_16bit(problem, inputs, workspace.get(), workspace.bytes(),
                                  stream.get(), call_options);
          stream.synchronize();
        };
        device::DeviceBuffer out(rows_q * head_dim * 2), lse(rows_q * 4);
        device::DeviceBuffer padded_out(rows_q * kernel_dim * 2), padded_lse(rows_q * 4);
        for (device::DeviceBuffer* buffer : {&out, &lse, &padded_out, &padded_lse}) {
          buffer->fill_bytes(0xFF);
        }
        run(p, head_dim, q, k, v, options, out, lse);
        run(padded_problem, kernel_dim, q_padded, k_padded, v_padded, padded_options, padded_out,
            padded_lse);

        const auto got = out.download_as<std::uint16_t>(rows_q * head_dim);
        const auto want = padded_out.download_as<std::uint16_t>(rows_q * kernel_dim);
        std::size_t mismatches = 0;
        for (std::size_t row = 0; row < rows_q; ++row) {
          for (int c = 0; c < head_dim; ++c) {
            mismatches += got[row * head_dim + c] != want[row * kernel_dim + c];
          }
          // The zero-extended call's extra channels are zero (P . 0).
          for (int c = head_dim; c < kernel_dim; ++c) {
            mismatches += (want[row * kernel_dim + c] & 0x7FFF) != 0;
          }
        }
        EXPECT_EQ(mismatches, 0u) << where;
        const auto got_lse = lse.download_as<float>(rows_q);
        const auto want_lse = padded_lse.download_as<float>(rows_q);
        EXPECT_EQ(std::memcmp(got_lse.data(), want_lse.data(), rows_q * 4), 0) << where;
      }
    }
  }
}

}  // namespace
}  // namespace intfa
