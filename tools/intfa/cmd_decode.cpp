// `intfa bench --decode` and `intfa tune --decode`: the paged KV cache's decode (and append) timed
// on a grid of problems, with the bandwidth over the bytes each reads; the tuner's form sweeps the
// split count (and, with --configs all, the tile configs) of each problem and reports the fastest
// against the heuristic's choice.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "attention/attention_launch.hpp"
#include "attention/validation.hpp"
#include "common/json.hpp"
#include "common/strings.hpp"
#include "decode/paged_checks.hpp"
#include "device/device_info.hpp"
#include "device/device_memory.hpp"
#include "device/driver_api.hpp"
#include "families/paged_family.hpp"
#include "launch/kernel_runtime.hpp"
#include "intfa/args.hpp"
#include "intfa/attention_workload.hpp"
#include "intfa/commands.hpp"
#include "intfa/errors.hpp"
#include "intfa/paged.hpp"
#include "intfa/problem_options.hpp"
#include "reference/half.hpp"
#include "reference/reference.hpp"

namespace intfa::cli {

const char* const kDecodeUsage =
    "usage: intfa bench --decode [options]    intfa tune --decode [options]\n\n"
    "The paged INT8/INT4 KV cache (include/intfa/paged.hpp) on a grid of problems: every\n"
    "sequence of --seq tokens in pages of --page-size taken in random order from one pool, filled\n"
    "by paged_append with random N(0, 1) K/V. bench times paged_decode (CUDA events, warm-up,\n"
    "median of --repeats) and prints ms and GB/s over the bytes it reads (K and V with their\n"
    "scales), then paged_append of --append-tokens tokens in GB/s read + written. tune times\n"
    "every split count (1..64, none under 256 tokens) of each problem and prints the fastest\n"
    "against the heuristic's.\n\n"
    "  --batch LIST (8)            --seq LIST (32k)            --q-len LIST (1)\n"
    "  --heads-q H (32)            --heads-kv H (8)            --head-dims LIST (128)\n"
    "  --bits LIST (8,4)           --page-size P (16)          --dtype f16|bf16 (f16)\n"
    "  --causal                    --repeats R (20)            --append-tokens N (16k)\n"
    "  --splits N                  force N splits (default: the heuristic's)\n"
    "  --configs R,N,S;...|all     decode tile configs: block rows, stage tokens, stages\n"
    "  --json FILE                 every row as JSON\n"
    "  --prefill                   instead: paged_prefill of each sequence's last --q-len tokens\n"
    "                              (up to --seq) against its whole cache, beside intfa's dense\n"
    "                              kernel alone at the same shape (half INT8, as paged prefill\n"
    "                              runs, and full INT8) on pre-quantized inputs, and both\n"
    "                              quantizing their own 16-bit Q (sm_90a), interleaved (4\n"
    "                              rounds of --repeats runs each, the order reversed every\n"
    "                              round): medians of all runs, and the range of the rounds'\n"
    "                              ratios; TOPS count the causal mask's scores once\n";

namespace {

struct DecodeShape {
  int batch = 8, seq = 32768, q_len = 1, heads_q = 32, heads_kv = 8, head_dim = 128, bits = 8;
  int page_size = 16;
  DType dtype = DType::kF16;
  bool causal = false;
  bool prefill = false;  // paged_prefill of the last q_len tokens instead of paged_decode

