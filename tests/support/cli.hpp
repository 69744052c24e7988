// Running the built `intfa` tool as a user does: its output (stdout and stderr together) and its
// exit code.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace intfa::testing {

struct CliResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// `environment` holds env(1) arguments ("-u INTFA_DEPLOY_CACHE", "INTFA_LOG=1").
inline CliResult run_cli(const std::string& arguments, const std::string& environment = "") {
  const std::string command = "env " + environment + " '" INTFA_TEST_CLI "' " + arguments + " 2>&1";
  CliResult result;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  for (std::size_t got; (got = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) {
    result.output.append(buffer, got);
  }
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

inline bool mentions(const CliResult& result, const std::string& text) {
  return result.output.find(text) != std::string::npos;
}

inline std::size_t lines_of(const CliResult& result) {
  std::size_t lines = 0;
  for (char c : result.output) lines += c == '\n';
  return lines;
}

// Exit 2, the error in one line naming `named`, and one line saying where the help is.
inline void expect_usage_error(const CliResult& result, const std::string& verb,
                               const std::string& named) {
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_TRUE(mentions(result, named)) << result.output;
  EXPECT_TRUE(mentions(result, "intfa " + verb + " --help")) << result.output;
  EXPECT_FALSE(mentions(result, "usage: ")) << "the whole help: " << result.output;
  EXPECT_EQ(lines_of(result), 2u) << result.output;
}

}  // namespace intfa::testing
