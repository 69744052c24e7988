// PLACEHOLDER: replaced by the cache implementation.
#include "cache/entry_format.hpp"
namespace intfa::cache {
std::vector<char> encode_entry(const CacheKey&, const nvrtc::Cubin&) { throw EntryError("todo"); }
nvrtc::Cubin decode_entry(const std::vector<char>&, const CacheKey&) { throw EntryError("todo"); }
}  // namespace intfa::cache
