// Running the built `intfa` tool as a user does: its output (stdout and stderr together) and its
// exit code.
#pragma once

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

}  // namespace intfa::testing
