// The paged KV cache's bindings (include/intfa/paged.hpp) over raw device pointers, for
// intfa/_paged.py. Every function validates in C++ first; the GIL is released around launches
// (the first call of a shape compiles its kernel).
#include "paged.hpp"

#include <pybind11/stl.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "intfa/errors.hpp"
#include "intfa/paged.hpp"

namespace py = pybind11;
using namespace pybind11::literals;

namespace intfa::python {
namespace {

void* pointer(std::uintptr_t address) {
  return reinterpret_cast<void*>(address);
}

DType float_dtype(const std::string& name, const std::string& field) {
  if (name == "f16") return DType::kF16;
  if (name == "bf16") return DType::kBF16;
  throw InvalidArgument(field, "'" + name + "'", "expected f16 or bf16");
}

PagedKVCache make_cache(int num_pages, int page_size, int heads_kv, int head_dim, int bits,
                        std::uintptr_t k_data, std::uintptr_t v_data, std::uintptr_t k_scale,
                        std::uintptr_t v_scale, std::uintptr_t k_offset) {
  PagedKVCache cache;
  cache.num_pages = num_pages;
  cache.page_size = page_size;
  cache.heads_kv = heads_kv;
  cache.head_dim = head_dim;
  cache.bits = bits;
  cache.k_data = pointer(k_data);
  cache.v_data = pointer(v_data);
  cache.k_scale = pointer(k_scale);
  cache.v_scale = pointer(v_scale);
  cache.k_offset = static_cast<const float*>(pointer(k_offset));
  return cache;
}

TensorView make_view(std::uintptr_t data, DType dtype, const std::array<std::int64_t, 4>& strides) {
  TensorView view;
  view.data = pointer(data);
  view.dtype = dtype;
  view.strides = strides;
  return view;
}

PagedDecodeProblem make_problem(int batch, int q_len, int heads_q, int max_pages, int max_seq_len,
                                bool causal) {
  PagedDecodeProblem problem;
  problem.batch = batch;
  problem.q_len = q_len;
  problem.heads_q = heads_q;
  problem.max_pages = max_pages;
  problem.max_seq_len = max_seq_len;
  problem.causal = causal;
  return problem;
}

PagedPrefillProblem make_prefill_problem(int batch, int heads_q, int total_q, int max_q_len,
                                         int max_pages, int max_seq_len, long long kv_tokens,
                                         bool causal) {
  PagedPrefillProblem problem;
  problem.batch = batch;
  problem.heads_q = heads_q;
  problem.total_q = total_q;
  problem.max_q_len = max_q_len;
  problem.max_pages = max_pages;
  problem.max_seq_len = max_seq_len;
  problem.kv_tokens = kv_tokens;
  problem.causal = causal;
  return problem;
}

PagedDecodeOptions make_options(double softmax_scale, int num_splits,
                                const std::array<int, 3>& config) {
  PagedDecodeOptions options;
  options.softmax_scale = softmax_scale;
  options.num_splits = num_splits;
  options.config = PagedDecodeConfig{config[0], config[1], config[2]};
  return options;
}

#define INTFA_CACHE_ARGUMENTS                                                                 \
  "num_pages"_a, "page_size"_a, "heads_kv"_a, "head_dim"_a, "bits"_a, "k_data"_a, "v_data"_a, \
      "k_scale"_a, "v_scale"_a, "k_offset"_a

}  // namespace

void register_paged(py::module_& m) {
  m.def(
      "paged_cache_bytes",
      [](int num_pages, int page_size, int heads_kv, int head_dim, int bits) {
        const PagedKVCache cache =
            make_cache(num_pages, page_size, heads_kv, head_dim, bits, 0, 0, 0, 0, 0);
        return py::make_tuple(paged_data_bytes(cache), paged_scale_bytes(cache));
      },
      "(data bytes, scale bytes) of one of K and V; checks the sizes as the C++ API does.",
      py::kw_only(), "num_pages"_a, "page_size"_a, "heads_kv"_a, "head_dim"_a, "bits"_a);

  m.def(
      "paged_append",
      [](int num_pages, int page_size, int heads_kv, int head_dim, int bits, std::uintptr_t k_data,
         std::uintptr_t v_data, std::uintptr_t k_scale, std::uintptr_t v_scale,
         std::uintptr_t k_offset, std::uintptr_t k, const std::array<std::int64_t, 4>& k_strides,
         std::uintptr_t v, const std::array<std::int64_t, 4>& v_strides, const std::string& dtype,
         std::uintptr_t slot_mapping, int tokens, std::uintptr_t stream) {
        const PagedKVCache cache = make_cache(num_pages, page_size, heads_kv, head_dim, bits,
                                              k_data, v_data, k_scale, v_scale, k_offset);
        const DType type = float_dtype(dtype, "k.dtype");
        const TensorView k_view = make_view(k, type, k_strides);
        const TensorView v_view = make_view(v, type, v_strides);
        py::gil_scoped_release unlocked;
        paged_append(cache, k_view, v_view, static_cast<const int*>(pointer(slot_mapping)), tokens,
                     reinterpret_cast<CUstream>(stream));
      },
      "k, v: [1, heads_kv, tokens, head_dim] views (strides in elements).", py::kw_only(),
      INTFA_CACHE_ARGUMENTS, "k"_a, "k_strides"_a, "v"_a, "v_strides"_a, "dtype"_a,
      "slot_mapping"_a, "tokens"_a, "stream"_a);

  m.def(
      "paged_decode_workspace_bytes",
      [](int num_pages, int page_size, int heads_kv, int head_dim, int bits, int batch, int q_len,
         int heads_q, int max_pages, int max_seq_len, bool causal, double softmax_scale,
         int num_splits, const std::array<int, 3>& config) {
        const PagedKVCache cache =
            make_cache(num_pages, page_size, heads_kv, head_dim, bits, 0, 0, 0, 0, 0);
        const PagedDecodeProblem problem =
            make_problem(batch, q_len, heads_q, max_pages, max_seq_len, causal);
        const PagedDecodeOptions options = make_options(softmax_scale, num_splits, config);
        return py::make_tuple(paged_decode_workspace_bytes(cache, problem, options),
                              paged_decode_splits(cache, problem, options));
      },
      "(workspace bytes, splits) of a decode on the current device.", py::kw_only(), "num_pages"_a,
      "page_size"_a, "heads_kv"_a, "head_dim"_a, "bits"_a, "batch"_a, "q_len"_a, "heads_q"_a,
      "max_pages"_a, "max_seq_len"_a, "causal"_a, "softmax_scale"_a, "num_splits"_a, "config"_a);

  m.def(
      "paged_prefill_workspace_bytes",
      [](int num_pages, int page_size, int heads_kv, int head_dim, int bits,
         std::uintptr_t k_offset, int batch, int heads_q, int total_q, int max_q_len, int max_pages,
         int max_seq_len, long long kv_tokens, bool causal) {
        const PagedKVCache cache =
            make_cache(num_pages, page_size, heads_kv, head_dim, bits, 0, 0, 0, 0, k_offset);
        return paged_prefill_workspace_bytes(
            cache, make_prefill_problem(batch, heads_q, total_q, max_q_len, max_pages, max_seq_len,
                                        kv_tokens, causal));
      },
      "Workspace bytes of one paged prefill (k_offset: only whether it is set counts).",
      py::kw_only(), "num_pages"_a, "page_size"_a, "heads_kv"_a, "head_dim"_a, "bits"_a,
      "k_offset"_a, "batch"_a, "heads_q"_a, "total_q"_a, "max_q_len"_a, "max_pages"_a,
      "max_seq_len"_a, "kv_tokens"_a, "causal"_a);

  m.def(
      "paged_prefill",
      [](int num_pages, int page_size, int heads_kv, int head_dim, int bits, std::uintptr_t k_data,
         std::uintptr_t v_data, std::uintptr_t k_scale, std::uintptr_t v_scale,
         std::uintptr_t k_offset, int batch, int heads_q, int total_q, int max_q_len, int max_pages,
         int max_seq_len, long long kv_tokens, bool causal, std::uintptr_t q,
         const std::array<std::int64_t, 4>& q_strides, const std::string& dtype, std::uintptr_t out,
         const std::array<std::int64_t, 4>& out_strides, std::uintptr_t lse,
         std::uintptr_t query_start_loc, std::uintptr_t block_table, std::uintptr_t seq_lens,
         std::uintptr_t workspace, std::size_t workspace_bytes, double softmax_scale,
         std::uintptr_t stream) {
        const PagedKVCache cache = make_cache(num_pages, page_size, heads_kv, head_dim, bits,
                                              k_data, v_data, k_scale, v_scale, k_offset);
        const PagedPrefillProblem problem = make_prefill_problem(
            batch, heads_q, total_q, max_q_len, max_pages, max_seq_len, kv_tokens, causal);
        const DType type = float_dtype(dtype, "q.dtype");
        PagedPrefillTensors tensors;
        tensors.q = make_view(q, type, q_strides);
        tensors.out = make_view(out, type, out_strides);
        tensors.lse = static_cast<float*>(pointer(lse));
        tensors.query_start_loc = static_cast<const int*>(pointer(query_start_loc));
        tensors.block_table = static_cast<const int*>(pointer(block_table));
        tensors.seq_lens = static_cast<const int*>(pointer(seq_lens));
        tensors.workspace = pointer(workspace);
        tensors.workspace_bytes = workspace_bytes;
        PagedPrefillOptions options;
        options.softmax_scale = softmax_scale;
        py::gil_scoped_release unlocked;
        paged_prefill(cache, problem, tensors, reinterpret_cast<CUstream>(stream), options);
      },
      "q, out: [1, heads_q, total_q, head_dim] views (strides in elements); lse "
      "[heads_q][total_q].",
      py::kw_only(), INTFA_CACHE_ARGUMENTS, "batch"_a, "heads_q"_a, "total_q"_a, "max_q_len"_a,
      "max_pages"_a, "max_seq_len"_a, "kv_tokens"_a, "causal"_a, "q"_a, "q_strides"_a, "dtype"_a,
      "out"_a, "out_strides"_a, "lse"_a, "query_start_loc"_a, "block_table"_a, "seq_lens"_a,
      "workspace"_a, "workspace_bytes"_a, "softmax_scale"_a, "stream"_a);

  m.def(
      "paged_decode",
      [](int num_pages, int page_size, int heads_kv, int head_dim, int bits, std::uintptr_t k_data,
         std::uintptr_t v_data, std::uintptr_t k_scale, std::uintptr_t v_scale,
         std::uintptr_t k_offset, int batch, int q_len, int heads_q, int max_pages, int max_seq_len,
         bool causal, std::uintptr_t q, const std::array<std::int64_t, 4>& q_strides,
         const std::string& q_dtype, std::uintptr_t out,
         const std::array<std::int64_t, 4>& out_strides, const std::string& out_dtype,
         std::uintptr_t lse, std::uintptr_t block_table, std::uintptr_t seq_lens,
         std::uintptr_t workspace, std::size_t workspace_bytes, double softmax_scale,
         int num_splits, const std::array<int, 3>& config, std::uintptr_t stream) {
        const PagedKVCache cache = make_cache(num_pages, page_size, heads_kv, head_dim, bits,
                                              k_data, v_data, k_scale, v_scale, k_offset);
        const PagedDecodeProblem problem =
            make_problem(batch, q_len, heads_q, max_pages, max_seq_len, causal);
        PagedDecodeTensors tensors;
        tensors.q = make_view(q, float_dtype(q_dtype, "q.dtype"), q_strides);
        tensors.out = make_view(out, float_dtype(out_dtype, "out.dtype"), out_strides);
        tensors.lse = static_cast<float*>(pointer(lse));
        tensors.block_table = static_cast<const int*>(pointer(block_table));
        tensors.seq_lens = static_cast<const int*>(pointer(seq_lens));
        tensors.workspace = pointer(workspace);
        tensors.workspace_bytes = workspace_bytes;
        const PagedDecodeOptions options = make_options(softmax_scale, num_splits, config);
        py::gil_scoped_release unlocked;
        paged_decode(cache, problem, tensors, reinterpret_cast<CUstream>(stream), options);
      },
      "q, out: [batch, heads_q, q_len, head_dim] views (strides in elements).", py::kw_only(),
      INTFA_CACHE_ARGUMENTS, "batch"_a, "q_len"_a, "heads_q"_a, "max_pages"_a, "max_seq_len"_a,
      "causal"_a, "q"_a, "q_strides"_a, "q_dtype"_a, "out"_a, "out_strides"_a, "out_dtype"_a,
      "lse"_a, "block_table"_a, "seq_lens"_a, "workspace"_a, "workspace_bytes"_a, "softmax_scale"_a,
      "num_splits"_a, "config"_a, "stream"_a);

  m.def(
      "merge_states",
      [](const std::array<int, 4>& shape, const std::string& dtype, std::uintptr_t a,
         const std::array<std::int64_t, 4>& a_strides, std::uintptr_t a_lse,
         const std::array<std::int64_t, 3>& a_lse_strides, std::uintptr_t b,
         const std::array<std::int64_t, 4>& b_strides, std::uintptr_t b_lse,
         const std::array<std::int64_t, 3>& b_lse_strides, std::uintptr_t out,
         const std::array<std::int64_t, 4>& out_strides, const std::string& out_dtype,
         std::uintptr_t out_lse, const std::array<std::int64_t, 3>& out_lse_strides,
         std::uintptr_t stream) {
        const TensorShape logical{shape[0], shape[1], shape[2], shape[3]};
        const DType type = float_dtype(dtype, "a.dtype");
        auto state = [](std::uintptr_t values, DType values_type,
                        const std::array<std::int64_t, 4>& strides, std::uintptr_t lse,
                        const std::array<std::int64_t, 3>& lse_strides) {
          AttentionState s;
          s.values = make_view(values, values_type, strides);
          s.lse = static_cast<float*>(pointer(lse));
          s.lse_strides = lse_strides;
          return s;
        };
        const AttentionState state_a = state(a, type, a_strides, a_lse, a_lse_strides);
        const AttentionState state_b = state(b, type, b_strides, b_lse, b_lse_strides);
        const AttentionState state_out =
            state(out, float_dtype(out_dtype, "out.dtype"), out_strides, out_lse, out_lse_strides);
        py::gil_scoped_release unlocked;
        merge_states(logical, state_a, state_b, state_out, reinterpret_cast<CUstream>(stream));
      },
      "shape {batch, heads, seq, head_dim}; values strides (batch, heads, seq, 1), LSE strides "
      "(batch, heads, seq), in elements.",
      py::kw_only(), "shape"_a, "dtype"_a, "a"_a, "a_strides"_a, "a_lse"_a, "a_lse_strides"_a,
      "b"_a, "b_strides"_a, "b_lse"_a, "b_lse_strides"_a, "out"_a, "out_strides"_a, "out_dtype"_a,
      "out_lse"_a, "out_lse_strides"_a, "stream"_a);

  m.def(
      "precompile_paged",
      [](const std::string& arch, const std::vector<int>& head_dims, const std::vector<int>& bits,
         const std::vector<std::string>& dtypes, unsigned jobs) {
        PagedPrecompileRequest request;
        request.arch = arch;
        request.head_dims = head_dims;
        request.bits = bits;
        request.dtypes.clear();
        for (const std::string& dtype : dtypes)
          request.dtypes.push_back(float_dtype(dtype, "dtypes"));
        request.jobs = jobs;
        PrecompileReport report;
        {
          py::gil_scoped_release unlocked;
          report = precompile_paged(request);
        }
        return py::dict("arch"_a = report.arch, "kernels"_a = report.kernels,
                        "compiled_now"_a = report.compiled_now,
                        "already_present"_a = report.already_present, "specs"_a = report.specs);
      },
      py::kw_only(), "arch"_a, "head_dims"_a, "bits"_a, "dtypes"_a, "jobs"_a);
}

}  // namespace intfa::python
