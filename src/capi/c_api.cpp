// The C API: converts plain structs to the C++ API and every exception to a status code.
#include <cstring>
#include <exception>
#include <string>

#include "intfa/attention.hpp"
#include "intfa/errors.hpp"
#include "intfa/intfa.h"
#include "intfa/paged.hpp"
#include "intfa/precompile.hpp"
#include "intfa/quantize.hpp"
#include "intfa_version.hpp"
#include "numerics/option_names.hpp"

namespace {

// The C enums take the numerics enums' values (templates/common/kernel_enums.h), which index the
// option tables (the bench helpers name C values through them): one more value is one more row
// there and one enumerator here. The conversions below derive from the list of options
// (INTFA_ATTENTION_NUMERICS): intfa_options_t has a member `m` of C type intfa_m_t per option.
static_assert(INTFA_HALF_INT8 == static_cast<int>(intfa::Variant::kHalfInt8) &&
                  std::size(intfa::kVariantNames) == INTFA_HALF_INT8 + 1 &&
                  INTFA_P_U8 == static_cast<int>(intfa::PEncoding::kUnsigned255) &&
                  std::size(intfa::kPEncodingNames) == INTFA_P_U8 + 1 &&
                  INTFA_P_TILE_MAX == static_cast<int>(intfa::PScaleReference::kTileMax) &&
                  std::size(intfa::kPScaleNames) == INTFA_P_TILE_MAX + 1 &&
                  INTFA_V_PER_BLOCK == static_cast<int>(intfa::VScaleGranularity::kPerBlock) &&
                  std::size(intfa::kVGranularityNames) == INTFA_V_PER_BLOCK + 1 &&
                  INTFA_K_PER_BLOCK == static_cast<int>(intfa::KScaleGranularity::kPerBlock) &&
                  std::size(intfa::kKGranularityNames) == INTFA_K_PER_BLOCK + 1 &&
                  INTFA_ROTATE_AUTO == static_cast<int>(intfa::QKRotation::kAuto) &&
                  std::size(intfa::kQKRotationNames) == INTFA_ROTATE_AUTO + 1,
              "C enum values are the option tables' rows");

thread_local std::string g_last_error;

// Never throws: a message that cannot be stored (out of memory) is dropped, the status remains.
void set_last_error(const char* prefix, const char* message) noexcept {
  try {
    g_last_error = std::string(prefix) + message;
  } catch (...) {
    g_last_error.clear();
  }
}

// The int a C caller stored in a C enum (a struct member or a parameter). C lets an enum hold any
// int, but in C++ reading one outside its enumerators' range through the enum type is undefined
// behaviour (UBSan's -fsanitize=enum stops there), so the value is read as the bytes of an int.
template <typename CEnum>
int raw_enum(const CEnum& stored) {
  static_assert(sizeof(CEnum) == sizeof(int), "C enums here are int-sized");
  int value = 0;
  std::memcpy(&value, &stored, sizeof value);
  return value;
}

// The C++ enum for a C enum's value, which must be one of the `count` values it names.
template <typename Enum, typename CEnum>
Enum checked_enum(const CEnum& stored, int count, const std::string& field,
                  const std::string& expectation) {
  const int value = raw_enum(stored);
  if (value < 0 || value >= count) {
    throw intfa::InvalidArgument(field, std::to_string(value), expectation);
  }
  return static_cast<Enum>(value);
}

intfa::TensorView to_view(const intfa_tensor_t& tensor, const std::string& field) {
  intfa::TensorView view;
  view.data = tensor.data;
  view.dtype = checked_enum<intfa::DType>(tensor.dtype, INTFA_I4X2 + 1, field + ".dtype",
                                          "expected an intfa_dtype_t");
  for (int i = 0; i < 4; ++i) view.strides[static_cast<std::size_t>(i)] = tensor.strides[i];
  return view;
}

intfa::VScaleGranularity to_granularity(const intfa_v_granularity_t& granularity,
                                        const std::string& field) {
  return checked_enum<intfa::VScaleGranularity>(granularity, INTFA_V_PER_BLOCK + 1, field,
                                                "expected an intfa_v_granularity_t");
}

intfa::KScaleGranularity to_k_granularity(const intfa_k_granularity_t& granularity,
                                          const std::string& field) {
  return checked_enum<intfa::KScaleGranularity>(granularity, INTFA_K_PER_BLOCK + 1, field,
                                                "expected INTFA_K_PER_TOKEN or INTFA_K_PER_BLOCK");
}

// A numerics option of a C struct: one of its table's values.
template <typename Enum, typename CEnum>
Enum checked_option(const CEnum& stored, const std::string& field) {
  constexpr int count = static_cast<int>(intfa::option_count<Enum>());
  return checked_enum<Enum>(stored, count, field,
                            "expected 0 to " + std::to_string(count - 1) + " (" +
                                intfa::option_names_text<Enum>(", ") + ")");
}

intfa::TensorShape to_shape(const intfa_shape_t& shape) {
  return intfa::TensorShape{shape.batch, shape.heads, shape.seq, shape.head_dim};
}

template <typename Body>
intfa_status_t guarded(Body&& body) noexcept {
  try {
    body();
    g_last_error.clear();
    return INTFA_OK;
  } catch (const intfa::Error& error) {
    set_last_error("", error.what());
    return static_cast<intfa_status_t>(error.status());
  } catch (const std::exception& error) {
    set_last_error("internal error: ", error.what());
    return INTFA_INTERNAL;
  } catch (...) {
    set_last_error("internal error: ", "unknown exception");
    return INTFA_INTERNAL;
  }
}

void require(const void* pointer, const char* name) {
  if (pointer == nullptr) throw intfa::InvalidArgument(name, "null", "expected a pointer");
}

}  // namespace