  std::string to_string() const {
    return "B" + std::to_string(batch) + " N" + std::to_string(seq) + " q" + std::to_string(q_len) +
           " H" + std::to_string(heads_q) + "/" + std::to_string(heads_kv) + " d" +
           std::to_string(head_dim) + " i" + std::to_string(bits) + (causal ? " causal" : "");
  }
  int pages_per_sequence() const { return (seq + page_size - 1) / page_size; }
};

// "--batch B --seq N (P-token pages)": the options that size the pool, for messages.
std::string pool_options(const DecodeShape& shape) {
  return "--batch " + std::to_string(shape.batch) + " --seq " + std::to_string(shape.seq) + " (" +
         std::to_string(shape.page_size) + "-token pages)";
}

// The pool of `shape`: every sequence's pages. The page count is checked before it is stored
// (a UsageError naming the options): an int product of --batch 65535 --seq 1048608 wrapped to
// 65534 pages, and filling them wrote past the pool.
PagedKVCache cache_geometry(const DecodeShape& shape) {
  PagedKVCache cache;
  cache.page_size = shape.page_size;
  cache.heads_kv = shape.heads_kv;
  cache.head_dim = shape.head_dim;
  cache.bits = shape.bits;
  if (__builtin_mul_overflow(shape.batch, shape.pages_per_sequence(), &cache.num_pages)) {
    throw UsageError(
        pool_options(shape) + ": " +
        std::to_string(static_cast<long long>(shape.batch) * shape.pages_per_sequence()) +
        " pages, expected fewer than 2^31");
  }
  return cache;
}

// Every sequence of `shape` at its full length.
PagedDecodeProblem decode_problem(const DecodeShape& shape) {
  PagedDecodeProblem problem;
  problem.batch = shape.batch;
  problem.q_len = shape.q_len;
  problem.heads_q = shape.heads_q;
  problem.max_pages = shape.pages_per_sequence();
  problem.max_seq_len = shape.seq;
  problem.causal = shape.causal;
  return problem;
}

std::string config_text(const PagedDecodeConfig& config) {
  if (config.block_rows == 0 && config.stage_tokens == 0 && config.stages == 0) return "heuristic";
  return std::to_string(config.block_rows) + "," + std::to_string(config.stage_tokens) + "," +
         std::to_string(config.stages);
}

// Every sequence of `shape` at its full length, its last q_len tokens the queries.
PagedPrefillProblem prefill_problem(const DecodeShape& shape) {
  PagedPrefillProblem problem;
  problem.batch = shape.batch;
  problem.heads_q = shape.heads_q;
  problem.total_q = shape.batch * shape.q_len;
  problem.max_q_len = shape.q_len;
  problem.max_pages = shape.pages_per_sequence();
  problem.max_seq_len = shape.seq;
  problem.kv_tokens = static_cast<long long>(shape.batch) * shape.seq;
  problem.causal = shape.causal;
  return problem;
}

// The checks a decode (or prefill) of `shape` under `options` makes before it looks for a GPU,
// each failure a UsageError naming the option that set the field (--configs 7,64,2 said "needs a
// GPU").
void validate_shape(const DecodeShape& shape, const PagedDecodeOptions& options) {
  try {
    if (shape.prefill) {
      if (static_cast<long long>(shape.batch) * shape.q_len > (1LL << 28)) {
        throw InvalidArgument("problem.total_q",
                              std::to_string(static_cast<long long>(shape.batch) * shape.q_len),
                              "expected at most 2^28 query rows");
      }
      paged_prefill_workspace_bytes(cache_geometry(shape), prefill_problem(shape));
      return;
    }
    paged::validate_decode(cache_geometry(shape), decode_problem(shape), options);
  } catch (const InvalidArgument& error) {
    throw_naming_option(error, {{"cache.num_pages", pool_options(shape)},
                                {"cache.page_size", "--page-size"},
                                {"cache.heads_kv", "--heads-kv"},
                                {"cache.head_dim", "--head-dims"},
                                {"cache.bits", "--bits"},
                                {"problem.batch", "--batch"},
                                {"problem.q_len", "--q-len"},
                                {"problem.max_q_len", "--q-len"},
                                {"problem.total_q", "--batch and --q-len"},
                                {"problem.kv_tokens", "--batch and --seq"},
                                {"problem.heads_q", "--heads-q"},
                                {"options.num_splits", "--splits"},
                                {"options.config.", "--configs " + config_text(options.config)}});
  }
}

// One problem's cache, filled, with its block table, lengths, queries, output and workspace.
class DecodeWorkload {
 public:
  DecodeWorkload(const DecodeShape& shape, int append_tokens, CUstream stream)
      : shape_(shape), cache_(cache_geometry(shape)) {
    const int pages_per_sequence = shape.pages_per_sequence();
    const std::size_t data = paged_data_bytes(cache_), scales = paged_scale_bytes(cache_);
    k_data_ = device::DeviceBuffer(data);
    v_data_ = device::DeviceBuffer(data);
    k_scale_ = device::DeviceBuffer(scales);
    v_scale_ = device::DeviceBuffer(scales);
    cache_.k_data = k_data_.get();
    cache_.v_data = v_data_.get();
    cache_.k_scale = k_scale_.get();
    cache_.v_scale = v_scale_.get();

    // Pages in a random order: sequence b's page i is pool[b * pages + i].
    std::vector<int> pool(static_cast<std::size_t>(cache_.num_pages));
    std::iota(pool.begin(), pool.end(), 0);
    std::shuffle(pool.begin(), pool.end(), std::mt19937_64(7));
    table_ = device::DeviceBuffer(pool.size() * sizeof(int));
    table_.upload(pool);
    std::vector<int> lengths(static_cast<std::size_t>(shape.batch), shape.seq);
    lengths_ = device::DeviceBuffer(lengths.size() * sizeof(int));
    lengths_.upload(lengths);

    // Random rows of one chunk, appended over and over until every token has its row.
    const long long total = static_cast<long long>(shape.batch) * shape.seq;
    chunk_tokens_ = static_cast<int>(std::max(1LL, std::min<long long>(append_tokens, total)));
    const std::size_t chunk_values =
        static_cast<std::size_t>(chunk_tokens_) * shape.heads_kv * shape.head_dim;
    const bool bf16 = shape.dtype == DType::kBF16;
    std::vector<std::uint16_t> bits(chunk_values);
    const std::vector<float> values =
        reference::random_values(chunk_values, reference::Distribution::kNormal, 11);
    for (std::size_t i = 0; i < chunk_values; ++i) {
      bits[i] =
          bf16 ? reference::float_to_bf16_bits(values[i]) : reference::float_to_f16_bits(values[i]);
    }
    rows_ = device::DeviceBuffer(chunk_values * 2);
    rows_.upload(bits);
    slots_ = device::DeviceBuffer(static_cast<std::size_t>(chunk_tokens_) * sizeof(int));
    for (long long first = 0; first < total; first += chunk_tokens_) {
      std::vector<int> slots(static_cast<std::size_t>(chunk_tokens_), -1);
      for (long long t = first; t < std::min(total, first + chunk_tokens_); ++t) {
        const int b = static_cast<int>(t / shape.seq), position = static_cast<int>(t % shape.seq);
        slots[static_cast<std::size_t>(t - first)] =
            pool[static_cast<std::size_t>(b) * pages_per_sequence + position / shape.page_size] *
                shape.page_size +
            position % shape.page_size;
      }
      slots_.upload(slots);
      append(stream);
    }
    INTFA_DRIVER(cuStreamSynchronize, stream);

    const std::size_t q_values =
        static_cast<std::size_t>(shape.batch) * shape.q_len * shape.heads_q * shape.head_dim;
    q_ = device::DeviceBuffer(q_values * 2);
    std::vector<std::uint16_t> q_bits(q_values);
    for (std::size_t i = 0; i < q_values; ++i) q_bits[i] = bits[i % chunk_values];
    q_.upload(q_bits);
    out_ = device::DeviceBuffer(q_values * 2);
    lse_ = device::DeviceBuffer(static_cast<std::size_t>(shape.batch) * shape.q_len *
                                shape.heads_q * sizeof(float));
    problem_ = decode_problem(shape);
  }

