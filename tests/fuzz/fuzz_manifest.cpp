// libFuzzer target: the deployment-bundle manifest parser on arbitrary text. It must return a
// manifest or throw ManifestError, never read outside its input (ASan) nor reach undefined
// behaviour (UBSan); a manifest it accepts must survive writing and reading back unchanged.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "cache/bundle.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  intfa::cache::Manifest manifest;
  try {
    manifest = intfa::cache::Manifest::parse(text);
  } catch (const intfa::cache::ManifestError&) {
    return 0;
  }
  if (!(intfa::cache::Manifest::parse(manifest.to_json().dump(2)) == manifest)) __builtin_trap();
  return 0;
}
