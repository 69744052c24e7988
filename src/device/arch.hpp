// The GPU targets intfa compiles for. Each is an NVRTC --gpu-architecture value.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace intfa::device {

enum class Arch { kSm80, kSm86, kSm89, kSm90a };

const std::vector<Arch>& all_archs();
std::string arch_name(Arch arch);  // "sm_90a"
int arch_sm_number(Arch arch);     // 90: the SM field NVRTC writes into the cubin's ELF header
std::optional<Arch> parse_arch(std::string_view name);

// The most shared memory one block may opt in to on every GPU of this arch: 163 KiB on sm_80
// (A100), 99 KiB on sm_86 and sm_89, 227 KiB on sm_90a (CUDA C++ Programming Guide, table
// "Technical Specifications per Compute Capability"). For choosing kernels without a GPU
// (precompile); with one, the device's own CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
// is the authority.
int default_max_shared_bytes(Arch arch);

// The target for a device of this compute capability. sm_87 runs sm_86 code and 8.x devices of
// later minors run their nearest lower target; 9.0 gets sm_90a (wgmma, setmaxnreg). Anything else
// throws Unsupported saying what is supported and that INTFA_ARCH can pick a target.
Arch arch_for_compute_capability(int major, int minor);

// INTFA_ARCH if set (throws InvalidArgument naming the variable when malformed), else nullopt.
std::optional<Arch> arch_override_from_env();

}  // namespace intfa::device
