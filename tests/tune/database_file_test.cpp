// The tuning database on disk: where it is, atomic writes that merge, and files the runtime
// must survive (corrupt, another schema version) with one warning.
#include "tune/database_file.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "common/log.hpp"
#include "support/invalid_field.hpp"
#include "support/temp_dir.hpp"
#include "tune/tune_test_support.hpp"

namespace intfa::tune {
namespace {

namespace fs = std::filesystem;
using intfa::testing::ScopedEnv;
using intfa::testing::TempDir;
using testing::any_contains;
using testing::d128_request;
using testing::entry_for;
using testing::h100;

constexpr KernelConfig kFast{64, 128, 4, 2};

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

std::size_t files_in(const fs::path& directory) {
  return static_cast<std::size_t>(std::distance(fs::directory_iterator(directory), {}));
}

class DatabaseFile : public ::testing::Test {
 protected:
  fs::path path() const { return directory_.path() / "tuning.json"; }
  TempDir directory_;
};

TEST_F(DatabaseFile, DefaultIsIntfaTuneDbElseTuningJsonInTheCacheDirectory) {
  {
    const ScopedEnv database("INTFA_TUNE_DB", "/somewhere/tuned.json");
    EXPECT_EQ(default_database_path(), fs::path("/somewhere/tuned.json"));
  }
  const ScopedEnv unset("INTFA_TUNE_DB", nullptr);
  const ScopedEnv cache("INTFA_CACHE_DIR", directory_.path().c_str());
  const ScopedEnv enabled("INTFA_CACHE_DISABLE", nullptr);
  EXPECT_EQ(default_database_path(), directory_.path() / "tuning.json");
}

// A relative INTFA_TUNE_DB is an error naming it, as a relative INTFA_CACHE_DIR is (it was read
// from the working directory).
TEST_F(DatabaseFile, ARelativeIntfaTuneDbIsAnErrorNamingIt) {
  const ScopedEnv database("INTFA_TUNE_DB", "relative/tuning.json");
  EXPECT_EQ(intfa::testing::invalid_field([] { default_database_path(); }), "INTFA_TUNE_DB");
}

TEST_F(DatabaseFile, WritesAtomicallyIntoANewFolderAndReadsBackTheSameDatabase) {
  TuningDatabase database;
  database.merge(entry_for(d128_request(), 4096, kFast));
  const fs::path nested = directory_.path() / "new" / "tuning.json";
  write_database_file(nested, database);
  EXPECT_EQ(read_database_file(nested), database);
  EXPECT_EQ(files_in(nested.parent_path()), 1u) << "a temp file was left behind";
}

TEST_F(DatabaseFile, AMissingFileReadsAsNoDatabase) {
  EXPECT_EQ(read_database_file(path()), std::nullopt);
  const log::ScopedCapture capture;
  EXPECT_TRUE(load_database_or_empty(path()).empty());
  EXPECT_TRUE(capture.warnings().empty());
}

TEST_F(DatabaseFile, RecordEntryMergesIntoWhatTheFileHoldsNow) {
  record_entry(path(), entry_for(d128_request(), 1024, kFast));
  record_entry(path(), entry_for(d128_request(), 4096, kFast));
  record_entry(path(), entry_for(d128_request(), 1024, kFast, 0.5));  // a re-tune
  const auto database = read_database_file(path());
  ASSERT_TRUE(database);
  EXPECT_EQ(database->entries().size(), 2u);
  EXPECT_EQ(database->find(h100(), {d128_request(), 1024})->best.median_ms, 0.5);
}

// A variant row and a config entry recorded by two runs are both kept: each re-reads the file.
TEST_F(DatabaseFile, RecordVariantRowKeepsTheEntriesAndReplacesItsBucket) {
  record_entry(path(), entry_for(d128_request(), 1024, kFast));
  record_variant_row(path(), testing::variant_row_for(128, false, 4096, Variant::kHalfInt8));
  record_variant_row(path(), testing::variant_row_for(128, false, 4096, Variant::kFullInt8));
  record_entry(path(), entry_for(d128_request(), 4096, kFast));
  const auto database = read_database_file(path());
  ASSERT_TRUE(database);
  EXPECT_EQ(database->entries().size(), 2u);
  ASSERT_EQ(database->variant_rows().size(), 1u);
  EXPECT_EQ(database->variant_rows().front().variant, Variant::kFullInt8);
}

TEST_F(DatabaseFile, RecordEntryNeverOverwritesAFileItCannotRead) {
  write_text(path(), "{\"schema_version\": 99, \"entries\": []}");
  EXPECT_THROW(record_entry(path(), entry_for(d128_request(), 1024, kFast)), DatabaseError);
  std::ifstream in(path());
  const std::string kept((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(kept, "{\"schema_version\": 99, \"entries\": []}");
}

TEST_F(DatabaseFile, ReadErrorsNameTheFileAndTheMember) {
  write_text(path(), "{\"schema_version\": 4, \"entries\": []}");
  try {
    read_database_file(path());
    FAIL() << "accepted schema version 4";
  } catch (const DatabaseError& error) {
    EXPECT_EQ(error.field(), path().string() + ": schema_version");
  }
}

// A directory where the file should be is named as one (it was "a special file").
TEST_F(DatabaseFile, ADirectoryInPlaceOfTheFileIsNamedSo) {
  std::filesystem::create_directories(path());
  try {
    read_database_file(path());
    FAIL() << "read a directory as a database";
  } catch (const DatabaseError& error) {
    EXPECT_NE(std::string(error.what()).find("is a directory"), std::string::npos) << error.what();
  }
}

// A Kubernetes ConfigMap mounts each key as a link to ..data/<key>, itself a link to a folder of
// the current version: the database is read through both.
TEST_F(DatabaseFile, ALinkToATrustedFileIsFollowedAsAConfigMapMountsIt) {
  TuningDatabase database;
  database.merge(entry_for(d128_request(), 4096, kFast));
  const fs::path version = directory_.path() / "..2026_11_28_18_00_00.1";
  write_database_file(version / "tuning.json", database);
  fs::create_directory_symlink(version.filename(), directory_.path() / "..data");
  fs::create_symlink(fs::path("..data") / "tuning.json", path());
  const log::ScopedCapture capture;
  EXPECT_EQ(read_database_file(path()), database);
  EXPECT_EQ(load_database_or_empty(path()), database);
  EXPECT_TRUE(capture.warnings().empty());
}

// Its entries choose the kernels every call runs: a file others could rewrite is not read, named
// directly or through a link.
TEST_F(DatabaseFile, AFileOthersCanWriteIsRefused) {
  TuningDatabase database;
  database.merge(entry_for(d128_request(), 4096, kFast));
  write_database_file(path(), database);
  fs::permissions(path(), fs::perms::others_write, fs::perm_options::add);
  try {
    read_database_file(path());
    FAIL() << "read a database anyone can write";
  } catch (const DatabaseError& error) {
    EXPECT_NE(std::string(error.what()).find("is writable by others"), std::string::npos)
        << error.what();
  }
}

// A dangling link named by INTFA_TUNE_DB is one warning, as a missing file is.
TEST_F(DatabaseFile, ADanglingLinkIsOneWarning) {
  fs::create_symlink(directory_.path() / "gone.json", path());
  const ScopedEnv database("INTFA_TUNE_DB", path().c_str());
  reset_process_database_for_testing();
  const log::ScopedCapture capture;
  EXPECT_TRUE(process_database()->empty());
  EXPECT_EQ(capture.warnings().size(), 1u);
  reset_process_database_for_testing();
}

// Its entries choose the kernels every call runs: a target anyone could rewrite is not read.
TEST_F(DatabaseFile, ALinkToAFileOthersCanWriteIsRefusedNamingTheTarget) {
  TuningDatabase database;
  database.merge(entry_for(d128_request(), 4096, kFast));
  const fs::path target = directory_.path() / "shared.json";
  write_database_file(target, database);
  fs::permissions(target, fs::perms::group_write | fs::perms::others_write, fs::perm_options::add);
  fs::create_symlink(target, path());
  try {
    read_database_file(path());
    FAIL() << "read a database anyone can write";
  } catch (const DatabaseError& error) {
    EXPECT_NE(std::string(error.what()).find(target.string() + " is writable by others"),
              std::string::npos)
        << error.what();
  }
}

TEST_F(DatabaseFile, ACorruptFileIsOneWarningAndAnEmptyDatabase) {
  write_text(path(), "{\"schema_version\": 1, \"entries\": [{\"gpu\": ");
  const log::ScopedCapture capture;
  EXPECT_TRUE(load_database_or_empty(path()).empty());
  EXPECT_TRUE(load_database_or_empty(path()).empty());
  ASSERT_EQ(capture.warnings().size(), 1u);
  EXPECT_NE(capture.warnings()[0].find(path().string()), std::string::npos);
  EXPECT_NE(capture.warnings()[0].find("heuristic"), std::string::npos);
}

TEST_F(DatabaseFile, AnotherSchemaVersionIsOneWarningAndAnEmptyDatabase) {
  write_text(path(), "{\"schema_version\": 4, \"entries\": []}");
  const log::ScopedCapture capture;
  EXPECT_TRUE(load_database_or_empty(path()).empty());
  ASSERT_EQ(capture.warnings().size(), 1u);
  EXPECT_TRUE(any_contains(capture.warnings(), "schema_version = 4"));
}

TEST_F(DatabaseFile, TheProcessDatabaseIsLoadedOnceUntilReset) {
  TuningDatabase database;
  database.merge(entry_for(d128_request(), 4096, kFast));
  write_database_file(path(), database);
  const ScopedEnv pointed("INTFA_TUNE_DB", path().c_str());
  reset_process_database_for_testing();
  EXPECT_EQ(*process_database(), database);
  fs::remove(path());
  EXPECT_EQ(*process_database(), database);  // kept for the life of the process
  {
    const log::ScopedCapture capture;
    reset_process_database_for_testing();
    EXPECT_TRUE(process_database()->empty());
    EXPECT_TRUE(any_contains(capture.warnings(), "INTFA_TUNE_DB names"));
  }
  reset_process_database_for_testing();
}

}  // namespace
}  // namespace intfa::tune