  // The host memory the constructor takes at its peak: the block table, the chunk of rows (as
  // floats and 16-bit) with its slots, and the queries (under the options' limits below 2^50).
  static std::uint64_t host_bytes(const DecodeShape& shape, int append_tokens) {
    const std::uint64_t tokens = static_cast<std::uint64_t>(shape.batch) * shape.seq;
    const std::uint64_t pages =
        static_cast<std::uint64_t>(shape.batch) * shape.pages_per_sequence();
    const std::uint64_t chunk = std::min<std::uint64_t>(append_tokens, tokens);
    const std::uint64_t chunk_values = chunk * shape.heads_kv * shape.head_dim;
    const std::uint64_t q_values =
        static_cast<std::uint64_t>(shape.batch) * shape.q_len * shape.heads_q * shape.head_dim;
    return (pages + chunk + shape.batch) * sizeof(int) +
           chunk_values * (sizeof(float) + sizeof(std::uint16_t)) +
           q_values * sizeof(std::uint16_t);
  }

  // Appends the chunk's rows into the slots last uploaded (the fill's last chunk when timing).
  void append(CUstream stream) {
    TensorView rows;
    rows.data = rows_.get();
    rows.dtype = shape_.dtype;
    rows.strides = {0, shape_.head_dim,
                    static_cast<std::int64_t>(shape_.heads_kv) * shape_.head_dim, 1};
    paged_append(cache_, rows, rows, slots_.as<int>(), chunk_tokens_, stream);
  }

  void decode(CUstream stream, const PagedDecodeOptions& options) {
    const std::size_t bytes = paged_decode_workspace_bytes(cache_, problem_, options);
    if (bytes > workspace_.bytes()) workspace_ = device::DeviceBuffer(bytes);
    PagedDecodeTensors tensors;
    const TensorShape shape{shape_.batch, shape_.heads_q, shape_.q_len, shape_.head_dim};
    tensors.q = TensorView::dense(q_.get(), shape_.dtype, Layout::kBNHD, shape);
    tensors.out = TensorView::dense(out_.get(), shape_.dtype, Layout::kBNHD, shape);
    tensors.lse = lse_.as<float>();
    tensors.block_table = table_.as<int>();
    tensors.seq_lens = lengths_.as<int>();
    tensors.workspace = workspace_.get();
    tensors.workspace_bytes = workspace_.bytes();
    paged_decode(cache_, problem_, tensors, stream, options);
  }

