// intfa::precompile and intfa_precompile, the public ahead-of-time compile a host application
// runs without a GPU (examples/attend.cpp, examples/attend.c): the quantize and attention kernels
// of a call, compiled into the user cache once, for a named arch.
#include "intfa/precompile.hpp"

#include <gtest/gtest.h>

#include "intfa/errors.hpp"
#include "intfa/intfa.h"
#include "launch/kernel_runtime.hpp"
#include "support/temp_dir.hpp"

namespace intfa {
namespace {

using testing::ScopedEnv;
using testing::TempDir;

// A user cache of its own, and a runtime that forgets its kernels before and after.
class PrecompileApi : public ::testing::Test {
 protected:
  PrecompileApi() { launch::KernelRuntime::instance().reset_for_testing(); }
  ~PrecompileApi() override { launch::KernelRuntime::instance().reset_for_testing(); }

  TempDir cache_;
  ScopedEnv cache_dir_{"INTFA_CACHE_DIR", cache_.path().c_str()};
  ScopedEnv enabled_{"INTFA_CACHE_DISABLE", nullptr};
};

PrecompileRequest one_call(const char* arch) {
  PrecompileRequest request;
  request.arch = arch;
  request.head_dims = {64};
  request.variants = {Variant::kFullInt8};
  request.dtypes = {DType::kF16};
  request.causal = {true};
  return request;
}

TEST_F(PrecompileApi, CompilesTheQuantizeAndAttentionKernelsOfACallOnceForANamedArch) {
  const PrecompileReport first = precompile(one_call("sm_120"));
  EXPECT_EQ(first.arch, "sm_120");
  // K smoothing's mean pass (which also decides automatic rotation), K's smoothed rows with V's
  // max pass (one launch), Q's rows with the LSE term (the defaults), V's quantize pass, the
  // portable attention kernel.
  EXPECT_EQ(first.kernels, 5u);
  EXPECT_EQ(first.compiled_now, 5u);
  EXPECT_EQ(first.specs.at(1),
            "quantize_k_v_scale sm_120 d64 f16->i8 smooth_k rotate=auto v-scale=channel");
  launch::KernelRuntime::instance().reset_for_testing();  // the second call reads the disk cache
  const PrecompileReport again = precompile(one_call("sm_120"));
  EXPECT_EQ(again.specs, first.specs);
  EXPECT_EQ(again.compiled_now, 0u);
  EXPECT_EQ(again.already_present, 5u);
  // Without smoothing, rotated: K's rotated rows with V's max pass, Q's rotated rows (no LSE
  // term), V and the attention kernel; the first two are new.
  PrecompileRequest rotated = one_call("sm_120");
  rotated.options.smooth_k = false;
  rotated.options.rotate_qk = QKRotation::kOn;
  const PrecompileReport plain = precompile(rotated);
  EXPECT_EQ(plain.kernels, 4u);
  EXPECT_EQ(plain.compiled_now, 2u);
  EXPECT_EQ(plain.specs.at(0), "quantize_k_v_scale sm_120 d64 f16->i8 rotate v-scale=channel");
  EXPECT_EQ(plain.specs.at(1), "quantize_rows sm_120 d64 f16->i8 rotate");
}

TEST_F(PrecompileApi, BadRequestsAreInvalidArgumentsNamingTheField) {
  try {
    precompile(one_call("sm_75"));
    FAIL();
  } catch (const InvalidArgument& error) {
    EXPECT_EQ(error.field(), "arch");
  }
  PrecompileRequest int3 = one_call("sm_80");
  int3.qk_bits = 3;
  try {
    precompile(int3);
    FAIL();
  } catch (const InvalidArgument& error) {
    EXPECT_EQ(error.field(), "qk_bits");
  }
  PrecompileRequest head_dim_100 = one_call("sm_80");
  head_dim_100.head_dims = {100};
  try {
    precompile(head_dim_100);
    FAIL();
  } catch (const InvalidArgument& error) {
    EXPECT_EQ(error.field(), "head_dims");
  }
}

// A head dim between the kernels' compiles what its calls launch: the next kernel's specs.
TEST_F(PrecompileApi, AHeadDimBetweenTheKernelsCompilesTheNextKernels) {
  PrecompileRequest native = one_call("sm_120");
  const PrecompileReport first = precompile(native);
  PrecompileRequest between = native;
  between.head_dims = {40};  // served by the d=64 kernels
  const PrecompileReport again = precompile(between);
  EXPECT_EQ(again.specs, first.specs);
  EXPECT_EQ(again.compiled_now, 0u);
}

TEST_F(PrecompileApi, TheCFunctionCompilesWhatTheCppOneDoesAndReportsErrorsAsStatuses) {
  const intfa_problem_t problem = {1, 4, 2, 100, 200, 64, 1, INTFA_FULL_INT8, 8};
  std::size_t kernels = 0;
  std::size_t compiled_now = 0;
  ASSERT_EQ(intfa_precompile(&problem, INTFA_F16, nullptr, "sm_120", &kernels, &compiled_now),
            INTFA_OK)
      << intfa_last_error();
  EXPECT_EQ(kernels, precompile(one_call("sm_120")).kernels);
  EXPECT_EQ(compiled_now, kernels);

  EXPECT_EQ(intfa_precompile(nullptr, INTFA_F16, nullptr, "sm_120", nullptr, nullptr),
            INTFA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(intfa_last_error()).find("problem"), std::string::npos);
  EXPECT_EQ(intfa_precompile(&problem, INTFA_I8, nullptr, "sm_120", nullptr, nullptr),
            INTFA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(intfa_last_error()).find("dtypes"), std::string::npos);
}

}  // namespace
}  // namespace intfa
