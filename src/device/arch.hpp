// The GPU targets intfa compiles for. Each is an NVRTC --gpu-architecture value.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace intfa::device {

// The portable (mma.sync) kernels compile for every target; the Hopper kernel (wgmma, TMA,
// setmaxnreg) for sm_90a alone. sm_100a, sm_120 and sm_121 (Blackwell) and sm_87 (Orin) are
// compiled in the tests but have not run on a GPU (docs/gpu-targets.md).
enum class Arch { kSm80, kSm86, kSm87, kSm89, kSm90a, kSm100a, kSm120, kSm121 };

const std::vector<Arch>& all_archs();
std::string arch_name(Arch arch);  // "sm_90a"
int arch_sm_number(Arch arch);     // 90: the SM field NVRTC writes into the cubin's ELF header
std::optional<Arch> parse_arch(std::string_view name);
// Whether kernels of this arch can overlap the one before them on a stream (griddepcontrol and
// programmatic stream serialization: sm_90 and later).
bool has_programmatic_dependent_launch(Arch arch);
// Every target's name for messages: "sm_80, sm_86, ... or sm_121" (`conjunction` = "or").
std::string arch_names(std::string_view conjunction = "or");

// The most shared memory one block may opt in to on every GPU of this arch: 163 KiB on sm_80
// (A100) and sm_87 (Orin), 99 KiB on sm_86, sm_89, sm_120 and sm_121, 227 KiB on sm_90a and
// sm_100a (CUDA C++ Programming Guide, table "Technical Specifications per Compute Capability").
// For choosing kernels without a GPU (precompile); with one, the device's own
// CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN is the authority.
int default_max_shared_bytes(Arch arch);

// The target for a device of this compute capability: 8.0, 8.6, 8.7, 8.9 and 12.0, 12.1 their own
// target, 9.0 sm_90a (wgmma, setmaxnreg) and 10.0 sm_100a. Other 8.x and 12.x minors run the
// nearest lower target of their major (a cubin for sm_XY loads on X.Z for Z >= Y); 10.x minors
// above 0 cannot (sm_100a code loads on 10.0 alone). Anything else throws Unsupported saying what
// is supported and that INTFA_ARCH can pick a target.
Arch arch_for_compute_capability(int major, int minor);

// INTFA_ARCH if set (throws InvalidArgument naming the variable when malformed), else nullopt.
std::optional<Arch> arch_override_from_env();

}  // namespace intfa::device
