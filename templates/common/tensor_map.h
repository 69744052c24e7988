// The TMA descriptor as kernels receive it: 128 opaque bytes made on the host by the driver's
// cuTensorMapEncodeTiled (the layout of CUtensorMap, which NVRTC cannot include from cuda.h).
#pragma once

#include "common/types.h"

namespace intfa {
namespace kernels {

struct alignas(64) TensorMap {
  u64 opaque[16];
};

static_assert(sizeof(TensorMap) == 128, "CUtensorMap is 128 bytes");

}  // namespace kernels
}  // namespace intfa