  // paged_prefill of every sequence's last q_len tokens (the queries, [batch * q_len] rows).
  void prefill(CUstream stream) {
    const PagedPrefillProblem problem = prefill_problem(shape_);
    const std::size_t bytes = paged_prefill_workspace_bytes(cache_, problem);
    if (bytes > workspace_.bytes()) workspace_ = device::DeviceBuffer(bytes);
    if (query_starts_.bytes() == 0) {
      std::vector<int> starts(static_cast<std::size_t>(shape_.batch) + 1);
      for (int b = 0; b <= shape_.batch; ++b)
        starts[static_cast<std::size_t>(b)] = b * shape_.q_len;
      query_starts_ = device::DeviceBuffer(starts.size() * sizeof(int));
      query_starts_.upload(starts);
    }
    PagedPrefillTensors tensors;
    const TensorShape rows{1, shape_.heads_q, shape_.batch * shape_.q_len, shape_.head_dim};
    tensors.q = TensorView::dense(q_.get(), shape_.dtype, Layout::kBNHD, rows);
    tensors.out = TensorView::dense(out_.get(), shape_.dtype, Layout::kBNHD, rows);
    tensors.query_start_loc = query_starts_.as<int>();
    tensors.block_table = table_.as<int>();
    tensors.seq_lens = lengths_.as<int>();
    tensors.workspace = workspace_.get();
    tensors.workspace_bytes = workspace_.bytes();
    paged_prefill(cache_, problem, tensors, stream);
  }

  // K and V with their scales: what a decode must read.
  double decode_bytes() const {
    return static_cast<double>(shape_.batch) * shape_.seq * shape_.heads_kv * 2 *
           (kernels::paged_row_bytes(shape_.head_dim, shape_.bits) +
            kernels::paged_scales_per_row(shape_.head_dim, shape_.bits) *
                kernels::paged_scale_bytes(shape_.bits));
  }
  // FP16/BF16 rows read, cache rows and scales written.
  double append_bytes() const {
    const double rows = 2.0 * chunk_tokens_ * shape_.heads_kv;
    return rows * (shape_.head_dim * 2 + kernels::paged_row_bytes(shape_.head_dim, shape_.bits) +
                   kernels::paged_scales_per_row(shape_.head_dim, shape_.bits) *
                       kernels::paged_scale_bytes(shape_.bits));
  }
  int splits(const PagedDecodeOptions& options) const {
    return paged_decode_splits(cache_, problem_, options);
  }
  int chunk_tokens() const { return chunk_tokens_; }

