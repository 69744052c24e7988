#include "device/arch.hpp"

#include "common/env.hpp"
#include "common/strings.hpp"
#include "intfa/errors.hpp"

namespace intfa::device {
namespace {

// An arch-specific target ('a': wgmma, setmaxnreg; or sm_100a) loads on its own compute
// capability alone; the others on every later minor of their major.
bool arch_specific(Arch arch) {
  return arch == Arch::kSm90a || arch == Arch::kSm100a;
}

}  // namespace

const std::vector<Arch>& all_archs() {
  static const std::vector<Arch> archs = {Arch::kSm80,  Arch::kSm86,   Arch::kSm87,  Arch::kSm89,
                                          Arch::kSm90a, Arch::kSm100a, Arch::kSm120, Arch::kSm121};
  return archs;
}

std::string arch_name(Arch arch) {
  switch (arch) {
    case Arch::kSm80: return "sm_80";
    case Arch::kSm86: return "sm_86";
    case Arch::kSm87: return "sm_87";
    case Arch::kSm89: return "sm_89";
    case Arch::kSm90a: return "sm_90a";
    case Arch::kSm100a: return "sm_100a";
    case Arch::kSm120: return "sm_120";
    case Arch::kSm121: return "sm_121";
  }
  throw InternalError("unknown Arch value");
}

bool has_programmatic_dependent_launch(Arch arch) {
  return arch_sm_number(arch) >= 90;
}

int arch_sm_number(Arch arch) {
  switch (arch) {
    case Arch::kSm80: return 80;
    case Arch::kSm86: return 86;
    case Arch::kSm87: return 87;
    case Arch::kSm89: return 89;
    case Arch::kSm90a: return 90;
    case Arch::kSm100a: return 100;
    case Arch::kSm120: return 120;
    case Arch::kSm121: return 121;
  }
  throw InternalError("unknown Arch value");
}

std::optional<Arch> parse_arch(std::string_view name) {
  const std::string lowered = strings::to_lower(strings::trim(name));
  for (Arch arch : all_archs()) {
    if (lowered == arch_name(arch)) return arch;
  }
  // The only Hopper and datacenter-Blackwell targets we build.
  if (lowered == "sm_90") return Arch::kSm90a;
  if (lowered == "sm_100") return Arch::kSm100a;
  return std::nullopt;
}

std::string arch_names(std::string_view conjunction) {
  std::string names;
  const std::vector<Arch>& archs = all_archs();
  for (std::size_t i = 0; i < archs.size(); ++i) {
    if (i > 0) names += i + 1 == archs.size() ? " " + std::string(conjunction) + " " : ", ";
    names += arch_name(archs[i]);
  }
  return names;
}

int default_max_shared_bytes(Arch arch) {
  constexpr int kKiB = 1024;
  switch (arch) {
    case Arch::kSm80:
    case Arch::kSm87:
      return 163 * kKiB;
    case Arch::kSm86:
    case Arch::kSm89:
    case Arch::kSm120:
    case Arch::kSm121:
      return 99 * kKiB;
    case Arch::kSm90a:
    case Arch::kSm100a:
      return 227 * kKiB;
  }
  throw InternalError("unknown Arch value");
}

Arch arch_for_compute_capability(int major, int minor) {
  // The newest target of this major whose code loads on major.minor.
  std::optional<Arch> chosen;
  for (Arch arch : all_archs()) {
    const int number = arch_sm_number(arch);
    const int arch_major = number / 10;
    const int arch_minor = number % 10;
    if (arch_major != major) continue;
    if (arch_minor == minor || (!arch_specific(arch) && arch_minor < minor)) chosen = arch;
  }
  if (chosen) return *chosen;
  throw Unsupported("compute capability " + std::to_string(major) + "." + std::to_string(minor) +
                    " is not supported: intfa targets " + arch_names("and") +
                    " (8.x and 12.x devices run the nearest lower target of their major; "
                    "sm_90a and sm_100a code loads on 9.0 and 10.0 alone); set INTFA_ARCH to "
                    "one of them to compile anyway");
}

std::optional<Arch> arch_override_from_env() {
  const auto value = env::get("INTFA_ARCH");
  if (!value) return std::nullopt;
  const auto arch = parse_arch(*value);
  if (!arch) {
    throw InvalidArgument("INTFA_ARCH", "'" + *value + "'", "expected one of " + arch_names());
  }
  return arch;
}

}  // namespace intfa::device
