#include "backends/cpu/cpu_features.h"

#include <algorithm>
#include <array>
#include <string>
#include <string_view>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include <fmt/format.h>

#include "switchyard/environment.h"

namespace switchyard::cpu {
namespace {

// What SWITCHYARD_CPU_DISABLE may name.
constexpr std::array<std::string_view, 9> kDisableable = {
    "avx2",        "f16c",        "avx_vnni", "avx512", "avx512_vnni",
    "avx512_bf16", "avx512_vbmi", "gfni",     "amx"};

bool disabled(std::string_view list, std::string_view feature) {
  while (!list.empty()) {
    const auto comma = list.find(',');
    if (list.substr(0, comma) == feature) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

// An item the list may not hold is noted for check_environment(); the known
// features in the same list are still turned off.
void note_unknown_features(std::string_view list) {
  std::vector<std::string> unknown;
  while (!list.empty()) {
    const auto comma = list.find(',');
    const std::string_view item = list.substr(0, comma);
    if (!item.empty() &&
        std::find(kDisableable.begin(), kDisableable.end(), item) == kDisableable.end()) {
      unknown.push_back(fmt::format("'{}'", printable(item, 40)));
    }
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  if (!unknown.empty()) {
    note_environment_problem(EnvVar::kCpuDisable,
                             fmt::format("unknown CPU feature {} (known: {}); nothing else changes",
                                         fmt::join(unknown, ", "), fmt::join(kDisableable, ", ")));
  }
}

// Asks Linux for the AMX tile data state (XTILEDATA, state component 18) for this
// process; true when granted (or already granted). Elsewhere: false.
bool request_amx_tile_state() {
#if defined(__linux__) && defined(__x86_64__)
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}

CpuFeatures detect() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  // __builtin_cpu_supports also checks that the OS saves the wider registers.
  f.avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  // f16c from CPUID itself (leaf 1, ECX): clang's __builtin_cpu_supports does not
  // know it. Its registers are the ymm ones AVX2 already needs saved.
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  f.f16c = f.avx2 && __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
  f.avx512 = f.avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  f.avx512_vnni = f.avx512 && __builtin_cpu_supports("avx512vnni");
  f.avx512_bf16 = f.avx512 && __builtin_cpu_supports("avx512bf16");
  f.gfni = f.avx512 && __builtin_cpu_supports("gfni");
  f.avx512_vbmi = f.avx512 && __builtin_cpu_supports("avx512vbmi");
  // CPUID leaf 7: AMX-BF16 is EDX bit 22, AMX-TILE bit 24, AMX-INT8 bit 25.
  const bool leaf7 = __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) != 0;
  const bool amx_tile = f.avx512 && leaf7 && (edx & (1u << 24)) != 0;
  const bool amx_int8_cpuid = amx_tile && (edx & (1u << 25)) != 0;
  const bool amx_bf16_cpuid = amx_tile && (edx & (1u << 22)) != 0;
  // CPUID leaf 7, sub-leaf 1: AVX-VNNI is EAX bit 4 (its ymm state is AVX2's).
  f.avx_vnni =
      f.avx2 && __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) != 0 && (eax & (1u << 4)) != 0;
#else
  const bool amx_int8_cpuid = false;
  const bool amx_bf16_cpuid = false;
#endif
  bool amx_off = false;
  if (const char* env = read_environment(EnvVar::kCpuDisable)) {
    const std::string_view list(env);
    note_unknown_features(list);
    if (disabled(list, "avx2")) f = CpuFeatures{};
    if (disabled(list, "f16c")) f.f16c = false;
    if (disabled(list, "avx_vnni")) f.avx_vnni = false;
    if (disabled(list, "avx512")) {
      f.avx512 = f.avx512_vnni = f.avx512_bf16 = f.avx512_vbmi = f.gfni = false;
    }
    amx_off = disabled(list, "amx");
    if (disabled(list, "avx512_vnni")) f.avx512_vnni = false;
    if (disabled(list, "avx512_bf16")) f.avx512_bf16 = false;
    if (disabled(list, "avx512_vbmi")) f.avx512_vbmi = false;
    if (disabled(list, "gfni")) f.gfni = false;
  }
  // Asked only when the AMX siblings could be used at all, so a disabled or
  // missing AVX-512 never costs the process its tile state.
  const bool amx_wanted = (amx_int8_cpuid || amx_bf16_cpuid) && f.avx512 && !amx_off;
  const bool tiles_granted = amx_wanted && request_amx_tile_state();
  f.amx_int8 = tiles_granted && amx_int8_cpuid;
  f.amx_bf16 = tiles_granted && amx_bf16_cpuid && f.avx512_bf16;
  return f;
}

}  // namespace

std::string CpuFeatures::to_string() const {
  std::string text;
  auto add = [&](bool on, const char* name) {
    if (!on) return;
    if (!text.empty()) text += ' ';
    text += name;
  };
  add(avx2, "avx2");
  add(f16c, "f16c");
  add(avx_vnni, "avx_vnni");
  add(avx512, "avx512");
  add(avx512_vnni, "avx512_vnni");
  add(avx512_bf16, "avx512_bf16");
  add(avx512_vbmi, "avx512_vbmi");
  add(gfni, "gfni");
  add(amx_int8, "amx_int8");
  add(amx_bf16, "amx_bf16");
  return text.empty() ? "baseline" : text;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

}  // namespace switchyard::cpu
