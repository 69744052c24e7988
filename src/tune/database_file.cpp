#include "tune/database_file.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <system_error>

#include "common/env.hpp"
#include "common/file_io.hpp"
#include "common/file_trust.hpp"
#include "common/locations.hpp"
#include "common/log.hpp"
#include "intfa/errors.hpp"

namespace intfa::tune {
namespace fs = std::filesystem;
namespace {

// A database holds a few hundred entries of about 1 KiB; a larger file is not one.
constexpr std::uint64_t kMaxDatabaseBytes = std::uint64_t{16} << 20;
constexpr const char* kFileName = "tuning.json";

std::string temp_file_name() {
  // O_EXCL keeps two writers apart; the pid and clock only make a clash unlikely.
  const auto ticks = std::chrono::steady_clock::now().time_since_epoch().count();
  return ".tmp-tuning-" + std::to_string(::getpid()) + "-" + std::to_string(ticks);
}

// A malformed variable of the path (INTFA_CACHE_DISABLE=2, a relative INTFA_TUNE_DB or
// INTFA_CACHE_DIR) is the call's error, as the kernel cache reports it: a warning here came first,
// and then that error.
TuningDatabase load_default_database() {
  const std::optional<fs::path> path = default_database_path();
  if (!path) return {};
  std::error_code ignored;
  if (env::get("INTFA_TUNE_DB") && !fs::exists(*path, ignored)) {
    // A dangling link or a loop too: one warning, not a second one from reading it.
    log::warn_once("tune:missing", "INTFA_TUNE_DB names " + path->string() +
                                       ", which does not exist; tuned configs are not used");
    return {};
  }
  TuningDatabase database = load_database_or_empty(*path);
  if (log::verbose()) {
    log::info("tuning database " + path->string() + ": " +
              std::to_string(database.entries().size()) + " entries, " +
              std::to_string(database.variant_rows().size()) + " variant rows");
  }
  return database;
}

struct ProcessDatabase {
  std::mutex mutex;
  std::shared_ptr<const TuningDatabase> database;
  std::atomic<std::uint64_t> generation{0};
};

ProcessDatabase& process_state() {
  static ProcessDatabase state;
  return state;
}

}  // namespace

std::optional<fs::path> default_database_path() {
  // Absolute, as the other path variables (a relative one was read from the working directory).
  if (auto forced = env::absolute_path("INTFA_TUNE_DB")) return forced;
  const auto cache_directory = locations::default_cache_directory();
  if (!cache_directory) return std::nullopt;
  return *cache_directory / kFileName;
}

namespace {

// The file a database path names, its entries choosing the kernels every call runs: the path
// itself, or the target of a link at it (a Kubernetes ConfigMap mounts each key as a link into a
// folder of its own), either way a file this user or root owns and no one else can write, as the
// kernel cache's directories must be. Throws DatabaseError saying why not.
fs::path database_file_target(const fs::path& path) {
  std::error_code error;
  const bool link = fs::symlink_status(path, error).type() == fs::file_type::symlink;
  const fs::path target = link ? fs::canonical(path, error) : path;
  const std::string what = link ? "(a link)" : "(not a database file)";
  if (error) throw DatabaseError(path.string(), what, "cannot follow it: " + error.message());
  struct stat info {};
  if (::stat(target.c_str(), &info) != 0) {
    if (!link) return path;  // read_regular_file says why
    throw DatabaseError(path.string(), what,
                        "cannot read its target " + target.string() + ": " + std::strerror(errno));
  }
  std::string problem;
  if (!files::trusted_owner(info.st_uid)) {
    problem = "belongs to uid " + std::to_string(info.st_uid) + ", not to this user or root";
  } else if ((info.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    problem = "is writable by others";
  }
  if (!problem.empty()) {
    throw DatabaseError(path.string(), what,
                        (link ? "its target " + target.string() + " " : std::string("it ")) +
                            problem + ", so it is not read (fix: chmod go-w, or own it)");
  }
  return target;
}

}  // namespace

std::optional<TuningDatabase> read_database_file(const fs::path& path) {
  std::error_code error;
  if (fs::symlink_status(path, error).type() == fs::file_type::not_found) return std::nullopt;
  std::vector<char> bytes;
  try {
    bytes = files::read_regular_file(database_file_target(path), kMaxDatabaseBytes);
  } catch (const files::UnexpectedFileError& bad) {
    throw DatabaseError(path.string(), "(not a database file)", bad.what());
  } catch (const std::system_error& io) {
    throw DatabaseError(path.string(), "(unreadable)", io.what());
  }
  try {
    return TuningDatabase::parse(std::string(bytes.data(), bytes.size()));
  } catch (const DatabaseError& bad) {
    throw bad.in_file(path.string());
  }
}

TuningDatabase load_database_or_empty(const fs::path& path) {
  try {
    return read_database_file(path).value_or(TuningDatabase{});
  } catch (const DatabaseError& bad) {
    log::warn_once("tune:unusable:" + path.string(),
                   "ignoring the tuning database: " + std::string(bad.what()) +
                       "; the heuristic chooses every config and the shipped table every variant "
                       "(re-run intfa tune to rebuild it)");
    return {};
  }
}

void write_database_file(const fs::path& path, const TuningDatabase& database) {
  const std::string text = database.dump();
  try {
    const fs::path folder = path.parent_path();
    if (!folder.empty()) fs::create_directories(folder);
    files::write_file_atomically(path, temp_file_name(), text.data(), text.size());
  } catch (const std::exception& error) {
    throw CacheError("cannot write the tuning database " + path.string() + ": " + error.what());
  }
}

namespace {

template <typename Record>
void merge_into_file(const fs::path& path, const Record& record) {
  TuningDatabase database = read_database_file(path).value_or(TuningDatabase{});
  database.merge(record);
  write_database_file(path, database);
}

}  // namespace

void record_entry(const fs::path& path, const TuningEntry& entry) {
  merge_into_file(path, entry);
}

void record_variant_row(const fs::path& path, const VariantRow& row) {
  merge_into_file(path, row);
}

std::shared_ptr<const TuningDatabase> process_database() {
  ProcessDatabase& state = process_state();
  std::lock_guard<std::mutex> lock(state.mutex);
  if (!state.database) {
    state.database = std::make_shared<const TuningDatabase>(load_default_database());
  }
  return state.database;
}

void reset_process_database_for_testing() {
  ProcessDatabase& state = process_state();
  std::lock_guard<std::mutex> lock(state.mutex);
  state.database.reset();
  state.generation.fetch_add(1, std::memory_order_relaxed);
}

std::uint64_t process_database_generation() {
  return process_state().generation.load(std::memory_order_relaxed);
}

}  // namespace intfa::tune
