#include "device/arch.hpp"

#include "common/env.hpp"
#include "common/strings.hpp"
#include "intfa/errors.hpp"

namespace intfa::device {

const std::vector<Arch>& all_archs() {
  static const std::vector<Arch> archs = {Arch::kSm80, Arch::kSm86, Arch::kSm89, Arch::kSm90a};
  return archs;
}

std::string arch_name(Arch arch) {
  switch (arch) {
    case Arch::kSm80: return "sm_80";
    case Arch::kSm86: return "sm_86";
    case Arch::kSm89: return "sm_89";
    case Arch::kSm90a: return "sm_90a";
  }
  throw InternalError("unknown Arch value");
}

int arch_sm_number(Arch arch) {
  switch (arch) {
    case Arch::kSm80: return 80;
    case Arch::kSm86: return 86;
    case Arch::kSm89: return 89;
    case Arch::kSm90a: return 90;
  }
  throw InternalError("unknown Arch value");
}

std::optional<Arch> parse_arch(std::string_view name) {
  const std::string lowered = strings::to_lower(strings::trim(name));
  for (Arch arch : all_archs()) {
    if (lowered == arch_name(arch)) return arch;
  }
  if (lowered == "sm_90") return Arch::kSm90a;  // the only Hopper target we build
  return std::nullopt;
}

int default_max_shared_bytes(Arch arch) {
  constexpr int kKiB = 1024;
  switch (arch) {
    case Arch::kSm80:
      return 163 * kKiB;
    case Arch::kSm86:
      return 99 * kKiB;
    case Arch::kSm89:
      return 99 * kKiB;
    case Arch::kSm90a:
      return 227 * kKiB;
  }
  throw InternalError("unknown Arch value");
}

Arch arch_for_compute_capability(int major, int minor) {
  if (major == 8 && minor == 0) return Arch::kSm80;
  if (major == 8 && (minor == 6 || minor == 7)) return Arch::kSm86;
  if (major == 8 && minor == 9) return Arch::kSm89;
  if (major == 9 && minor == 0) return Arch::kSm90a;
  throw Unsupported("compute capability " + std::to_string(major) + "." + std::to_string(minor) +
                    " is not supported: intfa targets sm_80, sm_86 (and 8.7), sm_89 and sm_90a; "
                    "set INTFA_ARCH to one of them to compile anyway");
}

std::optional<Arch> arch_override_from_env() {
  const auto value = env::get("INTFA_ARCH");
  if (!value) return std::nullopt;
  const auto arch = parse_arch(*value);
  if (!arch) {
    throw InvalidArgument("INTFA_ARCH", "'" + *value + "'",
                          "expected one of sm_80, sm_86, sm_89, sm_90a");
  }
  return arch;
}

}  // namespace intfa::device
