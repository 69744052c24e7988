// The paged cache's API refuses what it cannot run before it looks for a GPU: each bad value is an
// InvalidArgument naming its field (C++) or INTFA_INVALID_ARGUMENT with that name in
// intfa_last_error() (C). These run without a GPU.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "intfa/errors.hpp"
#include "intfa/intfa.h"
#include "intfa/paged.hpp"
#include "launch/kernel_runtime.hpp"
#include "nvrtc/compiler.hpp"
#include "support/child_test.hpp"
#include "support/fake_driver.hpp"
#include "support/invalid_field.hpp"
#include "support/temp_dir.hpp"

namespace intfa {
namespace {

using testing::c_invalid_field;
using testing::invalid_field;

// Plausible-looking device addresses: validation must fail before anything dereferences them.
void* fake_address(std::uintptr_t address) {
  return reinterpret_cast<void*>(address);
}

PagedKVCache valid_cache() {
  PagedKVCache cache;
  cache.num_pages = 64;
  cache.page_size = 16;
  cache.heads_kv = 8;
  cache.head_dim = 128;
  cache.bits = 8;
  cache.k_data = fake_address(0x100000);
  cache.v_data = fake_address(0x200000);
  cache.k_scale = fake_address(0x300000);
  cache.v_scale = fake_address(0x400000);
  return cache;
}

// [tokens, heads_kv, head_dim] rows as [1, heads_kv, tokens, head_dim] views.
TensorView rows_view(void* data, int heads, int head_dim, DType dtype = DType::kF16) {
  TensorView view;
  view.data = data;
  view.dtype = dtype;
  view.strides = {0, head_dim, static_cast<std::int64_t>(heads) * head_dim, 1};
  return view;
}

// The C API's structs of the same cache and views.
intfa_paged_cache_t c_cache_of(const PagedKVCache& cache) {
  intfa_paged_cache_t c{};
  c.num_pages = cache.num_pages;
  c.page_size = cache.page_size;
  c.heads_kv = cache.heads_kv;
  c.head_dim = cache.head_dim;
  c.bits = cache.bits;
  c.k_data = cache.k_data;
  c.v_data = cache.v_data;
  c.k_scale = cache.k_scale;
  c.v_scale = cache.v_scale;
  c.k_offset = cache.k_offset;
  return c;
}

intfa_tensor_t c_tensor_of(const TensorView& view) {
  intfa_tensor_t c{};
  c.data = view.data;
  c.dtype = static_cast<intfa_dtype_t>(view.dtype);
  for (int dim = 0; dim < 4; ++dim) c.strides[dim] = view.strides[static_cast<std::size_t>(dim)];
  return c;
}

TEST(PagedValidation, CacheSizesNameTheirMember) {
  const std::pair<std::string, void (*)(PagedKVCache&)> cases[] = {
      {"cache.num_pages", [](PagedKVCache& c) { c.num_pages = 0; }},
      {"cache.page_size", [](PagedKVCache& c) { c.page_size = 24; }},
      {"cache.heads_kv", [](PagedKVCache& c) { c.heads_kv = 0; }},
      {"cache.head_dim", [](PagedKVCache& c) { c.head_dim = 96; }},
      {"cache.bits", [](PagedKVCache& c) { c.bits = 6; }},
      {"cache.num_pages", [](PagedKVCache& c) { c.num_pages = 1 << 26; }},  // 2^31 rows
  };
  for (const auto& [field, change] : cases) {
    PagedKVCache cache = valid_cache();
    change(cache);
    EXPECT_EQ(invalid_field([&] { paged_data_bytes(cache); }), field);
  }
}

TEST(PagedValidation, CacheBytesFollowTheLayout) {
  PagedKVCache cache = valid_cache();
  EXPECT_EQ(paged_data_bytes(cache), 64u * 8 * 16 * 128);
  EXPECT_EQ(paged_scale_bytes(cache), 64u * 8 * 16 * 4);
  cache.bits = 4;
  EXPECT_EQ(paged_data_bytes(cache), 64u * 8 * 16 * 64);
  EXPECT_EQ(paged_scale_bytes(cache), 64u * 8 * 16 * 4 * 2);  // four FP16 group scales
}

TEST(PagedValidation, AppendChecksCacheRowsAndSlotsBeforeAnyLaunch) {
  const PagedKVCache cache = valid_cache();
  const TensorView k = rows_view(fake_address(0x500000), 8, 128);
  const TensorView v = rows_view(fake_address(0x600000), 8, 128);
  const int* slots = static_cast<const int*>(fake_address(0x700000));
  EXPECT_EQ(invalid_field([&] { paged_append(cache, k, v, slots, -1, nullptr); }), "tokens");
  TensorView bf16 = v;
  bf16.dtype = DType::kBF16;
  EXPECT_EQ(invalid_field([&] { paged_append(cache, k, bf16, slots, 4, nullptr); }), "v.dtype");
  TensorView int8 = k;
  int8.dtype = DType::kI8;
  EXPECT_EQ(invalid_field([&] { paged_append(cache, int8, v, slots, 4, nullptr); }), "k.dtype");
  TensorView misaligned = k;
  misaligned.data = fake_address(0x500008);
  EXPECT_EQ(invalid_field([&] { paged_append(cache, misaligned, v, slots, 4, nullptr); }),
            "k.data");
  EXPECT_EQ(invalid_field([&] { paged_append(cache, k, v, nullptr, 4, nullptr); }), "slot_mapping");
  PagedKVCache unaligned = cache;
  unaligned.k_scale = fake_address(0x300004);
  EXPECT_EQ(invalid_field([&] { paged_append(unaligned, k, v, slots, 4, nullptr); }),
            "cache.k_scale");
  PagedKVCache no_data = cache;
  no_data.v_data = nullptr;
  EXPECT_EQ(invalid_field([&] { paged_append(no_data, k, v, slots, 4, nullptr); }), "cache.v_data");
  // Zero tokens is nothing to do, not an error (and needs no GPU).
  EXPECT_NO_THROW(paged_append(cache, k, v, slots, 0, nullptr));
  // The kernel's 31-bit row indices: tokens * heads_kv must stay below 2^30.
  const int too_many = (1 << 30) / cache.heads_kv + 1;
  EXPECT_EQ(invalid_field([&] { paged_append(cache, k, v, slots, too_many, nullptr); }), "tokens");
  // Checked before the views: K and V laid out [heads_kv, 4 tokens, head_dim] are valid views of
  // 4 tokens, whose heads INT_MAX tokens would overlap (that named k.strides, not tokens).
  TensorView heads_major = k;
  heads_major.strides = {0, 4 * 128, 128, 1};
  EXPECT_NO_THROW(paged_append(cache, heads_major, heads_major, slots, 0, nullptr));
  EXPECT_EQ(invalid_field(
                [&] { paged_append(cache, heads_major, heads_major, slots, INT_MAX, nullptr); }),
            "tokens");
  const intfa_paged_cache_t c_cache = c_cache_of(cache);
  const intfa_tensor_t c_k = c_tensor_of(heads_major), c_v = c_tensor_of(heads_major);
  EXPECT_EQ(c_invalid_field(intfa_paged_append(&c_cache, &c_k, &c_v, slots, INT_MAX, nullptr)),
            "tokens");
}

struct DecodeCall {
  PagedKVCache cache = valid_cache();
  PagedDecodeProblem problem;
  PagedDecodeTensors tensors;
  PagedDecodeOptions options;

