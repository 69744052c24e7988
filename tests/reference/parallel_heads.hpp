// Runs a function over index ranges on all cores: the references are exact but must also finish at
// sequence lengths of 16k, and the random inputs of a B=4 H=32 N=16k problem are ~800 M values.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <thread>
#include <vector>

namespace intfa::reference {

// body(chunk, begin, end) for the chunks [chunk * chunk_size, ...) of [0, count), on all cores.
template <typename Body>
void for_each_chunk_in_parallel(std::size_t count, std::size_t chunk_size, Body&& body) {
  const std::size_t chunks = (count + chunk_size - 1) / chunk_size;
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t chunk = next++; chunk < chunks; chunk = next++) {
      const std::size_t begin = chunk * chunk_size;
      body(chunk, begin, std::min(count, begin + chunk_size));
    }
  };
  const std::size_t threads = std::max<std::size_t>(
      1, std::min<std::size_t>(chunks, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (std::size_t i = 1; i < threads; ++i) pool.emplace_back(worker);
  worker();
  for (std::thread& thread : pool) thread.join();
}

// body(batch, head, first_row, end_row) for disjoint row ranges covering every row.
template <typename Body>
void for_each_row_block_in_parallel(int batch, int heads, int rows, Body&& body) {
  constexpr int kRowsPerBlock = 32;
  const int blocks_per_head = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  const std::size_t total = static_cast<std::size_t>(batch) * heads * blocks_per_head;
  for_each_chunk_in_parallel(total, 1, [&](std::size_t index, std::size_t, std::size_t) {
    const int block = static_cast<int>(index % blocks_per_head);
    const int head = static_cast<int>((index / blocks_per_head) % heads);
    const int b = static_cast<int>(index / (static_cast<std::size_t>(blocks_per_head) * heads));
    body(b, head, block * kRowsPerBlock, std::min(rows, (block + 1) * kRowsPerBlock));
  });
}

}  // namespace intfa::reference
