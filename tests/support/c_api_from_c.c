#include "support/c_api_from_c.h"

#include <stddef.h>

intfa_status_t intfa_test_quantize_v_with_granularity(const intfa_shape_t* shape,
                                                      const intfa_tensor_t* input, void* output,
                                                      float* scales, int granularity) {
  return intfa_quantize_v(shape, input, output, scales, (intfa_v_granularity_t)granularity, NULL);
}

intfa_status_t intfa_test_k_scale_count_with_granularity(int granularity, int batch, int heads_kv,
                                                         int seq_kv, size_t* count) {
  return intfa_k_scale_count_checked((intfa_k_granularity_t)granularity, batch, heads_kv, seq_kv,
                                     count);
}

const char* intfa_test_status_string(int status) {
  return intfa_status_string((intfa_status_t)status);
}
