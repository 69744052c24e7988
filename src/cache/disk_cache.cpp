// PLACEHOLDER: replaced by the cache implementation.
#include "cache/disk_cache.hpp"
namespace intfa::cache {
std::optional<std::filesystem::path> DiskCache::default_directory() { return std::nullopt; }
DiskCache::DiskCache(std::filesystem::path directory) : directory_(std::move(directory)) {}
std::filesystem::path DiskCache::entry_path(const CacheKey& key) const { return directory_ / key.hex(); }
std::optional<nvrtc::Cubin> DiskCache::load(const CacheKey&) { return std::nullopt; }
void DiskCache::store(const CacheKey&, const nvrtc::Cubin&, const render::KernelSpec&) {}
bool DiskCache::writable() const { return false; }
std::vector<EntryInfo> DiskCache::list() const { return {}; }
VerifyReport DiskCache::verify() const { return {}; }
ClearReport DiskCache::clear(bool) { return {}; }
}  // namespace intfa::cache
