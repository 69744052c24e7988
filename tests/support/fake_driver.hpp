// The fake CUDA driver (tests/fake_driver) for a child process: with this setting in its
// environment, a process loads it instead of the machine's driver and sees an H100-like device
// on any machine (launches do nothing), so that what a call does before and around its launches
// can be tested without a GPU. An env(1) argument for run_cli, a NAME=value for ChildTest.
#pragma once

#include <string>

namespace intfa::testing {

inline std::string fake_driver_setting() {
  return "LD_LIBRARY_PATH=" INTFA_TEST_FAKE_DRIVER_DIR;
}

}  // namespace intfa::testing
