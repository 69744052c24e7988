// The tuning database on disk: where it lives, reading it (strictly for the tools, forgivingly for
// the runtime), writing it atomically, and the process-wide copy the runtime's config choice reads.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>

#include "tune/tuning_database.hpp"

namespace intfa::tune {

// $INTFA_TUNE_DB, else tuning.json in the kernel cache directory
// (locations::default_cache_directory(): $INTFA_CACHE_DIR, $XDG_CACHE_HOME/intfa or
// ~/.cache/intfa); nullopt when neither names a place (no home, or INTFA_CACHE_DISABLE=1 without
// INTFA_TUNE_DB). Throws InvalidArgument naming INTFA_TUNE_DB or INTFA_CACHE_DIR when that is
// set to a relative path.
std::optional<std::filesystem::path> default_database_path();

// The database in `path`, or nullopt when there is no file there. Throws DatabaseError naming the
// file when it cannot be read or is not a valid database (wrong schema version included).
std::optional<TuningDatabase> read_database_file(const std::filesystem::path& path);

// For the runtime: read_database_file, with a missing file read as an empty database and an
// unusable one as an empty database and one warning (the heuristic then serves every call).
TuningDatabase load_database_or_empty(const std::filesystem::path& path);

// Writes `database` to `path` (temp file in the same folder, fsync, rename), creating the folder.
// Throws CacheError naming the file.
void write_database_file(const std::filesystem::path& path, const TuningDatabase& database);

// Re-reads `path` (another tuner may have written other buckets since), merges `entry` into it,
// replacing the entry of its bucket, and writes it back. Throws DatabaseError when the file holds
// something that is not a database this build reads: it is never overwritten.
void record_entry(const std::filesystem::path& path, const TuningEntry& entry);
// The same for a variant row (`intfa tune --variant-table`).
void record_variant_row(const std::filesystem::path& path, const VariantRow& row);

// The database at default_database_path(), loaded on first use and kept for the life of the
// process (one of intfa's documented process-wide caches; a tuning run in another process is seen
// by the next process). Thread-safe. Throws default_database_path's InvalidArgument, at each call
// until the variable is fixed.
std::shared_ptr<const TuningDatabase> process_database();

// Changes whenever the process-wide database is forgotten, so a memo of a config chosen from it
// can tell it is stale (one relaxed atomic load).
std::uint64_t process_database_generation();

// Forgets the process-wide database so the next process_database() re-reads the environment and
// the file. For tests.
void reset_process_database_for_testing();

}  // namespace intfa::tune