namespace {

// The paged cache's C structs as the C++ API's (outside extern "C": they return C++ types).
intfa::PagedKVCache to_cache(const intfa_paged_cache_t* cache) {
  require(cache, "cache");
  intfa::PagedKVCache c;
  c.num_pages = cache->num_pages;
  c.page_size = cache->page_size;
  c.heads_kv = cache->heads_kv;
  c.head_dim = cache->head_dim;
  c.bits = cache->bits;
  c.k_data = cache->k_data;
  c.v_data = cache->v_data;
  c.k_scale = cache->k_scale;
  c.v_scale = cache->v_scale;
  c.k_offset = cache->k_offset;
  return c;
}

intfa::PagedDecodeProblem to_decode_problem(const intfa_paged_decode_problem_t* problem) {
  require(problem, "problem");
  intfa::PagedDecodeProblem p;
  p.batch = problem->batch;
  p.q_len = problem->q_len;
  p.heads_q = problem->heads_q;
  p.max_pages = problem->max_pages;
  p.max_seq_len = problem->max_seq_len;
  p.causal = problem->causal != 0;
  return p;
}

intfa::PagedDecodeOptions to_decode_options(const intfa_paged_decode_options_t* options) {
  intfa::PagedDecodeOptions o;
  if (options == nullptr) return o;
  o.softmax_scale = options->softmax_scale;
  o.num_splits = options->num_splits;
  o.config.block_rows = options->block_rows;
  o.config.stage_tokens = options->stage_tokens;
  o.config.stages = options->stages;
  return o;
}

intfa::PagedPrefillProblem to_prefill_problem(const intfa_paged_prefill_problem_t* problem) {
  require(problem, "problem");
  intfa::PagedPrefillProblem p;
  p.batch = problem->batch;
  p.heads_q = problem->heads_q;
  p.total_q = problem->total_q;
  p.max_q_len = problem->max_q_len;
  p.max_pages = problem->max_pages;
  p.max_seq_len = problem->max_seq_len;
  p.kv_tokens = problem->kv_tokens;
  p.causal = problem->causal != 0;
  return p;
}

// The members the decode and prefill tensors share, from their C struct.
template <typename Tensors, typename CTensors>
Tensors to_paged_tensors(const CTensors* tensors) {
  require(tensors, "tensors");
  Tensors t;
  t.q = to_view(tensors->q, "tensors.q");
  t.out = to_view(tensors->out, "tensors.out");
  t.lse = tensors->lse;
  t.block_table = tensors->block_table;
  t.seq_lens = tensors->seq_lens;
  t.workspace = tensors->workspace;
  t.workspace_bytes = tensors->workspace_bytes;
  return t;
}

intfa::AttentionState to_state(const intfa_attention_state_t* state, const std::string& field) {
  require(state, field.c_str());
  intfa::AttentionState s;
  s.values = to_view(state->values, field + ".values");
  s.lse = state->lse;
  for (int i = 0; i < 3; ++i) s.lse_strides[static_cast<std::size_t>(i)] = state->lse_strides[i];
  return s;
}

intfa::AttentionProblem to_problem(const intfa_problem_t* problem) {
  require(problem, "problem");
  intfa::AttentionProblem p;
  p.batch = problem->batch;
  p.heads_q = problem->heads_q;
  p.heads_kv = problem->heads_kv;
  p.seq_q = problem->seq_q;
  p.seq_kv = problem->seq_kv;
  p.head_dim = problem->head_dim;
  p.causal = problem->causal != 0;
  p.variant = checked_enum<intfa::Variant>(problem->variant, INTFA_HALF_INT8 + 1, "problem.variant",
                                           "expected INTFA_FULL_INT8 or INTFA_HALF_INT8");
  p.qk_bits = problem->qk_bits;
  return p;
}

// The C++ options of `options` (null: the defaults) and `transforms` (null: the defaults).
intfa::AttentionOptions to_options(const intfa_options_t* options,
                                   const intfa_qk_transforms_t* transforms = nullptr) {
  intfa::AttentionOptions o;
  if (options != nullptr) {
    o.softmax_scale = options->softmax_scale;
#define INTFA_NUMERICS_FROM_C(member, Enum, ...) \
  o.numerics.member = checked_option<intfa::Enum>(options->member, "options." #member);
    INTFA_ATTENTION_NUMERICS(INTFA_NUMERICS_FROM_C)
#undef INTFA_NUMERICS_FROM_C
    if (options->block_m || options->block_n || options->warps || options->stages) {
      o.config = intfa::KernelConfig{options->block_m, options->block_n, options->warps,
                                     options->stages,
                                     intfa::path_for_config(options->block_m, options->warps)};
    }
  }
  if (transforms != nullptr) {
    o.smooth_k = transforms->smooth_k != 0;
    o.rotate_qk = checked_enum<intfa::QKRotation>(
        transforms->rotate, INTFA_ROTATE_AUTO + 1, "transforms.rotate",
        "expected INTFA_ROTATE_OFF, INTFA_ROTATE_ON or INTFA_ROTATE_AUTO");
  }
  return o;
}

intfa::VarlenLayout to_varlen(const intfa_varlen_t* varlen) {
  if (varlen == nullptr) return {};
  return intfa::VarlenLayout{varlen->cu_seqlens_q, varlen->cu_seqlens_kv, varlen->total_q,
                             varlen->total_kv};
}

// The C++ call of intfa_attention_forward(_varlen, _smoothed_k); `varlen` may be null (dense).
void attention_forward_from_c(const intfa_problem_t* problem,
                              const intfa_attention_tensors_t* tensors,
                              const intfa_varlen_t* varlen, CUstream stream,
                              const intfa_options_t* options, const float* q_dot_k_mean = nullptr) {
  const intfa::AttentionProblem p = to_problem(problem);
  require(tensors, "tensors");
  intfa::AttentionTensors t;
  t.q = to_view(tensors->q, "tensors.q");
  t.k = to_view(tensors->k, "tensors.k");
  t.v = to_view(tensors->v, "tensors.v");
  t.out = to_view(tensors->out, "tensors.out");
  t.q_scale = tensors->q_scale;
  t.k_scale = tensors->k_scale;
  t.v_scale = tensors->v_scale;
  t.lse = tensors->lse;
  t.varlen = to_varlen(varlen);
  t.q_dot_k_mean = q_dot_k_mean;
  intfa::attention_forward(p, t, stream, to_options(options));
}

}  // namespace

extern "C" {

void intfa_default_options(intfa_options_t* options) INTFA_NOEXCEPT {
  if (options == nullptr) return;
  const intfa::AttentionOptions defaults;
  *options = intfa_options_t{};
  options->softmax_scale = defaults.softmax_scale;
#define INTFA_NUMERICS_TO_C(member, ...) \
  options->member = static_cast<intfa_##member##_t>(defaults.numerics.member);
  INTFA_ATTENTION_NUMERICS(INTFA_NUMERICS_TO_C)
#undef INTFA_NUMERICS_TO_C
}

intfa_status_t intfa_attention_forward(const intfa_problem_t* problem,
                                       const intfa_attention_tensors_t* tensors, CUstream stream,
                                       const intfa_options_t* options) INTFA_NOEXCEPT {
  return guarded([&] { attention_forward_from_c(problem, tensors, nullptr, stream, options); });
}

intfa_status_t intfa_attention_forward_varlen(const intfa_problem_t* problem,
                                              const intfa_attention_tensors_t* tensors,
                                              const intfa_varlen_t* varlen, CUstream stream,
                                              const intfa_options_t* options) INTFA_NOEXCEPT {
  return guarded([&] {
    require(varlen, "varlen");
    if (varlen->cu_seqlens_q == nullptr && varlen->cu_seqlens_kv == nullptr) {
      // The C++ API reads null offsets as a dense call; this entry point exists for packed ones.
      throw intfa::InvalidArgument(
          "varlen.cu_seqlens_q", "null",
          "expected a device pointer (intfa_attention_forward_varlen "
          "takes packed sequences; intfa_attention_forward a dense batch)");
    }
    attention_forward_from_c(problem, tensors, varlen, stream, options);
  });
}

intfa_status_t intfa_attention_forward_smoothed_k(const intfa_problem_t* problem,
                                                  const intfa_attention_tensors_t* tensors,
                                                  const float* q_dot_k_mean,
                                                  const intfa_varlen_t* varlen, CUstream stream,
                                                  const intfa_options_t* options) INTFA_NOEXCEPT {
  return guarded([&] {
    require(q_dot_k_mean, "q_dot_k_mean");
    attention_forward_from_c(problem, tensors, varlen, stream, options, q_dot_k_mean);
  });
}

void intfa_default_qk_transforms(intfa_qk_transforms_t* transforms) INTFA_NOEXCEPT {
  if (transforms == nullptr) return;
  const intfa::AttentionOptions defaults;
  transforms->smooth_k = defaults.smooth_k ? 1 : 0;
  transforms->rotate = static_cast<int>(defaults.rotate_qk);
}

intfa_status_t intfa_attention_workspace_bytes(const intfa_problem_t* problem,
                                               const intfa_varlen_t* varlen,
                                               size_t* bytes) INTFA_NOEXCEPT {
  return guarded([&] {
    require(bytes, "bytes");
    *bytes = intfa::attention_workspace_bytes(to_problem(problem), to_varlen(varlen));
  });
}

intfa_status_t intfa_attention_forward_16bit(
    const intfa_problem_t* problem, const intfa_attention_inputs_t* inputs,
    const intfa_varlen_t* varlen, void* workspace, size_t workspace_bytes, CUstream stream,
    const intfa_options_t* options, const intfa_qk_transforms_t* transforms) INTFA_NOEXCEPT {
  return guarded([&] {
    const intfa::AttentionProblem p = to_problem(problem);
    require(inputs, "inputs");
    intfa::AttentionInputs in;
    in.q = to_view(inputs->q, "inputs.q");
    in.k = to_view(inputs->k, "inputs.k");
    in.v = to_view(inputs->v, "inputs.v");
    in.out = to_view(inputs->out, "inputs.out");
    in.lse = inputs->lse;
    in.varlen = to_varlen(varlen);
    intfa::attention_forward_16bit(p, in, workspace, workspace_bytes, stream,
                                   to_options(options, transforms));
  });
}

void intfa_default_quantize_options(intfa_quantize_options_t* options) INTFA_NOEXCEPT {
  if (options == nullptr) return;
  *options = intfa_quantize_options_t{};
  const intfa::QuantizeOptions defaults;
  options->bits = defaults.bits;
  options->k_granularity = static_cast<intfa_k_granularity_t>(defaults.k_granularity);
}

intfa_status_t intfa_quantize_qk_with_options(const intfa_shape_t* shape,
                                              const intfa_tensor_t* input,
                                              const intfa_tensor_t* output, float* scales,
                                              const intfa_quantize_options_t* options,
                                              CUstream stream) INTFA_NOEXCEPT {
  return guarded([&] {
    require(shape, "shape");
    require(input, "input");
    require(output, "output");
    require(options, "options");
    intfa::QuantizeOptions o;
    o.bits = options->bits;
    o.smooth_k_channel_mean = options->smooth_k_channel_mean;
    o.k_channel_mean = options->k_channel_mean;
    o.q_dot_k_mean = options->q_dot_k_mean;
    o.k_channel_mean_heads = options->k_channel_mean_heads;
    o.rotate = checked_enum<intfa::QKRotation>(
        options->rotate, INTFA_ROTATE_ON + 1, "options.rotate",
        "expected INTFA_ROTATE_OFF or INTFA_ROTATE_ON (auto takes the C++ API's rotated heads)");
    o.k_granularity = to_k_granularity(options->k_granularity, "options.k_granularity");
    intfa::quantize_qk(to_shape(*shape), to_view(*input, "input"), to_view(*output, "output"),
                       scales, stream, o);
  });
}

intfa_status_t intfa_quantize_qk(const intfa_shape_t* shape, const intfa_tensor_t* input,
                                 const intfa_tensor_t* output, float* scales, int bits,
                                 CUstream stream) INTFA_NOEXCEPT {
  return guarded([&] {
    require(shape, "shape");
    require(input, "input");
    require(output, "output");
    intfa::QuantizeOptions options;
    options.bits = bits;
    intfa::quantize_qk(to_shape(*shape), to_view(*input, "input"), to_view(*output, "output"),
                       scales, stream, options);
  });
}

intfa_status_t intfa_quantize_k_smoothed(const intfa_shape_t* shape, const intfa_tensor_t* input,
                                         const intfa_tensor_t* output, float* scales, int bits,
                                         float* channel_mean, CUstream stream) INTFA_NOEXCEPT {
  return guarded([&] {
    require(shape, "shape");
    require(input, "input");
    require(output, "output");
    require(channel_mean, "channel_mean");
    intfa::QuantizeOptions options;
    options.bits = bits;
    options.smooth_k_channel_mean = channel_mean;
    intfa::quantize_qk(to_shape(*shape), to_view(*input, "input"), to_view(*output, "output"),
                       scales, stream, options);
  });
}

intfa_status_t intfa_quantize_v(const intfa_shape_t* shape, const intfa_tensor_t* input,
                                void* output, float* scales, intfa_v_granularity_t granularity,
                                CUstream stream) INTFA_NOEXCEPT {
  return guarded([&] {
    require(shape, "shape");
    require(input, "input");
    intfa::quantize_v(to_shape(*shape), to_view(*input, "input"), output, scales,
                      to_granularity(granularity, "granularity"), stream);
  });
}

intfa_status_t intfa_quantize_v_varlen(const intfa_shape_t* shape, const intfa_tensor_t* input,
                                       int total_kv, const int* cu_seqlens_kv, void* output,
                                       float* scales, intfa_v_granularity_t granularity,
                                       CUstream stream) INTFA_NOEXCEPT {
  return guarded([&] {
    require(shape, "shape");
    require(input, "input");
    intfa::quantize_v_varlen(to_shape(*shape), to_view(*input, "input"), total_kv, cu_seqlens_kv,
                             output, scales, to_granularity(granularity, "granularity"), stream);
  });
}

intfa_status_t intfa_v_padded_seq_checked(int seq_kv, int* padded_seq) INTFA_NOEXCEPT {
  return guarded([&] {
    require(padded_seq, "padded_seq");
    *padded_seq = intfa::v_padded_seq(seq_kv);
  });
}

intfa_status_t intfa_v_int8_bytes_checked(int batch, int heads_kv, int seq_kv, int head_dim,
                                          size_t* bytes) INTFA_NOEXCEPT {
  return guarded([&] {
    require(bytes, "bytes");
    *bytes = intfa::v_int8_bytes(batch, heads_kv, seq_kv, head_dim);
  });
}

intfa_status_t intfa_v_scale_count_checked(intfa_v_granularity_t granularity, int batch,
                                           int heads_kv, int seq_kv, int head_dim,
                                           size_t* count) INTFA_NOEXCEPT {
  return guarded([&] {
    require(count, "count");
    *count = intfa::v_scale_count(to_granularity(granularity, "granularity"), batch, heads_kv,
                                  seq_kv, head_dim);
  });
}

intfa_status_t intfa_k_scale_count_checked(intfa_k_granularity_t granularity, int batch,
                                           int heads_kv, int seq_kv, size_t* count) INTFA_NOEXCEPT {
  return guarded([&] {
    require(count, "count");
    *count =
        intfa::k_scale_count(to_k_granularity(granularity, "granularity"), batch, heads_kv, seq_kv);
  });
}

intfa_status_t intfa_v_int8_view_checked(void* data, int batch, int heads_kv, int seq_kv,
                                         int head_dim, intfa_tensor_t* view) INTFA_NOEXCEPT {
  return guarded([&] {
    require(view, "view");
    const intfa::TensorView v = intfa::v_int8_view(data, batch, heads_kv, seq_kv, head_dim);
    view->data = v.data;
    view->dtype = INTFA_I8;
    for (int i = 0; i < 4; ++i) view->strides[i] = v.strides[static_cast<std::size_t>(i)];
  });
}

// The 0.1.0 signatures: a value no valid input has (-1, 0, a null view) says "see
// intfa_last_error()".
int intfa_v_padded_seq(int seq_kv) INTFA_NOEXCEPT {
  int padded = 0;
  return intfa_v_padded_seq_checked(seq_kv, &padded) == INTFA_OK ? padded : -1;
}

size_t intfa_v_int8_bytes(int batch, int heads_kv, int seq_kv, int head_dim) INTFA_NOEXCEPT {
  size_t bytes = 0;
  return intfa_v_int8_bytes_checked(batch, heads_kv, seq_kv, head_dim, &bytes) == INTFA_OK ? bytes
                                                                                           : 0;
}

size_t intfa_v_scale_count(intfa_v_granularity_t granularity, int batch, int heads_kv, int seq_kv,
                           int head_dim) INTFA_NOEXCEPT {
  size_t count = 0;
  return intfa_v_scale_count_checked(granularity, batch, heads_kv, seq_kv, head_dim, &count) ==
                 INTFA_OK
             ? count
             : 0;
}

void intfa_v_int8_view(void* data, int batch, int heads_kv, int seq_kv, int head_dim,
                       intfa_tensor_t* view) INTFA_NOEXCEPT {
  if (view == nullptr) return;
  if (intfa_v_int8_view_checked(data, batch, heads_kv, seq_kv, head_dim, view) != INTFA_OK) {
    *view = intfa_tensor_t{};
    view->dtype = INTFA_I8;
  }
}

// Without a status, as intfa_v_scale_count: 0 says "see intfa_last_error()".
size_t intfa_k_scale_count(intfa_k_granularity_t granularity, int batch, int heads_kv,
                           int seq_kv) INTFA_NOEXCEPT {
  size_t count = 0;
  return intfa_k_scale_count_checked(granularity, batch, heads_kv, seq_kv, &count) == INTFA_OK
             ? count
             : 0;
}

intfa_status_t intfa_precompile(const intfa_problem_t* problem, intfa_dtype_t dtype,
                                const intfa_options_t* options, const char* arch, size_t* kernels,
                                size_t* compiled_now) INTFA_NOEXCEPT {
  return guarded([&] {
    require(problem, "problem");
    intfa::PrecompileRequest request;
    request.arch = arch == nullptr ? "" : arch;
    request.head_dims = {problem->head_dim};
    request.variants = {
        checked_enum<intfa::Variant>(problem->variant, INTFA_HALF_INT8 + 1, "problem.variant",
                                     "expected INTFA_FULL_INT8 or INTFA_HALF_INT8")};
    request.dtypes = {
        checked_enum<intfa::DType>(dtype, INTFA_I4X2 + 1, "dtype", "expected an intfa_dtype_t")};
    request.causal = {problem->causal != 0};
    request.qk_bits = problem->qk_bits;
    request.options = to_options(options);
    const intfa::PrecompileReport report = intfa::precompile(request);
    if (kernels != nullptr) *kernels = report.kernels;
    if (compiled_now != nullptr) *compiled_now = report.compiled_now;
  });
}

intfa_status_t intfa_paged_cache_bytes(const intfa_paged_cache_t* cache, size_t* data_bytes,
                                       size_t* scale_bytes) INTFA_NOEXCEPT {
  return guarded([&] {
    const intfa::PagedKVCache c = to_cache(cache);
    const std::size_t data = intfa::paged_data_bytes(c);
    const std::size_t scales = intfa::paged_scale_bytes(c);
    if (data_bytes != nullptr) *data_bytes = data;
    if (scale_bytes != nullptr) *scale_bytes = scales;
  });
}

intfa_status_t intfa_paged_append(const intfa_paged_cache_t* cache, const intfa_tensor_t* k,
                                  const intfa_tensor_t* v, const int* slot_mapping, int tokens,
                                  CUstream stream) INTFA_NOEXCEPT {
  return guarded([&] {
    require(k, "k");
    require(v, "v");
    intfa::paged_append(to_cache(cache), to_view(*k, "k"), to_view(*v, "v"), slot_mapping, tokens,
                        stream);
  });
}

intfa_status_t intfa_paged_decode_splits(const intfa_paged_cache_t* cache,
                                         const intfa_paged_decode_problem_t* problem,
                                         const intfa_paged_decode_options_t* options,
                                         int* splits) INTFA_NOEXCEPT {
  return guarded([&] {
    require(splits, "splits");
    *splits = intfa::paged_decode_splits(to_cache(cache), to_decode_problem(problem),
                                         to_decode_options(options));
  });
}

intfa_status_t intfa_paged_decode_workspace_bytes(const intfa_paged_cache_t* cache,
                                                  const intfa_paged_decode_problem_t* problem,
                                                  const intfa_paged_decode_options_t* options,
                                                  size_t* bytes) INTFA_NOEXCEPT {
  return guarded([&] {
    require(bytes, "bytes");
    *bytes = intfa::paged_decode_workspace_bytes(to_cache(cache), to_decode_problem(problem),
                                                 to_decode_options(options));
  });
}

intfa_status_t intfa_paged_decode(const intfa_paged_cache_t* cache,
                                  const intfa_paged_decode_problem_t* problem,
                                  const intfa_paged_decode_tensors_t* tensors, CUstream stream,
                                  const intfa_paged_decode_options_t* options) INTFA_NOEXCEPT {
  return guarded([&] {
    const auto t = to_paged_tensors<intfa::PagedDecodeTensors>(tensors);
    // The cache first, then the problem: a call with several null structs names the first.
    const intfa::PagedKVCache c = to_cache(cache);
    const intfa::PagedDecodeProblem p = to_decode_problem(problem);
    intfa::paged_decode(c, p, t, stream, to_decode_options(options));
  });
}

intfa_status_t intfa_paged_prefill_workspace_bytes(const intfa_paged_cache_t* cache,
                                                   const intfa_paged_prefill_problem_t* problem,
                                                   size_t* bytes) INTFA_NOEXCEPT {
  return guarded([&] {
    require(bytes, "bytes");
    const intfa::PagedKVCache c = to_cache(cache);
    *bytes = intfa::paged_prefill_workspace_bytes(c, to_prefill_problem(problem));
  });
}

intfa_status_t intfa_paged_prefill(const intfa_paged_cache_t* cache,
                                   const intfa_paged_prefill_problem_t* problem,
                                   const intfa_paged_prefill_tensors_t* tensors, CUstream stream,
                                   const intfa_paged_prefill_options_t* options) INTFA_NOEXCEPT {
  return guarded([&] {
    auto t = to_paged_tensors<intfa::PagedPrefillTensors>(tensors);
    t.query_start_loc = tensors->query_start_loc;
    intfa::PagedPrefillOptions o;
    if (options != nullptr) o.softmax_scale = options->softmax_scale;
    const intfa::PagedKVCache c = to_cache(cache);
    const intfa::PagedPrefillProblem p = to_prefill_problem(problem);
    intfa::paged_prefill(c, p, t, stream, o);
  });
}

intfa_status_t intfa_paged_precompile(const intfa_paged_cache_t* cache, intfa_dtype_t dtype,
                                      const char* arch, size_t* kernels,
                                      size_t* compiled_now) INTFA_NOEXCEPT {
  return guarded([&] {
    require(cache, "cache");
    intfa::PagedPrecompileRequest request;
    request.arch = arch == nullptr ? "" : arch;
    request.head_dims = {cache->head_dim};
    request.bits = {cache->bits};
    request.dtypes = {
        checked_enum<intfa::DType>(dtype, INTFA_I4X2 + 1, "dtype", "expected an intfa_dtype_t")};
    const intfa::PrecompileReport report = intfa::precompile_paged(request);
    if (kernels != nullptr) *kernels = report.kernels;
    if (compiled_now != nullptr) *compiled_now = report.compiled_now;
  });
}

intfa_status_t intfa_merge_states(const intfa_shape_t* shape, const intfa_attention_state_t* a,
                                  const intfa_attention_state_t* b,
                                  const intfa_attention_state_t* out,
                                  CUstream stream) INTFA_NOEXCEPT {
  return guarded([&] {
    require(shape, "shape");
    intfa::merge_states(to_shape(*shape), to_state(a, "a"), to_state(b, "b"), to_state(out, "out"),
                        stream);
  });
}

const char* intfa_last_error(void) INTFA_NOEXCEPT {
  return g_last_error.c_str();
}

const char* intfa_status_string(intfa_status_t status) INTFA_NOEXCEPT {
  return intfa::status_name(static_cast<intfa::Status>(raw_enum(status)));
}

const char* intfa_version(void) INTFA_NOEXCEPT {
  return INTFA_VERSION_STRING;
}

}  // extern "C"
