// Running one test of this binary in a process of its own: for tests that need several processes
// at once, a process to kill mid-write, or a process without root. The child is this binary
// re-executed with a filter, never a bare fork, because forking after NVRTC has run is not safe.
//
// A child's body is a test named Suite.DISABLED_Name (CacheCrashChild.*, CacheConcurrencyChild.*,
// PagedValidationChild.*): the prefix keeps it out of a plain run of intfa_tests, and
// tests/CMakeLists.txt keeps it out of ctest; only its parent test runs it, here, with
// --gtest_also_run_disabled_tests and the environment it needs (without which it skips). None is
// meant to be run by hand.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

namespace intfa::testing {

class ChildTest {
 public:
  struct Options {
    std::string test;                      // "Suite.DISABLED_Name", run with disabled tests on
    std::vector<std::string> environment;  // NAME=value, replacing the parent's NAME
    std::vector<std::string> unset;        // names the child does not inherit
    std::filesystem::path output;          // stdout and stderr; /dev/null when empty
  };

  // Starts the child; GTEST_* variables are never inherited. Throws std::runtime_error when the
  // process cannot be spawned.
  explicit ChildTest(const Options& options);
  // Kills (SIGKILL) and reaps a child that is still there.
  ~ChildTest();
  ChildTest(ChildTest&& other) noexcept;
  ChildTest& operator=(ChildTest&&) = delete;
  ChildTest(const ChildTest&) = delete;
  ChildTest& operator=(const ChildTest&) = delete;

  // The exit status; -1 when it was killed by a signal, or did not exit by `deadline` (it is
  // then killed).
  int wait_until(std::chrono::steady_clock::time_point deadline);
  // Blocks until the child stops itself (SIGSTOP); false when it ended instead (wait_until then
  // returns its exit status).
  bool wait_until_stopped();
  void resume();    // SIGCONT to a stopped child
  void kill_now();  // SIGKILL, then reaped
  // What the child wrote to Options::output ("" without one).
  std::string output() const;

 private:
  pid_t pid_ = -1;
  int ended_status_ = -1;  // the exit status, once wait_until_stopped saw the child end
  std::filesystem::path output_;
};

// Root ignores permission bits, so a test about them runs its body in a child that has given up
// root (uid and gid 65534, "nobody"). Call first in the test body:
//
//   if (rerun_without_root()) return;
//
// Returns true in a root parent, after running the current test in such a child and failing the
// test if the child failed; false where the body should run (not root, or the child itself).
bool rerun_without_root();

}  // namespace intfa::testing
