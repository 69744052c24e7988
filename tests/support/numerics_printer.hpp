// How gtest prints a numerics enum (a test's GetParam(), a failed EXPECT_EQ): its name in the
// option tables ("channel", "u8"), not the bytes of the enum. Found by argument-dependent lookup,
// so it lives in the enums' namespace (include/intfa/numerics.hpp: the kernels' enums).
#pragma once

#include <ostream>

#include "numerics/option_names.hpp"

namespace intfa::kernels {

inline void PrintTo(AttentionVariant value, std::ostream* os) {
  *os << option_name(value);
}
inline void PrintTo(PEncoding value, std::ostream* os) {
  *os << option_name(value);
}
inline void PrintTo(PScaleReference value, std::ostream* os) {
  *os << option_name(value);
}
inline void PrintTo(VScaleGranularity value, std::ostream* os) {
  *os << option_name(value);
}
inline void PrintTo(KScaleGranularity value, std::ostream* os) {
  *os << option_name(value);
}

}  // namespace intfa::kernels
