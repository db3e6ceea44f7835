#!/usr/bin/env bash
# Checks the SIMD kernel objects of a build for code that could run on a CPU without
# the instruction set they were compiled for (CMakeLists.txt says which flags each
# file suffix gets; the callers check the running CPU for exactly those).
#
#   1. An inline function or template instantiation from a shared header (a weak
#      symbol) that a SIMD object compiles with instructions beyond the x86-64
#      baseline: the linker keeps one copy of each weak symbol for the whole
#      program, and it may keep this one for portable callers.
#   2. Instructions of an extension a file's suffix does not allow: AVX-512 or
#      VNNI in an *_avx2 object, AVX-512, BF16 or AMX in an *_avxvnni one (its
#      VNNI is the VEX form), VNNI, BF16 or AMX in an *_avx512 object, BF16 or AMX in an
#      *_avx512vnni one, VNNI or BF16 in an *_amx one, VNNI or AMX-INT8 in an
#      *_amxbf16 one.
#
# Usage: scripts/check_isa.sh [build dir, default build/dev]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/dev}
objects=$(find "$build" -path "*/CMakeFiles/*" \( -name '*_avx*.cpp.o' -o -name '*_amx*.cpp.o' \) | sort)
if [[ -z "$objects" ]]; then
  echo "check_isa: no SIMD objects under $build (build it first)" >&2
  exit 1
fi

# Mnemonics outside the x86-64 baseline: every VEX/EVEX-encoded instruction starts
# with 'v'; the rest are the bit-manipulation extensions.
beyond_baseline='^(v[a-z0-9]+|popcnt|lzcnt|tzcnt|andn|bextr|blsi|blsmsk|blsr|bzhi|pdep|pext|sarx|shlx|shrx|rorx|movbe)$'
avx512_only='%zmm|%k[1-7]|%[xy]mm(1[6-9]|2[0-9]|3[01])'
vnni='^(vpdpbusds?|vpdpwssds?)$'
bf16='^(vdpbf16ps|vcvtne2ps2bf16|vcvtneps2bf16)$'
amx='^(ldtilecfg|sttilecfg|tilerelease|tilezero|tileloadd|tileloaddt1|tilestored|tdpb[su][su]d|tdpbf16ps)$'

failed=0
report() {
  echo "check_isa: $1" >&2
  failed=1
}

for object in $objects; do
  file=$(basename "$object" .o)
  listing=$(objdump -d --no-show-raw-insn "$object")
  # 1. Weak code symbols and the mnemonics in their bodies.
  for symbol in $(nm --defined-only "$object" | awk '$2 == "W" { print $3 }'); do
    body=$(awk -v s="<$symbol>:" '$2 == s { on = 1; next } on && /^$/ { exit } on' <<<"$listing")
    extra=$(awk -F'\t' 'NF >= 2 { split($2, m, " "); print m[1] }' <<<"$body" |
      grep -E "$beyond_baseline" | sort -u | tr '\n' ' ' || true)
    if [[ -n "$extra" ]]; then
      report "$file: shared inline code $(c++filt "$symbol") compiled with $extra"
    fi
  done
  # 2. Extensions the suffix does not allow.
  mnemonics=$(awk -F'\t' 'NF >= 2 { split($2, m, " "); print m[1] }' <<<"$listing" | sort -u)
  case "$file" in
    *_avx2.cpp)
      if grep -qE "$avx512_only" <<<"$listing"; then report "$file: AVX-512 registers in an AVX2 file"; fi
      if grep -qE "$amx" <<<"$mnemonics"; then report "$file: AMX in an AVX2 file"; fi
      # objdump shows AVX-VNNI's VEX forms as "{vex} vpdpbusd".
      if grep -qE "$vnni|^[{]vex[}]$" <<<"$mnemonics"; then report "$file: VNNI in an AVX2 file"; fi
      ;;
    *_avxvnni.cpp)
      if grep -qE "$avx512_only" <<<"$listing"; then report "$file: AVX-512 registers in an AVX-VNNI file"; fi
      if grep -qE "$bf16|$amx" <<<"$mnemonics"; then report "$file: BF16 or AMX in an AVX-VNNI file"; fi
      ;;
    *_avx512.cpp)
      if grep -qE "$vnni|$bf16|$amx" <<<"$mnemonics"; then report "$file: VNNI, BF16 or AMX in an AVX-512 base file"; fi
      ;;
    *_avx512vnni.cpp)
      if grep -qE "$bf16|$amx" <<<"$mnemonics"; then report "$file: BF16 or AMX in an AVX512_VNNI file"; fi
      ;;
    *_amx.cpp)
      if grep -qE "$vnni|$bf16|tdpbf16ps" <<<"$mnemonics"; then report "$file: VNNI or BF16 in an AMX-INT8 file"; fi
      ;;
    *_amxbf16.cpp)
      if grep -qE "$vnni|tdpb[su][su]d" <<<"$mnemonics"; then report "$file: VNNI or AMX-INT8 in an AMX-BF16 file"; fi
      ;;
  esac
done
if [[ $failed -ne 0 ]]; then
  echo "check_isa: failed (see CMakeLists.txt on SIMD file suffixes)" >&2
  exit 1
fi
echo "check_isa: $(wc -w <<<"$objects") SIMD objects clean"
