// `intfa cache ls|verify|clear` as a user runs it: the built binary, its output and exit codes.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <string>

#include "cache/cache_test_support.hpp"
#include "cache/disk_cache.hpp"

namespace intfa::cache {
namespace {

using namespace intfa::testing;

struct CliResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// `environment` is a prefix of VAR=value words for the shell.
CliResult run_cli(const std::string& arguments, const std::string& environment = "") {
  const std::string command = "env -u INTFA_CACHE_DIR -u INTFA_CACHE_DISABLE " + environment +
                              " '" INTFA_TEST_CLI "' " + arguments + " 2>&1";
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

bool mentions(const CliResult& result, const std::string& text) {
  return result.output.find(text) != std::string::npos;
}

class CacheCli : public ::testing::Test {
 protected:
  void SetUp() override {
    disk_.store(test_key(0x11), fake_cubin(80, 300), quantize_rows_spec(64));
    disk_.store(test_key(0x22), fake_cubin(86, 500), quantize_rows_spec(256));
  }
  std::string dir_option() const { return " --dir " + directory_.path().string(); }

  TempDirectory directory_;
  DiskCache disk_{directory_.path()};
};

TEST_F(CacheCli, LsListsEachEntryWithItsSpecThenTheTotal) {
  const CliResult result = run_cli("cache ls" + dir_option());
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_TRUE(mentions(result, test_key(0x11).hex())) << result.output;
  EXPECT_TRUE(mentions(result, test_key(0x22).hex())) << result.output;
  EXPECT_TRUE(mentions(result, quantize_rows_spec(256).to_string())) << result.output;
  EXPECT_TRUE(mentions(result, "2 entries")) << result.output;
}

TEST_F(CacheCli, VerifyFailsOnACorruptEntryAndPassesAfterClearStale) {
  EXPECT_EQ(run_cli("cache verify" + dir_option()).exit_code, 0);
  std::vector<char> bytes = read_bytes(disk_.entry_path(test_key(0x22)));
  bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x10);
  write_bytes(disk_.entry_path(test_key(0x22)), bytes);

  const CliResult verify = run_cli("cache verify" + dir_option());
  EXPECT_EQ(verify.exit_code, 1) << verify.output;
  EXPECT_TRUE(mentions(verify, disk_.entry_path(test_key(0x22)).string())) << verify.output;
  EXPECT_TRUE(mentions(verify, "checksum")) << verify.output;
  EXPECT_TRUE(mentions(verify, "2 entries verified")) << verify.output;

  const CliResult clear = run_cli("cache clear --stale" + dir_option());
  EXPECT_EQ(clear.exit_code, 0) << clear.output;
  EXPECT_TRUE(mentions(clear, "removed 2 stale files")) << clear.output;  // entry and sidecar

  const CliResult verify_again = run_cli("cache verify" + dir_option());
  EXPECT_EQ(verify_again.exit_code, 0) << verify_again.output;
  EXPECT_TRUE(mentions(verify_again, "1 entries verified")) << verify_again.output;
}

TEST_F(CacheCli, ClearRemovesEveryEntryAndSaysHowMuchItFreed) {
  const std::uint64_t bytes = fs::file_size(disk_.entry_path(test_key(0x11))) +
                              fs::file_size(disk_.sidecar_path(test_key(0x11))) +
                              fs::file_size(disk_.entry_path(test_key(0x22))) +
                              fs::file_size(disk_.sidecar_path(test_key(0x22)));
  const CliResult clear = run_cli("cache clear" + dir_option());
  EXPECT_EQ(clear.exit_code, 0) << clear.output;
  EXPECT_TRUE(mentions(clear, "removed 4 files")) << clear.output;
  EXPECT_TRUE(mentions(clear, "(" + std::to_string(bytes) + " bytes)")) << clear.output;
  EXPECT_TRUE(mentions(run_cli("cache ls" + dir_option()), "0 entries"));
}

TEST_F(CacheCli, UsesIntfaCacheDirWithoutDir) {
  const CliResult result =
      run_cli("cache ls", "INTFA_CACHE_DIR='" + directory_.path().string() + "'");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_TRUE(mentions(result, "2 entries")) << result.output;
}

TEST_F(CacheCli, ReportsADisabledCacheWithoutFailing) {
  const CliResult result = run_cli("cache verify", "INTFA_CACHE_DISABLE=1");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_TRUE(mentions(result, "disabled")) << result.output;
}

TEST_F(CacheCli, AnUnknownVerbIsAUsageError) {
  const CliResult result = run_cli("cache prune" + dir_option());
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_TRUE(mentions(result, "unknown verb 'prune'")) << result.output;
  EXPECT_EQ(run_cli("cache" + dir_option()).exit_code, 2);
  EXPECT_EQ(run_cli("cache ls --stale" + dir_option()).exit_code, 2);
}

}  // namespace
}  // namespace intfa::cache