 private:
  DecodeShape shape_;
  PagedKVCache cache_;
  PagedDecodeProblem problem_;
  int chunk_tokens_ = 0;
  device::DeviceBuffer k_data_, v_data_, k_scale_, v_scale_, table_, lengths_, rows_, slots_, q_,
      out_, lse_, workspace_, query_starts_;
};

struct DecodeGrid {
  std::vector<DecodeShape> shapes;
  std::vector<PagedDecodeConfig> configs;  // empty: the heuristic's
  bool all_configs = false;
  int splits = 0;
  int repeats = 20;
  int append_tokens = 16384;
  std::string json;
};

DecodeGrid parse_grid(const Arguments& arguments) {
  Grammar grammar;
  grammar.values = {"batch",         "seq",    "q-len",   "heads-q",   "heads-kv",
                    "head-dims",     "bits",   "dtype",   "page-size", "repeats",
                    "append-tokens", "splits", "configs", "json"};
  grammar.flags = {"decode", "causal", "prefill"};
  const Args args(arguments, grammar);
  DecodeGrid grid;
  const auto batches = args.get_int_list("batch", {8}, 1, 65535);
  const auto seqs = args.get_int_list("seq", {32768}, 1, 1 << 24);
  const bool prefill = args.flag("prefill");
  const auto q_lens = args.get_int_list("q-len", {1}, 1, prefill ? 1 << 24 : 64);
  const auto head_dims = args.get_int_list("head-dims", {128}, 64, 256);
  const auto bits = args.get_int_list("bits", {8, 4}, 4, 8);
  DecodeShape base;
  base.heads_q = static_cast<int>(args.get_int("heads-q", 32, 1, 65535));
  base.heads_kv = static_cast<int>(args.get_int("heads-kv", 8, 1, 65535));
  base.page_size = static_cast<int>(args.get_int("page-size", 16, 16, 128));
  base.causal = args.flag("causal");
  base.prefill = prefill;
  const std::string dtype = args.get_or("dtype", "f16");
  if (dtype != "f16" && dtype != "bf16")
    throw UsageError("--dtype " + dtype + ": expected f16 or bf16");
  base.dtype = dtype == "bf16" ? DType::kBF16 : DType::kF16;
  grid.repeats = static_cast<int>(args.get_int("repeats", 20, 1, 10000));
  grid.append_tokens = static_cast<int>(args.get_int("append-tokens", 16384, 1, 1 << 22));
  grid.splits = static_cast<int>(args.get_int("splits", 0, 1, paged::kMaxSplits));
  grid.json = args.get_or("json", "");
  if (args.get_or("configs", "") == "all") {
    grid.all_configs = true;
  } else {
    for (const std::string& text : args.get_entries("configs")) {
      const std::vector<std::string> parts = strings::split(text, ',');
      PagedDecodeConfig config;
      if (parts.size() != 3)
        throw UsageError("--configs " + text + ": expected ROWS,TOKENS,STAGES");
      int* fields[] = {&config.block_rows, &config.stage_tokens, &config.stages};
      for (std::size_t i = 0; i < 3; ++i) {
        const auto value = parse_count(parts[i]);
        if (!value || *value < 0 || *value > 128) {
          throw UsageError("--configs " + text + ": '" + parts[i] + "' is not a small integer");
        }
        *fields[i] = static_cast<int>(*value);
      }
      grid.configs.push_back(config);
    }
  }
  for (long b : batches)
    for (long seq : seqs)
      for (long q_len : q_lens)
        for (long head_dim : head_dims)
          for (long width : bits) {
            DecodeShape shape = base;
            shape.batch = static_cast<int>(b);
            shape.seq = static_cast<int>(seq);
            shape.q_len = static_cast<int>(q_len);
            shape.head_dim = static_cast<int>(head_dim);
            shape.bits = static_cast<int>(width);
            if (shape.prefill && shape.q_len > shape.seq) {
              throw UsageError("--q-len " + std::to_string(shape.q_len) +
                               ": expected at most --seq " + std::to_string(shape.seq) +
                               " (the queries are the sequence's last tokens)");
            }
            // The checks a launch makes, before any GPU is looked for (--configs all: the
            // heuristic's config stands for the device's candidates).
            PagedDecodeOptions options;
            options.num_splits = grid.splits;
            for (const PagedDecodeConfig& config : grid.configs) {
              options.config = config;
              validate_shape(shape, options);
            }
            if (grid.configs.empty()) validate_shape(shape, options);
            require_host_memory(DecodeWorkload::host_bytes(shape, grid.append_tokens),
                                "--batch " + std::to_string(shape.batch) + " --seq " +
                                    std::to_string(shape.seq) + " --q-len " +
                                    std::to_string(shape.q_len) + " --heads-q " +
                                    std::to_string(shape.heads_q) + " --head-dims " +
                                    std::to_string(shape.head_dim));
            grid.shapes.push_back(shape);
          }
  return grid;
}

std::vector<PagedDecodeConfig> configs_of(const DecodeGrid& grid, const DecodeShape& shape,
                                          const device::DeviceInfo& info) {
  if (grid.all_configs) {
    return paged::candidate_configs(shape.q_len * (shape.heads_q / shape.heads_kv), shape.head_dim,
                                    shape.bits, info.max_shared_bytes_per_block_optin);
  }
  return grid.configs.empty() ? std::vector<PagedDecodeConfig>{PagedDecodeConfig{}} : grid.configs;
}

bool gpu_or_message(const char* verb) {
  std::string reason;
  if (device::driver_available(&reason)) return true;
  std::fprintf(stderr, "intfa %s --decode: needs a GPU (%s)\n", verb, reason.c_str());
  return false;
}

}  // namespace

bool wants_decode(const Arguments& arguments) {
  return mode_flag(arguments, "decode");
}

// A JSON row's fields of the GPU and the shape.
json::Value shape_json(const device::DeviceInfo& info, const DecodeShape& shape) {
  json::Value row = json::Value::object();
  row.set("gpu", info.name);
  row.set("batch", shape.batch);
  row.set("seq", shape.seq);
  row.set("q_len", shape.q_len);
  row.set("heads_q", shape.heads_q);
  row.set("heads_kv", shape.heads_kv);
  row.set("head_dim", shape.head_dim);
  row.set("bits", shape.bits);
  row.set("page_size", shape.page_size);
  row.set("causal", shape.causal);
  return row;
}

// 4 * B * Hq * D * (the scores computed): Nq * Nkv, less the causal mask's (bottom-right).
double prefill_operations(const DecodeShape& shape) {
  const double q = shape.q_len, kv = shape.seq;
  const double scores = shape.causal ? q * kv - q * (q - 1) / 2 : q * kv;
  return 4.0 * shape.batch * shape.heads_q * shape.head_dim * scores;
}

// bench --decode --prefill: paged_prefill against intfa's dense kernels alone at the same shape,
// interleaved: kPrefillRounds rounds of --repeats runs of each contender, the order reversed every
// round (so that neither side always runs first, on a cooler GPU); each contender's median over
// every run, and the range of the rounds' own ratios.
namespace {

constexpr int kPrefillRounds = 4;

// One contender: a call on the bench's stream, and its runs' times.
struct PrefillContender {
  std::function<void(CUstream)> call;  // empty: not run (its kernel does not exist here)
  std::vector<double> runs;
};

// The plan of `workload`'s kernel quantizing the 16-bit Q itself (attention_forward_16bit's kernel,
// without its K/V passes; half INT8's is the kernel paged prefill runs), or nullopt where the
// kernel does not quantize Q (the portable kernel, or INTFA_QUANTIZE_Q_IN_KERNEL=0).
std::optional<attention::PlannedLaunch> plan_quantizing_q(const AttentionWorkload& workload,
                                                          CUstream stream) {
  const AttentionProblem& problem = workload.problem();
  attention::SixteenBitCall sixteen_bit;
  sixteen_bit.q = workload.inputs_16bit().q;
  attention::validate_problem(problem);
  attention::validate_options(problem, workload.options());
  attention::PlannedLaunch planned = attention::plan_launch(problem, workload.tensors(), stream,
                                                            workload.options(), &sixteen_bit);
  if (!planned.quantizes_q) return std::nullopt;
  return planned;
}

}  // namespace

int run_prefill_bench(const DecodeGrid& grid) {
  const device::DeviceInfo& info = device::cached_device_info(device::current_device());
  std::printf("%s\n", info.to_string().c_str());
  std::printf("%-40s %10s %7s %10s %7s %10s %7s %6s %13s %9s %10s %9s %10s\n", "problem",
              "prefill ms", "TOPS", "half ms", "TOPS", "full ms", "TOPS", "/half", "(rounds)",
              "/full", "own Q ms", "/own Q", "full own Q");
  json::Value rows = json::Value::array();
  device::Stream stream;
  for (const DecodeShape& shape : grid.shapes) {
    DecodeWorkload workload(shape, grid.append_tokens, stream.get());
    AttentionProblem problem{shape.batch, shape.heads_q,  shape.heads_kv, shape.q_len,
                             shape.seq,   shape.head_dim, shape.causal};
    problem.variant = Variant::kHalfInt8;
    AttentionWorkload half(problem, AttentionOptions{}, shape.dtype,
                           reference::InputFamily::kNormal, 5);
    half.quantize(stream.get());
    problem.variant = Variant::kFullInt8;
    AttentionWorkload full(problem, AttentionOptions{}, shape.dtype,
                           reference::InputFamily::kNormal, 5);
    full.quantize(stream.get());
    // The same kernels quantizing their 16-bit Q themselves, as paged prefill's does (K not
    // smoothed, as the bench's cache is not; the kernels on INT8 Q above read K smoothed by the
    // default options, which changes their data, not their code).
    AttentionOptions own_q_options;
    own_q_options.smooth_k = false;
    own_q_options.rotate_qk = QKRotation::kOff;
    std::vector<std::unique_ptr<AttentionWorkload>> own_q;
    std::vector<std::optional<attention::PlannedLaunch>> own_q_plans;  // half, full
    for (const Variant variant : {Variant::kHalfInt8, Variant::kFullInt8}) {
      problem.variant = variant;
      own_q.push_back(std::make_unique<AttentionWorkload>(
          problem, own_q_options, shape.dtype, reference::InputFamily::kNormal, 6));
      own_q.back()->quantize(stream.get());
      own_q_plans.push_back(plan_quantizing_q(*own_q.back(), stream.get()));
    }
    // The paged call, the dense half and full INT8 kernels on INT8 Q, then both on their own Q.
    std::vector<PrefillContender> contenders(5);
    contenders[0].call = [&](CUstream s) { workload.prefill(s); };
    contenders[1].call = [&](CUstream s) { half.attend(s); };
    contenders[2].call = [&](CUstream s) { full.attend(s); };
    for (std::size_t i = 0; i < own_q_plans.size(); ++i) {
      if (!own_q_plans[i]) continue;
      const attention::PlannedLaunch& plan = *own_q_plans[i];
      contenders[3 + i].call = [&plan](CUstream s) {
        launch::launch(*plan.kernel, plan.shape, s, plan.arguments());
      };
    }
    const int count = static_cast<int>(contenders.size());
    std::vector<double> round_ratios;
    for (int round = 0; round < kPrefillRounds; ++round) {
      std::vector<double> round_ms(contenders.size());
      for (int turn = 0; turn < count; ++turn) {
        const int index = round % 2 == 0 ? turn : count - 1 - turn;
        PrefillContender& contender = contenders[index];
        if (!contender.call) continue;
        const std::vector<double> times =
            run_times(contender.call, stream.get(), round == 0 ? 3 : 1, grid.repeats);
        round_ms[index] = median(times);
        contender.runs.insert(contender.runs.end(), times.begin(), times.end());
      }
      round_ratios.push_back(round_ms[1] / round_ms[0]);
    }
    std::vector<double> ms;
    for (const PrefillContender& contender : contenders) {
      ms.push_back(contender.call ? median(contender.runs) : std::nan(""));  // NaN: not run
    }
    const auto [ratio_min, ratio_max] = std::minmax_element(round_ratios.begin(), round_ratios.end());
    const double operations = prefill_operations(shape);
    auto tops = [&](double value) { return operations / value / 1e9; };
    char rounds[32];
    std::snprintf(rounds, sizeof rounds, "%.3f-%.3f", *ratio_min, *ratio_max);
    std::printf("%-40s %10.4f %7.0f %10.4f %7.0f %10.4f %7.0f %6.3f %13s %9.3f %10.4f %9.3f %10.4f\n",
                shape.to_string().c_str(), ms[0], tops(ms[0]), ms[1], tops(ms[1]), ms[2],
                tops(ms[2]), ms[1] / ms[0], rounds, ms[2] / ms[0], ms[3], ms[3] / ms[0], ms[4]);
    std::fflush(stdout);
    json::Value row = shape_json(info, shape);
    row.set("problem", shape.to_string());
    row.set("prefill_ms", ms[0]);
    row.set("dense_half_kernel_ms", ms[1]);
    row.set("dense_full_kernel_ms", ms[2]);
    if (!std::isnan(ms[3])) row.set("dense_half_kernel_own_q_ms", ms[3]);
    if (!std::isnan(ms[4])) row.set("dense_full_kernel_own_q_ms", ms[4]);
    row.set("prefill_tops", tops(ms[0]));
    row.set("half_over_prefill_round_min", *ratio_min);
    row.set("half_over_prefill_round_max", *ratio_max);
    row.set("rounds", kPrefillRounds);
    rows.push_back(row);
  }
  if (!grid.json.empty()) json::write_file(grid.json, rows);
  return 0;
}

int run_decode_bench(const Arguments& arguments) {
  const DecodeGrid grid = parse_grid(arguments);
  if (!gpu_or_message("bench")) return 1;
  device::use_primary_context();
  if (!grid.shapes.empty() && grid.shapes.front().prefill) return run_prefill_bench(grid);
  const device::DeviceInfo& info = device::cached_device_info(device::current_device());
  std::printf("%s\n", info.to_string().c_str());
  std::printf("%-40s %-10s %6s %9s %9s %11s %9s\n", "problem", "config", "splits", "ms", "GB/s",
              "append ms", "GB/s");
  json::Value rows = json::Value::array();
  device::Stream stream;
  for (const DecodeShape& shape : grid.shapes) {
    DecodeWorkload workload(shape, grid.append_tokens, stream.get());
    const Timing append = time_on_stream([&](CUstream s) { workload.append(s); }, stream.get(), 2,
                                         std::max(3, grid.repeats / 4));
    for (const PagedDecodeConfig& config : configs_of(grid, shape, info)) {
      PagedDecodeOptions options;
      options.num_splits = grid.splits;
      options.config = config;
      Timing decode;
      try {
        decode = time_on_stream([&](CUstream s) { workload.decode(s, options); }, stream.get(), 3,
                                grid.repeats);
      } catch (const Error& error) {
        std::printf("%-40s %-10s failed: %s\n", shape.to_string().c_str(),
                    config_text(config).c_str(), error.what());
        continue;
      }
      const double gbps = workload.decode_bytes() / decode.median_ms / 1e6;
      const double append_gbps = workload.append_bytes() / append.median_ms / 1e6;
      const int splits = workload.splits(options);
      std::printf("%-40s %-10s %6d %9.4f %9.0f %11.4f %9.0f\n", shape.to_string().c_str(),
                  config_text(config).c_str(), splits, decode.median_ms, gbps, append.median_ms,
                  append_gbps);
      std::fflush(stdout);
      json::Value row = shape_json(info, shape);
      row.set("config", config_text(config));
      row.set("splits", splits);
      row.set("decode_ms", decode.median_ms);
      row.set("decode_min_ms", decode.min_ms);
      row.set("decode_bytes", workload.decode_bytes());
      row.set("decode_gbps", gbps);
      row.set("append_tokens", workload.chunk_tokens());
      row.set("append_ms", append.median_ms);
      row.set("append_gbps", append_gbps);
      rows.push_back(row);
    }
  }
  if (!grid.json.empty()) json::write_file(grid.json, rows);
  return 0;
}

int run_decode_tune(const Arguments& arguments) {
  const DecodeGrid grid = parse_grid(arguments);
  if (!grid.shapes.empty() && grid.shapes.front().prefill) {
    throw UsageError(
        "--prefill: bench --decode times paged prefill; tune --decode has nothing to "
        "tune there (its kernels take the attention tuner's configs)");
  }
  if (!gpu_or_message("tune")) return 1;
  device::use_primary_context();
  const device::DeviceInfo& info = device::cached_device_info(device::current_device());
  std::printf("%s\n", info.to_string().c_str());
  std::printf("%-40s %-10s %9s %12s %9s %12s %8s\n", "problem", "config", "heuristic", "ms", "best",
              "ms", "gain");
  json::Value rows = json::Value::array();
  device::Stream stream;
  for (const DecodeShape& shape : grid.shapes) {
    DecodeWorkload workload(shape, std::min(grid.append_tokens, 4096), stream.get());
    const int most =
        std::min(paged::kMaxSplits,
                 std::max(1, (shape.seq + paged::kMinSplitTokens - 1) / paged::kMinSplitTokens));
    for (const PagedDecodeConfig& config : configs_of(grid, shape, info)) {
      PagedDecodeOptions options;
      options.config = config;
      const int heuristic = workload.splits(options);
      double heuristic_ms = 0, best_ms = 0;
      int best = 0;
      json::Value times = json::Value::object();
      for (int splits = 1; splits <= most; splits = splits < 8 ? splits + 1 : splits * 3 / 2) {
        options.num_splits = splits;
        double ms = 0;
        try {
          ms = time_on_stream([&](CUstream s) { workload.decode(s, options); }, stream.get(), 2,
                              grid.repeats)
                   .median_ms;
        } catch (const Error& error) {
          std::fprintf(stderr, "%s %s splits %d: %s\n", shape.to_string().c_str(),
                       config_text(config).c_str(), splits, error.what());
          continue;
        }
        std::fprintf(stderr, "  %s %s splits %d: %.4f ms\n", shape.to_string().c_str(),
                     config_text(config).c_str(), splits, ms);
        times.set(std::to_string(splits), ms);
        if (best == 0 || ms < best_ms) best = splits, best_ms = ms;
      }
      options.num_splits = heuristic;
      heuristic_ms = time_on_stream([&](CUstream s) { workload.decode(s, options); }, stream.get(),
                                    2, grid.repeats)
                         .median_ms;
      std::printf("%-40s %-10s %9d %12.4f %9d %12.4f %7.1f%%\n", shape.to_string().c_str(),
                  config_text(config).c_str(), heuristic, heuristic_ms, best, best_ms,
                  100.0 * (heuristic_ms / best_ms - 1.0));
      std::fflush(stdout);
      json::Value row = json::Value::object();
      row.set("problem", shape.to_string());
      row.set("config", config_text(config));
      row.set("heuristic_splits", heuristic);
      row.set("heuristic_ms", heuristic_ms);
      row.set("best_splits", best);
      row.set("best_ms", best_ms);
      row.set("ms_by_splits", times);
      rows.push_back(row);
    }
  }
  if (!grid.json.empty()) json::write_file(grid.json, rows);
  return 0;
}

}  // namespace intfa::cli
