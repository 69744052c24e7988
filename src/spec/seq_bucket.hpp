// Sequence buckets: the one coarse measure of a problem's length that the tile-config heuristic,
// the tuner and the tuning database share (spec layer: attention/ and tune/ both read it).
#pragma once

namespace intfa::tune {

// max(seq_q, seq_kv) rounded up to a power of two and clamped to [kMinSeqBucket, kMaxSeqBucket],
// so 1..1024 -> 1024, 1025..2048 -> 2048, ..., 8193 and up -> 16384 ("16k+"). Rounding up means a
// tuning run at N = 4096 fills exactly the bucket of 4096.
constexpr int kMinSeqBucket = 1024;
constexpr int kMaxSeqBucket = 16384;
int seq_bucket(int seq_q, int seq_kv);
bool is_seq_bucket(int value);

}  // namespace intfa::tune
