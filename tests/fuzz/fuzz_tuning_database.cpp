// libFuzzer target: the tuning-database parser on arbitrary text (a tuning.json anyone could have
// edited). It must return a database or throw DatabaseError, never read outside its input (ASan)
// nor reach undefined behaviour (UBSan); a database it accepts must survive writing and reading
// back unchanged.
#include <cstddef>
#include <cstdint>
#include <string>

#include "tune/tuning_database.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  intfa::tune::TuningDatabase database;
  try {
    database = intfa::tune::TuningDatabase::parse(text);
  } catch (const intfa::tune::DatabaseError&) {
    return 0;
  }
  if (!(intfa::tune::TuningDatabase::parse(database.dump()) == database)) __builtin_trap();
  return 0;
}
