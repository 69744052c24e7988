// The verbs of the intfa tool. Each takes the arguments after the verb and returns the exit code.
#pragma once

#include <string>
#include <vector>

namespace intfa::cli {

using Arguments = std::vector<std::string>;

struct Command {
  const char* name;
  const char* summary;
  const char* usage;  // printed by --help and on a usage error
  int (*run)(const Arguments& arguments);
  const char* shared_options = nullptr;  // printed after `usage` (options several commands take)
};

const std::vector<Command>& commands();

int run_info(const Arguments& arguments);
int run_cache(const Arguments& arguments);
int run_demo(const Arguments& arguments);
int run_bench(const Arguments& arguments);
int run_precompile(const Arguments& arguments);
int run_tune(const Arguments& arguments);

// `intfa bench --decode` and `intfa tune --decode` (cmd_decode.cpp): the paged KV cache.
int run_decode_bench(const Arguments& arguments);
int run_decode_tune(const Arguments& arguments);
// True when `arguments` hold --decode (its verbs take their own options).
bool wants_decode(const Arguments& arguments);

// `intfa tune --variant-table` (cmd_tune_variants.cpp): variant "auto"'s rows for this GPU.
int run_variant_table_tune(const Arguments& arguments);
bool wants_variant_table(const Arguments& arguments);

// `intfa bench --jit` (bench_jit.cpp): writes JSON to `json_path` unless it is empty.
int run_jit_bench(const std::string& json_path, int repeats);

extern const char* const kInfoUsage;
extern const char* const kCacheUsage;
extern const char* const kRunUsage;
extern const char* const kBenchUsage;
extern const char* const kPrecompileUsage;
extern const char* const kTuneUsage;
extern const char* const kDecodeUsage;
extern const char* const kVariantTableUsage;

}  // namespace intfa::cli
