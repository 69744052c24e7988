#include "support/child_test.hpp"

#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <thread>

#include "support/temp_dir.hpp"

extern char** environ;

namespace intfa::testing {
namespace {

constexpr const char* kUnprivilegedChildVariable = "INTFA_TEST_UNPRIVILEGED_CHILD";
constexpr uid_t kNobody = 65534;

std::string variable_name(const std::string& entry) {
  return entry.substr(0, entry.find('='));
}

bool listed(const std::vector<std::string>& names, const std::string& name) {
  for (const std::string& candidate : names) {
    if (candidate == name) return true;
  }
  return false;
}

std::vector<std::string> child_environment(const ChildTest::Options& options) {
  std::vector<std::string> dropped = options.unset;
  for (const std::string& entry : options.environment) dropped.push_back(variable_name(entry));
  std::vector<std::string> environment;
  for (char** variable = environ; *variable != nullptr; ++variable) {
    const std::string entry = *variable;
    const std::string name = variable_name(entry);
    if (name.rfind("GTEST_", 0) != 0 && !listed(dropped, name)) environment.push_back(entry);
  }
  environment.insert(environment.end(), options.environment.begin(), options.environment.end());
  return environment;
}

std::vector<char*> pointers(const std::vector<std::string>& strings) {
  std::vector<char*> result;
  for (const std::string& text : strings) result.push_back(const_cast<char*>(text.c_str()));
  result.push_back(nullptr);
  return result;
}

// Owns a posix_spawn_file_actions_t.
class SpawnFileActions {
 public:
  SpawnFileActions() { ::posix_spawn_file_actions_init(&actions_); }
  ~SpawnFileActions() { ::posix_spawn_file_actions_destroy(&actions_); }
  SpawnFileActions(const SpawnFileActions&) = delete;
  SpawnFileActions& operator=(const SpawnFileActions&) = delete;
  posix_spawn_file_actions_t* get() { return &actions_; }

 private:
  posix_spawn_file_actions_t actions_;
};

std::string current_test_name() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return std::string(info->test_suite_name()) + "." + info->name();
}

void drop_root() {
  if (::geteuid() == kNobody && ::getegid() == kNobody) return;  // an earlier test did
  if (::setgroups(0, nullptr) != 0 || ::setgid(kNobody) != 0 || ::setuid(kNobody) != 0) {
    throw std::runtime_error("cannot give up root to run as uid/gid 65534");
  }
}

}  // namespace

ChildTest::ChildTest(const Options& options) : output_(options.output) {
  const std::vector<std::string> arguments = {"intfa_tests", "--gtest_filter=" + options.test,
                                              "--gtest_also_run_disabled_tests"};
  const std::vector<std::string> environment = child_environment(options);
  const std::string output = output_.empty() ? "/dev/null" : output_.string();
  SpawnFileActions actions;
  ::posix_spawn_file_actions_addopen(actions.get(), STDOUT_FILENO, output.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ::posix_spawn_file_actions_adddup2(actions.get(), STDOUT_FILENO, STDERR_FILENO);
  const int spawned = ::posix_spawn(&pid_, "/proc/self/exe", actions.get(), nullptr,
                                    pointers(arguments).data(), pointers(environment).data());
  if (spawned != 0) {
    pid_ = -1;
    throw std::runtime_error("cannot spawn a child for " + options.test + ": error " +
                             std::to_string(spawned));
  }
}

ChildTest::~ChildTest() {
  if (pid_ > 0) kill_now();
}

ChildTest::ChildTest(ChildTest&& other) noexcept
    : pid_(other.pid_), ended_status_(other.ended_status_), output_(std::move(other.output_)) {
  other.pid_ = -1;
}

int ChildTest::wait_until(std::chrono::steady_clock::time_point deadline) {
  if (pid_ < 0) return ended_status_;
  int status = 0;
  while (::waitpid(pid_, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill_now();
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

bool ChildTest::wait_until_stopped() {
  if (pid_ < 0) return false;
  int status = 0;
  if (::waitpid(pid_, &status, WUNTRACED) != pid_) return false;
  if (WIFSTOPPED(status)) return true;
  pid_ = -1;  // it ended
  ended_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return false;
}

void ChildTest::resume() {
  if (pid_ > 0) ::kill(pid_, SIGCONT);
}

void ChildTest::kill_now() {
  if (pid_ < 0) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
}

std::string ChildTest::output() const {
  if (output_.empty()) return "";
  std::ifstream in(output_);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

bool rerun_without_root() {
  if (std::getenv(kUnprivilegedChildVariable) != nullptr) {
    drop_root();
    return false;
  }
  if (::geteuid() != 0) return false;
  const TempDir directory;
  const std::string test = current_test_name();
  ChildTest child({test,
                   {std::string(kUnprivilegedChildVariable) + "=1"},
                   {},
                   directory.path() / "output.txt"});
  const int status = child.wait_until(std::chrono::steady_clock::now() + std::chrono::minutes(5));
  EXPECT_EQ(status, 0) << test << " as uid 65534:\n" << child.output();
  return true;
}

}  // namespace intfa::testing
