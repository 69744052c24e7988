// What `intfa tune` and `intfa tune --variant-table` share: their --seq and --tuning-db options
// and the check of a kernel's output against the quantized model.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "intfa/args.hpp"
#include "reference/attention_check.hpp"

namespace intfa::cli {

// --seq: the lengths to time, one per sequence bucket (two in one bucket are a UsageError);
// default 1k, 4k, 16k.
std::vector<long> parse_bucket_seqs(const Args& args);

// --tuning-db, else tune::default_database_path() (a UsageError when neither names a place).
std::filesystem::path tuning_database_path(const Args& args);

// What is wrong with a checked output against the quantized model (a kernel bug, not rounding:
// the bounds of tests/attention/attention_gpu_test.cpp), or "".
std::string wrong_output(const reference::CheckResult& result);

}  // namespace intfa::cli
