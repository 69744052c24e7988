// `intfa cache ls|verify|clear` as a user runs it: the built binary, its output and exit codes.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "cache/cache_test_support.hpp"
#include "cache/disk_cache.hpp"
#include "cache/entry_format.hpp"
#include "spec/attention_spec.hpp"
#include "support/child_test.hpp"
#include "support/cli.hpp"

namespace intfa::cache {
namespace {

using namespace intfa::testing;

// The tool with the cache variables of the test environment unset; `environment` adds env(1)
// arguments.
CliResult run_cli(const std::string& arguments, const std::string& environment = "") {
  return testing::run_cli(arguments, "-u INTFA_CACHE_DIR -u INTFA_CACHE_DISABLE " + environment);
}

class CacheCli : public ::testing::Test {
 protected:
  void SetUp() override {
    disk_.store(test_key(0x11), fake_cubin(80, 300),
                families::kernel_source(quantize_rows_spec(64)));
    disk_.store(test_key(0x22), fake_cubin(86, 500),
                families::kernel_source(quantize_rows_spec(256)));
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

// A spec longer than any column width (an attention kernel's, about 80 characters) beside short
// ones: every row's size and date sit under their headers, and each spec is whole at its row's end.
TEST_F(CacheCli, LsKeepsItsColumnsAlignedWhateverTheSpecsLength) {
  attention::SpecRequest request;
  request.arch = device::Arch::kSm89;
  request.head_dim = 128;
  const attention::AttentionSpec long_spec =
      attention::make_spec(request, attention::heuristic_config(request));
  ASSERT_GT(long_spec.to_string().size(), 64u);
  disk_.store(test_key(0x33), fake_cubin(89, 70000), families::kernel_source(long_spec));

  const CliResult result = run_cli("cache ls" + dir_option());
  ASSERT_EQ(result.exit_code, 0) << result.output;
  std::vector<std::string> lines;
  for (std::size_t at = 0, end; (end = result.output.find('\n', at)) != std::string::npos;
       at = end + 1) {
    lines.push_back(result.output.substr(at, end - at));
  }
  ASSERT_EQ(lines.size(), 5u) << result.output;  // the header, 3 entries, the total
  const std::string& header = lines[0];
  const std::size_t size_end = header.find("SIZE") + 4;
  const std::size_t date_column = header.find("DATE");
  const std::size_t spec_column = header.find("SPEC");
  ASSERT_TRUE(size_end < date_column && date_column < spec_column) << header;
  const std::map<std::string, std::string> spec_of_key = {
      {test_key(0x11).hex(), quantize_rows_spec(64).to_string()},
      {test_key(0x22).hex(), quantize_rows_spec(256).to_string()},
      {test_key(0x33).hex(), long_spec.to_string()}};
  for (std::size_t row = 1; row <= 3; ++row) {
    const std::string& line = lines[row];
    const auto spec = spec_of_key.find(line.substr(0, line.find(' ')));
    ASSERT_NE(spec, spec_of_key.end()) << "a row that starts with no key:\n" << result.output;
    EXPECT_NE(line[size_end - 1], ' ') << "the size ends under SIZE:\n" << result.output;
    EXPECT_EQ(line[size_end], ' ') << "the size ends under SIZE:\n" << result.output;
    EXPECT_TRUE(std::isdigit(static_cast<unsigned char>(line[date_column])) &&
                line[date_column - 1] == ' ')
        << "the date starts under DATE:\n"
        << result.output;
    EXPECT_EQ(line.substr(spec_column), spec->second) << result.output;
  }
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

// Version skew: an entry another NVRTC or another cache format left is never loaded (its key
// differs, and the header is checked too); clear --stale removes it and counts the bytes freed.
TEST_F(CacheCli, ClearStaleRemovesEntriesOfAnotherNvrtcOrFormatVersionAndCountsTheBytes) {
  const CacheKey other_nvrtc = test_key(0x33), other_format = test_key(0x44);
  const nvrtc::Version running = nvrtc::version();
  std::vector<char> next_format = encode_entry(other_format, fake_cubin());
  next_format[8] = static_cast<char>(kFormatVersion + 1);  // u32 LE at byte 8
  const std::vector<std::pair<CacheKey, std::vector<char>>> skewed = {
      {other_nvrtc, encode_entry(other_nvrtc, fake_cubin(), {running.major + 1, running.minor})},
      {other_format, next_format}};
  std::uint64_t stale_bytes = 0;
  for (const auto& [key, bytes] : skewed) {
    disk_.store(key, fake_cubin(),
                families::kernel_source(quantize_rows_spec()));  // for its sidecar
    write_bytes(disk_.entry_path(key), bytes);
    stale_bytes += bytes.size() + fs::file_size(disk_.sidecar_path(key));
  }
  const CliResult verify = run_cli("cache verify" + dir_option());
  EXPECT_EQ(verify.exit_code, 1) << verify.output;
  EXPECT_TRUE(mentions(verify, "4 entries verified, 2 bad")) << verify.output;

  const CliResult clear = run_cli("cache clear --stale" + dir_option());
  EXPECT_EQ(clear.exit_code, 0) << clear.output;
  EXPECT_TRUE(mentions(clear, "removed 4 stale files")) << clear.output;  // entries and sidecars
  EXPECT_TRUE(mentions(clear, "(" + std::to_string(stale_bytes) + " bytes)")) << clear.output;
  const CliResult verify_again = run_cli("cache verify" + dir_option());
  EXPECT_EQ(verify_again.exit_code, 0) << verify_again.output;
  EXPECT_TRUE(mentions(verify_again, "2 entries verified, 0 bad")) << verify_again.output;
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

// A typo in a deployment check must not pass: a directory that does not exist, or a file, is an
// error for every verb, naming the path.
TEST_F(CacheCli, EveryVerbFailsOnAMissingDirectoryOrAFile) {
  const std::string missing = (directory_.path() / "no-such-dir").string();
  write_text(directory_.path() / "a-file", "x\n");
  const std::string file = (directory_.path() / "a-file").string();
  for (const char* verb : {"ls", "verify", "clear", "clear --stale"}) {
    const CliResult on_missing = run_cli(std::string("cache ") + verb + " " + missing);
    EXPECT_EQ(on_missing.exit_code, 1) << verb << ": " << on_missing.output;
    EXPECT_TRUE(mentions(on_missing, missing + " does not exist")) << on_missing.output;
    const CliResult on_file = run_cli(std::string("cache ") + verb + " --dir " + file);
    EXPECT_EQ(on_file.exit_code, 1) << verb << ": " << on_file.output;
    EXPECT_TRUE(mentions(on_file, "not a directory")) << on_file.output;
  }
}

// The default directory before anything was cached is an empty cache, not an error.
TEST_F(CacheCli, TheDefaultDirectoryNotCreatedYetHasNoEntries) {
  const std::string never = (directory_.path() / "never-created").string();
  const CliResult result = run_cli("cache ls", "INTFA_CACHE_DIR='" + never + "'");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_TRUE(mentions(result, "0 entries")) << result.output;
}

// An unreadable cache is reported by ls, clear and info, not counted as empty.
TEST_F(CacheCli, AnUnreadableDirectoryIsAnErrorNotAnEmptyCache) {
  fs::path too_long = directory_.path();
  while (too_long.string().size() <= 4100) too_long /= std::string(200, 'd');
  for (const char* verb : {"ls", "verify", "clear"}) {
    const CliResult result = run_cli(std::string("cache ") + verb + " --dir " + too_long.string());
    EXPECT_EQ(result.exit_code, 1) << verb << ": " << result.output;
    EXPECT_TRUE(mentions(result, std::strerror(ENAMETOOLONG))) << verb << ": " << result.output;
    EXPECT_FALSE(mentions(result, "0 entries")) << result.output;
    EXPECT_FALSE(mentions(result, "removed 0")) << result.output;
  }
  const CliResult info = run_cli("info", "INTFA_CACHE_DIR='" + too_long.string() + "'");
  EXPECT_EQ(info.exit_code, 1) << info.output;
  EXPECT_TRUE(mentions(info, std::strerror(ENAMETOOLONG))) << info.output;
  EXPECT_FALSE(mentions(info, "0 entries")) << info.output;
}

// A sidecar is text another program may have written: its control characters are shown escaped,
// never sent to the terminal (this one would clear the screen and set the window title).
TEST_F(CacheCli, LsEscapesControlCharactersOfTheSidecarsSpec) {
  write_text(disk_.sidecar_path(test_key(0x11)),
             "{\"spec_text\": \"evil\\u001b[2J\\u001b]0;owned\\u0007\\u009b31m\"}\n");
  const CliResult result = run_cli("cache ls" + dir_option());
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(result.output.find('\x1b'), std::string::npos) << result.output;
  EXPECT_EQ(result.output.find('\x07'), std::string::npos) << result.output;
  EXPECT_EQ(result.output.find("\xc2\x9b"), std::string::npos) << result.output;
  EXPECT_TRUE(mentions(result, "evil\\x1b[2J\\x1b]0;owned\\x07\\u009b31m")) << result.output;
}

TEST_F(CacheCli, ClearRefusesADirectoryThatIsNotACache) {
  const TempDirectory other;
  write_text(other.path() / "de", "precious\n");
  fs::create_directory(other.path() / "ab");
  const CliResult result = run_cli("cache clear --stale " + other.path().string());
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_TRUE(mentions(result, "does not look like an intfa kernel cache")) << result.output;
  EXPECT_TRUE(fs::exists(other.path() / "de"));
  EXPECT_TRUE(fs::exists(other.path() / "ab"));
}

TEST_F(CacheCli, AnUnknownVerbIsAUsageError) {
  const CliResult result = run_cli("cache prune" + dir_option());
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_TRUE(mentions(result, "unknown verb 'prune'")) << result.output;
  EXPECT_EQ(run_cli("cache" + dir_option()).exit_code, 2);
  EXPECT_EQ(run_cli("cache ls --stale" + dir_option()).exit_code, 2);
}

// A clear that cannot remove a file (here a key folder its user may not write; a read-only mount
// or an immutable file fail the same way) lists it with the system's reason and exits 1: "removed
// N files" and exit 0 while entries remain would tell a script the cache is empty.
TEST(CacheCliClear, ListsEachFileItCouldNotRemoveAndExitsOne) {
  if (rerun_without_root()) return;  // root may unlink in any folder
  const TempDirectory directory;
  DiskCache disk(directory.path());
  disk.store(test_key(0x11), fake_cubin(80, 300), families::kernel_source(quantize_rows_spec(64)));
  disk.store(test_key(0x22), fake_cubin(86, 500), families::kernel_source(quantize_rows_spec(256)));
  const fs::path locked_folder = disk.entry_path(test_key(0x22)).parent_path();
  ASSERT_EQ(::chmod(locked_folder.c_str(), 0500), 0);

  const CliResult clear = run_cli("cache clear --dir " + directory.path().string());
  ASSERT_EQ(::chmod(locked_folder.c_str(), 0700), 0);
  EXPECT_EQ(clear.exit_code, 1) << clear.output;
  EXPECT_TRUE(mentions(clear, "could not remove " + disk.entry_path(test_key(0x22)).string() +
                                  ": " + std::strerror(EACCES)))
      << clear.output;
  EXPECT_TRUE(mentions(clear, "removed 2 files")) << clear.output;  // 0x11's entry and sidecar
  EXPECT_TRUE(mentions(clear, "2 files could not be removed")) << clear.output;
  EXPECT_TRUE(fs::exists(disk.entry_path(test_key(0x22))));
}

// Emptied key folders that cannot be removed (the cache directory is read-only to its user) are
// failures of the clear too, listed, exit 1.
TEST(CacheCliClear, ListsAnEmptiedKeyFolderItCouldNotRemove) {
  if (rerun_without_root()) return;
  const TempDirectory directory;
  DiskCache disk(directory.path());
  disk.store(test_key(0x11), fake_cubin(80, 300), families::kernel_source(quantize_rows_spec(64)));
  ASSERT_EQ(::chmod(directory.path().c_str(), 0500), 0);
  const CliResult clear = run_cli("cache clear --dir " + directory.path().string());
  ASSERT_EQ(::chmod(directory.path().c_str(), 0700), 0);
  EXPECT_EQ(clear.exit_code, 1) << clear.output;
  const fs::path folder = disk.entry_path(test_key(0x11)).parent_path();
  EXPECT_TRUE(mentions(clear, "could not remove " + folder.string() + ": " + std::strerror(EACCES)))
      << clear.output;
  EXPECT_TRUE(mentions(clear, "1 file could not be removed")) << clear.output;
}

}  // namespace
}  // namespace intfa::cache
