#include "spec/seq_bucket.hpp"

#include <algorithm>

namespace intfa::tune {

int seq_bucket(int seq_q, int seq_kv) {
  const int longest = std::max(seq_q, seq_kv);
  int bucket = kMinSeqBucket;
  while (bucket < longest && bucket < kMaxSeqBucket) bucket *= 2;
  return bucket;
}

bool is_seq_bucket(int value) {
  return value >= kMinSeqBucket && value <= kMaxSeqBucket && (value & (value - 1)) == 0;
}

}  // namespace intfa::tune