  DecodeCall() {
    problem.batch = 4;
    problem.q_len = 1;
    problem.heads_q = 32;
    problem.max_pages = 16;
    problem.max_seq_len = 256;
    tensors.q =
        TensorView::dense(fake_address(0x800000), DType::kF16, Layout::kBNHD, {4, 32, 1, 128});
    tensors.out =
        TensorView::dense(fake_address(0x900000), DType::kF16, Layout::kBNHD, {4, 32, 1, 128});
    tensors.block_table = static_cast<const int*>(fake_address(0xA00000));
    tensors.seq_lens = static_cast<const int*>(fake_address(0xB00000));
  }
  std::string field() {
    return invalid_field([&] { paged_decode(cache, problem, tensors, nullptr, options); });
  }
};

TEST(PagedValidation, DecodeProblemFieldsAreNamed) {
  const std::pair<std::string, void (*)(DecodeCall&)> cases[] = {
      {"problem.batch", [](DecodeCall& c) { c.problem.batch = 0; }},
      {"problem.q_len", [](DecodeCall& c) { c.problem.q_len = 65; }},
      {"problem.heads_q", [](DecodeCall& c) { c.problem.heads_q = 12; }},  // not a multiple of 8
      {"problem.batch", [](DecodeCall& c) { c.problem.batch = 10000; }},   // grid z
      {"problem.max_pages", [](DecodeCall& c) { c.problem.max_pages = 0; }},
      {"problem.max_seq_len", [](DecodeCall& c) { c.problem.max_seq_len = 0; }},
      {"problem.max_seq_len", [](DecodeCall& c) { c.problem.max_seq_len = 16 * 16 + 1; }},
  };
  for (const auto& [field, change] : cases) {
    DecodeCall call;
    change(call);
    EXPECT_EQ(call.field(), field);
  }
}

TEST(PagedValidation, DecodeOptionsAndTensorsAreNamed) {
  const std::pair<std::string, void (*)(DecodeCall&)> cases[] = {
      {"options.softmax_scale", [](DecodeCall& c) { c.options.softmax_scale = -1.0; }},
      {"options.softmax_scale", [](DecodeCall& c) { c.options.softmax_scale = 1e300; }},
      {"options.num_splits", [](DecodeCall& c) { c.options.num_splits = 65; }},
      {"options.config.block_rows", [](DecodeCall& c) { c.options.config.block_rows = 12; }},
      // 8-row blocks of 2^19 rows: one more than the grid's y dimension holds.
      {"options.config.block_rows",
       [](DecodeCall& c) {
         c.problem.heads_q = c.cache.heads_kv * (1 << 19);
         c.options.config.block_rows = 8;
       }},
      {"options.config.stage_tokens", [](DecodeCall& c) { c.options.config.stage_tokens = 32; }},
      {"options.config.stages", [](DecodeCall& c) { c.options.config.stages = 1; }},
      {"tensors.q.dtype", [](DecodeCall& c) { c.tensors.q.dtype = DType::kI8; }},
      {"tensors.out.dtype", [](DecodeCall& c) { c.tensors.out.dtype = DType::kI4x2; }},
      {"tensors.q.strides", [](DecodeCall& c) { c.tensors.q.strides[3] = 2; }},
      {"tensors.out.data", [](DecodeCall& c) { c.tensors.out.data = nullptr; }},
      {"tensors.lse", [](DecodeCall& c) { c.tensors.lse = static_cast<float*>(fake_address(2)); }},
      {"tensors.block_table", [](DecodeCall& c) { c.tensors.block_table = nullptr; }},
      {"tensors.seq_lens", [](DecodeCall& c) { c.tensors.seq_lens = nullptr; }},
  };
  for (const auto& [field, change] : cases) {
    DecodeCall call;
    change(call);
    EXPECT_EQ(call.field(), field);
  }
}

// A valid prefill of 3 sequences (100 query rows of 8 heads over up to 200 cached tokens); each
// case breaks one thing.
struct PrefillCall {
  PagedKVCache cache = valid_cache();
  PagedPrefillProblem problem;
  PagedPrefillTensors tensors;
  PrefillCall() {
    problem.batch = 3;
    problem.heads_q = 16;
    problem.total_q = 100;
    problem.max_q_len = 64;
    problem.max_pages = 16;
    problem.max_seq_len = 200;
    problem.kv_tokens = 400;
    tensors.q = rows_view(fake_address(0x500000), problem.heads_q, 128);
    tensors.out = rows_view(fake_address(0x600000), problem.heads_q, 128);
    tensors.query_start_loc = static_cast<const int*>(fake_address(0x700000));
    tensors.block_table = static_cast<const int*>(fake_address(0x800000));
    tensors.seq_lens = static_cast<const int*>(fake_address(0x900000));
    tensors.workspace = fake_address(0x1000000);
    tensors.workspace_bytes = paged_prefill_workspace_bytes(cache, problem);
  }
  std::string field() {
    return invalid_field([&] { paged_prefill(cache, problem, tensors, nullptr); });
  }
  // The same call through the C API.
  intfa_paged_prefill_problem_t c_problem() const {
    return {problem.batch,     problem.heads_q,     problem.total_q,   problem.max_q_len,
            problem.max_pages, problem.max_seq_len, problem.kv_tokens, problem.causal ? 1 : 0};
  }
  std::string c_field() const {
    const intfa_paged_cache_t c_cache = c_cache_of(cache);
    const intfa_paged_prefill_problem_t c_prefill = c_problem();
    intfa_paged_prefill_tensors_t c_tensors{};
    c_tensors.q = c_tensor_of(tensors.q);
    c_tensors.out = c_tensor_of(tensors.out);
    c_tensors.lse = tensors.lse;
    c_tensors.query_start_loc = tensors.query_start_loc;
    c_tensors.block_table = tensors.block_table;
    c_tensors.seq_lens = tensors.seq_lens;
    c_tensors.workspace = tensors.workspace;
    c_tensors.workspace_bytes = tensors.workspace_bytes;
    return c_invalid_field(intfa_paged_prefill(&c_cache, &c_prefill, &c_tensors, nullptr, nullptr));
  }
};

TEST(PagedValidation, PrefillFieldsAreNamedBeforeAnyLaunch) {
  const std::pair<std::string, void (*)(PrefillCall&)> cases[] = {
      {"cache.page_size", [](PrefillCall& c) { c.cache.page_size = 8; }},
      {"cache.k_scale", [](PrefillCall& c) { c.cache.k_scale = nullptr; }},
      {"problem.batch", [](PrefillCall& c) { c.problem.batch = 0; }},
      {"problem.batch", [](PrefillCall& c) { c.problem.batch = 70000; }},
      {"problem.heads_q", [](PrefillCall& c) { c.problem.heads_q = 12; }},  // not a multiple of 8
      {"problem.total_q", [](PrefillCall& c) { c.problem.total_q = 0; }},
      {"problem.max_q_len", [](PrefillCall& c) { c.problem.max_q_len = 101; }},
      {"problem.max_q_len", [](PrefillCall& c) { c.problem.max_q_len = 0; }},
      {"problem.max_pages", [](PrefillCall& c) { c.problem.max_pages = 0; }},
      {"problem.max_seq_len", [](PrefillCall& c) { c.problem.max_seq_len = 16 * 16 + 1; }},
      {"problem.max_q_len",
       [](PrefillCall& c) {
         c.problem.max_q_len = 64;
         c.problem.max_seq_len = 63;  // fewer cached tokens than a sequence's queries
       }},
      {"problem.kv_tokens", [](PrefillCall& c) { c.problem.kv_tokens = 199; }},
      {"problem.kv_tokens", [](PrefillCall& c) { c.problem.kv_tokens = (1LL << 28) + 1; }},
      {"tensors.q.dtype", [](PrefillCall& c) { c.tensors.q.dtype = DType::kI8; }},
      {"tensors.out.dtype", [](PrefillCall& c) { c.tensors.out.dtype = DType::kBF16; }},
      {"tensors.q.strides", [](PrefillCall& c) { c.tensors.q.strides[3] = 2; }},
      {"tensors.out.data", [](PrefillCall& c) { c.tensors.out.data = nullptr; }},
      {"tensors.lse", [](PrefillCall& c) { c.tensors.lse = static_cast<float*>(fake_address(2)); }},
      {"tensors.query_start_loc", [](PrefillCall& c) { c.tensors.query_start_loc = nullptr; }},
      {"tensors.block_table", [](PrefillCall& c) { c.tensors.block_table = nullptr; }},
      {"tensors.seq_lens", [](PrefillCall& c) { c.tensors.seq_lens = nullptr; }},
      {"tensors.workspace", [](PrefillCall& c) { c.tensors.workspace = fake_address(0x1000010); }},
      {"tensors.workspace_bytes", [](PrefillCall& c) { c.tensors.workspace_bytes -= 1; }},
  };
  for (const auto& [field, change] : cases) {
    PrefillCall call;
    change(call);
    EXPECT_EQ(call.field(), field);
    EXPECT_EQ(call.c_field(), field) << "through the C API";
  }
  // The options, C++ and C.
  for (const double scale : {-1.0, std::nan(""), 1e-300}) {
    PrefillCall call;
    EXPECT_EQ(invalid_field([&] {
                paged_prefill(call.cache, call.problem, call.tensors, nullptr,
                              PagedPrefillOptions{scale});
              }),
              "options.softmax_scale")
        << scale;
  }
  // The C API's own: its null structs, and its options.
  const PrefillCall call;
  const intfa_paged_cache_t c_cache = c_cache_of(call.cache);
  const intfa_paged_prefill_problem_t c_prefill = call.c_problem();
  intfa_paged_prefill_tensors_t c_tensors{};
  EXPECT_EQ(c_invalid_field(intfa_paged_prefill(nullptr, &c_prefill, &c_tensors, nullptr, nullptr)),
            "cache");
  EXPECT_EQ(c_invalid_field(intfa_paged_prefill(&c_cache, nullptr, &c_tensors, nullptr, nullptr)),
            "problem");
  EXPECT_EQ(c_invalid_field(intfa_paged_prefill(&c_cache, &c_prefill, nullptr, nullptr, nullptr)),
            "tensors");
  c_tensors.q = c_tensor_of(call.tensors.q);
  c_tensors.out = c_tensor_of(call.tensors.out);
  c_tensors.query_start_loc = call.tensors.query_start_loc;
  c_tensors.block_table = call.tensors.block_table;
  c_tensors.seq_lens = call.tensors.seq_lens;
  c_tensors.workspace = call.tensors.workspace;
  c_tensors.workspace_bytes = call.tensors.workspace_bytes;
  const intfa_paged_prefill_options_t negative{-1.0};
  EXPECT_EQ(
      c_invalid_field(intfa_paged_prefill(&c_cache, &c_prefill, &c_tensors, nullptr, &negative)),
      "options.softmax_scale");
}

TEST(PagedValidation, PrefillWorkspaceHoldsTheGatheredKVAndTheQuantizedQ) {
  PrefillCall call;
  // Q: 16 heads x 100 rows of 128 bytes, their scales; K: 8 heads x 400 rows of 128 bytes, their
  // scales; V at 2 bytes a value; 4 offsets; each part rounded up to 256 bytes.
  auto up = [](std::size_t bytes) { return (bytes + 255) / 256 * 256; };
  const std::size_t expected = up(16 * 100 * 128) + up(16 * 100 * 4) + up(8 * 400 * 128) +
                               up(8 * 400 * 4) + up(8 * 400 * 128 * 2) + up(4 * 4);
  EXPECT_EQ(paged_prefill_workspace_bytes(call.cache, call.problem), expected);
  // K smoothing adds q . k_offset per query row.
  call.cache.k_offset = static_cast<const float*>(fake_address(0xA00000));
  EXPECT_EQ(paged_prefill_workspace_bytes(call.cache, call.problem), expected + up(16 * 100 * 4));
  // The C API gives the same.
  const intfa_paged_cache_t c_cache = c_cache_of(call.cache);
  const intfa_paged_prefill_problem_t c_prefill = call.c_problem();
  std::size_t bytes = 0;
  ASSERT_EQ(intfa_paged_prefill_workspace_bytes(&c_cache, &c_prefill, &bytes), INTFA_OK)
      << intfa_last_error();
  EXPECT_EQ(bytes, expected + up(16 * 100 * 4));
  EXPECT_EQ(c_invalid_field(intfa_paged_prefill_workspace_bytes(&c_cache, &c_prefill, nullptr)),
            "bytes");
}

constexpr const char* kFakeDriverChild = "INTFA_TEST_FAKE_DRIVER_CHILD";

// PagedValidationChild.DISABLED_* is a body PagedValidation.* runs in a child process, not a test
// to run by hand (support/child_test.hpp); ctest does not list it.
//
// Runs only in a child process on the fake driver (PagedValidation.ABadWorkspace...): a decode of
// 8 splits with no workspace, or 1 byte of it, is refused before its kernel is compiled or loaded.
TEST(PagedValidationChild, DISABLED_ABadWorkspaceIsRefusedBeforeAnyCompile) {
  if (std::getenv(kFakeDriverChild) == nullptr) GTEST_SKIP() << "run by PagedValidation.*";
  const std::pair<void*, std::string> workspaces[] = {
      {nullptr, "tensors.workspace"}, {fake_address(0xC00000), "tensors.workspace_bytes"}};
  for (const auto& [workspace, field] : workspaces) {
    DecodeCall call;
    call.options.num_splits = 8;
    call.tensors.workspace = workspace;
    call.tensors.workspace_bytes = workspace == nullptr ? 0 : 1;
    const std::uint64_t compiles = nvrtc::compile_count();
    const std::uint64_t loads = launch::KernelRuntime::instance().stats().module_loads;
    EXPECT_EQ(call.field(), field);
    EXPECT_EQ(nvrtc::compile_count(), compiles) << field << ": a kernel was compiled";
    EXPECT_EQ(launch::KernelRuntime::instance().stats().module_loads, loads)
        << field << ": a kernel was loaded";
  }
}

// README promises 0 kernels compiled on bad input: a null or 1-byte workspace compiled the decode
// kernel with NVRTC and wrote its cache entry before it was refused.
TEST(PagedValidation, ABadWorkspaceIsRefusedBeforeAnyKernelIsCompiled) {
  const testing::TempDir cache, control;
  testing::ChildTest child({"PagedValidationChild.DISABLED_ABadWorkspaceIsRefusedBeforeAnyCompile",
                            {testing::fake_driver_setting(), std::string(kFakeDriverChild) + "=1",
                             "INTFA_CACHE_DIR=" + cache.path().string()},
                            {"INTFA_DEPLOY_CACHE", "INTFA_CACHE_DISABLE"},
                            control.path() / "child.txt"});
  EXPECT_EQ(child.wait_until(std::chrono::steady_clock::now() + std::chrono::minutes(2)), 0)
      << child.output();
  for (const auto& entry : std::filesystem::recursive_directory_iterator(cache.path())) {
    EXPECT_FALSE(entry.is_regular_file()) << "written to the cache: " << entry.path();
  }
}

TEST(PagedValidation, MergeStatesChecksShapesTypesAndInPlaceAliasing) {
  const TensorShape shape{2, 4, 8, 128};
  auto state = [&](std::uintptr_t data, std::uintptr_t lse, DType dtype = DType::kF16) {
    return AttentionState::of(TensorView::dense(fake_address(data), dtype, Layout::kBHND, shape),
                              static_cast<float*>(fake_address(lse)), shape);
  };
  const AttentionState a = state(0x100000, 0x110000), b = state(0x200000, 0x210000);
  AttentionState out = state(0x300000, 0x310000);
  EXPECT_EQ(invalid_field([&] {
              merge_states({2, 4, 8, 96}, a, b, out, nullptr);
            }),
            "shape.head_dim");
  EXPECT_EQ(invalid_field([&] {
              merge_states({0, 4, 8, 128}, a, b, out, nullptr);
            }),
            "shape.batch");
  EXPECT_EQ(invalid_field([&] {
              merge_states(shape, a, state(0x200000, 0x210000, DType::kBF16), out, nullptr);
            }),
            "b.values.dtype");
  AttentionState no_lse = b;
  no_lse.lse = nullptr;
  EXPECT_EQ(invalid_field([&] { merge_states(shape, a, no_lse, out, nullptr); }), "b.lse");
  // In place into a with other strides would read what it already wrote.
  AttentionState strided = a;
  strided.values = TensorView::dense(a.values.data, DType::kF16, Layout::kBNHD, shape);
  EXPECT_EQ(invalid_field([&] { merge_states(shape, a, b, strided, nullptr); }), "out.values");
  AttentionState lse_strided = a;
  lse_strided.lse_strides = {1, 2, 8};
  EXPECT_EQ(invalid_field([&] { merge_states(shape, a, b, lse_strided, nullptr); }),
            "out.lse_strides");
}

// LSE strides follow the views' rules: INT64_MAX and 2^62 wrapped the last row's offset, and
// {0, 0, 0} had every row of the merge write one slot (all three were accepted).
TEST(PagedValidation, MergeStatesRefusesLseStridesThatOverflowOrAlias) {
  const TensorShape shape{2, 4, 8, 128};
  auto state = [&](std::uintptr_t data, std::uintptr_t lse) {
    return AttentionState::of(
        TensorView::dense(fake_address(data), DType::kF16, Layout::kBHND, shape),
        static_cast<float*>(fake_address(lse)), shape);
  };
  const std::array<std::int64_t, 3> bad_strides[] = {
      {INT64_MAX, INT64_MAX, INT64_MAX}, {1LL << 62, 1LL << 62, 1LL << 62}, {0, 0, 0}, {1, 2, 4}};
  for (const auto& strides : bad_strides) {
    for (const char* name : {"a", "b", "out"}) {
      AttentionState states[] = {state(0x100000, 0x110000), state(0x200000, 0x210000),
                                 state(0x300000, 0x310000)};
      AttentionState& changed = states[name[0] == 'a' ? 0 : name[0] == 'b' ? 1 : 2];
      changed.lse_strides = strides;
      EXPECT_EQ(
          invalid_field([&] { merge_states(shape, states[0], states[1], states[2], nullptr); }),
          std::string(name) + ".lse_strides")
          << strides[0] << ", " << strides[1] << ", " << strides[2];
    }
  }
  // The C API, as the adversarial pass called it.
  intfa_shape_t c_shape{2, 4, 8, 128};
  intfa_attention_state_t c_states[3] = {};
  for (int i = 0; i < 3; ++i) {
    const AttentionState s = state(0x100000 * (i + 1), 0x100000 * (i + 1) + 0x10000);
    c_states[i].values.data = s.values.data;
    c_states[i].values.dtype = INTFA_F16;
    for (int dim = 0; dim < 4; ++dim) c_states[i].values.strides[dim] = s.values.strides[dim];
    c_states[i].lse = s.lse;
    for (int dim = 0; dim < 3; ++dim) c_states[i].lse_strides[dim] = s.lse_strides[dim];
  }
  for (std::int64_t& stride : c_states[2].lse_strides) stride = 0;
  EXPECT_EQ(intfa_merge_states(&c_shape, &c_states[0], &c_states[1], &c_states[2], nullptr),
            INTFA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(intfa_last_error()).find("out.lse_strides"), std::string::npos)
      << intfa_last_error();
}

TEST(PagedValidation, TheCApiReturnsInvalidArgumentNamingTheField) {
  intfa_paged_cache_t cache{};
  cache.num_pages = 4;
  cache.page_size = 16;
  cache.heads_kv = 2;
  cache.head_dim = 64;
  cache.bits = 4;
  std::size_t data = 0, scales = 0;
  ASSERT_EQ(intfa_paged_cache_bytes(&cache, &data, &scales), INTFA_OK) << intfa_last_error();
  EXPECT_EQ(data, 4u * 2 * 16 * 32);
  EXPECT_EQ(scales, 4u * 2 * 16 * 2 * 2);
  cache.page_size = 8;
  EXPECT_EQ(intfa_paged_cache_bytes(&cache, &data, &scales), INTFA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(intfa_last_error()).find("cache.page_size"), std::string::npos);
  EXPECT_EQ(intfa_paged_cache_bytes(nullptr, &data, &scales), INTFA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(intfa_last_error()).find("cache"), std::string::npos);
  intfa_paged_decode_problem_t problem{};
  EXPECT_EQ(intfa_paged_decode(nullptr, &problem, nullptr, nullptr, nullptr),
            INTFA_INVALID_ARGUMENT);
  intfa_shape_t shape{1, 1, 1, 64};
  EXPECT_EQ(intfa_merge_states(&shape, nullptr, nullptr, nullptr, nullptr), INTFA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(intfa_last_error()).find("a"), std::string::npos);
}

}  // namespace
}  // namespace intfa
