/* Calls into the C API made from C, where an enum parameter may hold any int: C++ cannot convert an
 * int outside an enum's enumerators to it without undefined behaviour, so the tests that pass such
 * values do it through these (c_api_from_c.c, compiled as C). */
#ifndef INTFA_TESTS_C_API_FROM_C_H_
#define INTFA_TESTS_C_API_FROM_C_H_

#include "intfa/intfa.h"

#ifdef __cplusplus
extern "C" {
#endif

intfa_status_t intfa_test_quantize_v_with_granularity(const intfa_shape_t* shape,
                                                      const intfa_tensor_t* input, void* output,
                                                      float* scales, int granularity);
intfa_status_t intfa_test_k_scale_count_with_granularity(int granularity, int batch, int heads_kv,
                                                         int seq_kv, size_t* count);
const char* intfa_test_status_string(int status);

#ifdef __cplusplus
}
#endif

#endif /* INTFA_TESTS_C_API_FROM_C_H_ */
