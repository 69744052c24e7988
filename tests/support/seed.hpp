// The seed of a test's random inputs, printed and recorded so that a failure can be replayed
// (INTFA_TEST_SEED=<seed>; see reference::fresh_seed).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <iostream>
#include <string>

#include "reference/reference.hpp"

namespace intfa::testing {

inline std::uint64_t announced_seed() {
  const std::uint64_t seed = reference::fresh_seed();
  std::cout << "  seed " << seed << "\n";
  ::testing::Test::RecordProperty("seed", std::to_string(seed));
  return seed;
}

}  // namespace intfa::testing
