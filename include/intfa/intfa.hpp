// intfa: JIT-generated INT8/INT4 FlashAttention for NVIDIA GPUs. The whole C++ API.
#pragma once

#include "intfa/attention.hpp"
#include "intfa/errors.hpp"
#include "intfa/paged.hpp"
#include "intfa/precompile.hpp"
#include "intfa/quantize.hpp"
#include "intfa/runtime.hpp"
#include "intfa/types.hpp"
