// How gtest prints a device::Arch (a test's GetParam(), a failed EXPECT_EQ): its name, "sm_90a",
// not the bytes of the enum. Found by argument-dependent lookup, so it lives in the enum's
// namespace.
#pragma once

#include <ostream>

#include "device/arch.hpp"

namespace intfa::device {

inline void PrintTo(Arch arch, std::ostream* os) {
  *os << arch_name(arch);
}

}  // namespace intfa::device
