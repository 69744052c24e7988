// The C API: converts plain structs to the C++ API and every exception to a status code.
#include "intfa/intfa.h"

#include <exception>
#include <string>

#include "intfa/attention.hpp"
#include "intfa/errors.hpp"
#include "intfa/quantize.hpp"
#include "intfa_version.hpp"

namespace {

thread_local std::string g_last_error;

intfa::TensorView to_view(const intfa_tensor_t& tensor) {
  intfa::TensorView view;
  view.data = tensor.data;
  view.dtype = static_cast<intfa::DType>(tensor.dtype);
  for (int i = 0; i < 4; ++i) view.strides[static_cast<std::size_t>(i)] = tensor.strides[i];
  return view;
}

intfa::TensorShape to_shape(const intfa_shape_t& shape) {
  return intfa::TensorShape{shape.batch, shape.heads, shape.seq, shape.head_dim};
}

template <typename Body>
intfa_status_t guarded(Body&& body) {
  try {
    body();
    g_last_error.clear();
    return INTFA_OK;
  } catch (const intfa::Error& error) {
    g_last_error = error.what();
    return static_cast<intfa_status_t>(error.status());
  } catch (const std::exception& error) {
    g_last_error = std::string("internal error: ") + error.what();
    return INTFA_INTERNAL;
  } catch (...) {
    g_last_error = "internal error: unknown exception";
    return INTFA_INTERNAL;
  }
}

void require(const void* pointer, const char* name) {
  if (pointer == nullptr) throw intfa::InvalidArgument(name, "null", "expected a pointer");
}

}  // namespace

extern "C" {

void intfa_default_options(intfa_options_t* options) {
  if (options == nullptr) return;
  const intfa::AttentionOptions defaults;
  *options = intfa_options_t{};
  options->softmax_scale = defaults.softmax_scale;
  options->p_encoding = static_cast<intfa_p_encoding_t>(defaults.p_encoding);
  options->p_scale = static_cast<intfa_p_scale_t>(defaults.p_scale);
  options->v_granularity = static_cast<intfa_v_granularity_t>(defaults.v_granularity);
}

intfa_status_t intfa_attention_forward(const intfa_problem_t* problem,
                                       const intfa_attention_tensors_t* tensors, CUstream stream,
                                       const intfa_options_t* options) {
  return guarded([&] {
    require(problem, "problem");
    require(tensors, "tensors");
    intfa::AttentionProblem p;
    p.batch = problem->batch;
    p.heads_q = problem->heads_q;
    p.heads_kv = problem->heads_kv;
    p.seq_q = problem->seq_q;
    p.seq_kv = problem->seq_kv;
    p.head_dim = problem->head_dim;
    p.causal = problem->causal != 0;
    if (problem->variant != INTFA_FULL_INT8 && problem->variant != INTFA_HALF_INT8) {
      throw intfa::InvalidArgument("problem.variant", std::to_string(problem->variant),
                                   "expected INTFA_FULL_INT8 or INTFA_HALF_INT8");
    }
    p.variant = static_cast<intfa::Variant>(problem->variant);
    p.qk_bits = problem->qk_bits;
    intfa::AttentionTensors t;
    t.q = to_view(tensors->q);
    t.k = to_view(tensors->k);
    t.v = to_view(tensors->v);
    t.out = to_view(tensors->out);
    t.q_scale = tensors->q_scale;
    t.k_scale = tensors->k_scale;
    t.v_scale = tensors->v_scale;
    t.lse = tensors->lse;
    intfa::AttentionOptions o;
    if (options != nullptr) {
      o.softmax_scale = options->softmax_scale;
      o.p_encoding = static_cast<intfa::PEncoding>(options->p_encoding);
      o.p_scale = static_cast<intfa::PScaleReference>(options->p_scale);
      o.v_granularity = static_cast<intfa::VScaleGranularity>(options->v_granularity);
      if (options->block_m || options->block_n || options->warps || options->stages) {
        o.config = intfa::KernelConfig{options->block_m, options->block_n, options->warps,
                                       options->stages};
      }
    }
    intfa::attention_forward(p, t, stream, o);
  });
}

intfa_status_t intfa_quantize_qk(const intfa_shape_t* shape, const intfa_tensor_t* input,
                                 const intfa_tensor_t* output, float* scales, int bits,
                                 CUstream stream) {
  return guarded([&] {
    require(shape, "shape");
    require(input, "input");
    require(output, "output");
    intfa::QuantizeOptions options;
    options.bits = bits;
    intfa::quantize_qk(to_shape(*shape), to_view(*input), to_view(*output), scales, stream,
                       options);
  });
}

intfa_status_t intfa_quantize_v(const intfa_shape_t* shape, const intfa_tensor_t* input,
                                void* output, float* scales, intfa_v_granularity_t granularity,
                                CUstream stream) {
  return guarded([&] {
    require(shape, "shape");
    require(input, "input");
    intfa::quantize_v(to_shape(*shape), to_view(*input), output, scales,
                      static_cast<intfa::VScaleGranularity>(granularity), stream);
  });
}

int intfa_v_padded_seq(int seq_kv) { return intfa::v_padded_seq(seq_kv); }

size_t intfa_v_int8_bytes(int batch, int heads_kv, int seq_kv, int head_dim) {
  return intfa::v_int8_bytes(batch, heads_kv, seq_kv, head_dim);
}

size_t intfa_v_scale_count(intfa_v_granularity_t granularity, int batch, int heads_kv, int seq_kv,
                           int head_dim) {
  return intfa::v_scale_count(static_cast<intfa::VScaleGranularity>(granularity), batch, heads_kv,
                              seq_kv, head_dim);
}

void intfa_v_int8_view(void* data, int batch, int heads_kv, int seq_kv, int head_dim,
                       intfa_tensor_t* view) {
  if (view == nullptr) return;
  const intfa::TensorView v = intfa::v_int8_view(data, batch, heads_kv, seq_kv, head_dim);
  view->data = v.data;
  view->dtype = INTFA_I8;
  for (int i = 0; i < 4; ++i) view->strides[i] = v.strides[static_cast<std::size_t>(i)];
}

const char* intfa_last_error(void) { return g_last_error.c_str(); }

const char* intfa_status_string(intfa_status_t status) {
  return intfa::status_name(static_cast<intfa::Status>(status));
}

const char* intfa_version(void) { return INTFA_VERSION_STRING; }

}  // extern "C"
