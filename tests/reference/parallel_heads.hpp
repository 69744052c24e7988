// Runs a function over the query rows of every (batch, head) on all cores, in blocks of rows:
// the references are exact but must also finish at sequence lengths of 16k.
#pragma once

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace intfa::reference {

// body(batch, head, first_row, end_row) for disjoint row ranges covering every row.
template <typename Body>
void for_each_row_block_in_parallel(int batch, int heads, int rows, Body&& body) {
  constexpr int kRowsPerBlock = 32;
  const int blocks_per_head = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  const long long total = static_cast<long long>(batch) * heads * blocks_per_head;
  std::atomic<long long> next{0};
  auto worker = [&] {
    for (long long index = next++; index < total; index = next++) {
      const int block = static_cast<int>(index % blocks_per_head);
      const int head = static_cast<int>((index / blocks_per_head) % heads);
      const int b = static_cast<int>(index / (static_cast<long long>(blocks_per_head) * heads));
      body(b, head, block * kRowsPerBlock, std::min(rows, (block + 1) * kRowsPerBlock));
    }
  };
  const long long threads =
      std::max(1LL, std::min<long long>(total, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (long long i = 1; i < threads; ++i) pool.emplace_back(worker);
  worker();
  for (std::thread& thread : pool) thread.join();
}

}  // namespace intfa::reference
