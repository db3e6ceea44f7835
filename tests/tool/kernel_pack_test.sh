#!/usr/bin/env bash
# Kernel packs through the tool: --kernel-pack on any command (before or after its
# name), SWITCHYARD_KERNEL_PACKS, the mask hiding pack kernels, verify and the
# ledger treating them as built-ins, and refused packs as clear errors.
# Usage: kernel_pack_test.sh SWITCHYARD EXAMPLE_PACK TEST_PACK_DIR
set -uo pipefail
tool=${1:?usage: kernel_pack_test.sh SWITCHYARD EXAMPLE_PACK TEST_PACK_DIR}
pack=${2:?}
faults=${3:?}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
kernel=gelu_erf_f32__cpu_pack_fast

source "$(dirname "$0")/expect.sh"

export SWITCHYARD_THREADS=2
unset SWITCHYARD_KERNEL_PACKS SWITCHYARD_MASK_KERNELS

expect 0 "coverage with a pack before the command" -- \
  "$tool" --kernel-pack "$pack" coverage --op gelu_erf --backend cpu
contains out "$kernel \[pack:fast-gelu, unverified\]" "the pack's kernel is a sibling with its source"
contains err "kernel pack fast-gelu from" "loading a pack says so on stderr"
expect 0 "coverage with a pack after the command" -- \
  "$tool" coverage --op gelu_erf --backend cpu --kernel-pack "$pack"
contains out "$kernel" "the option works after the command's name"
expect 0 "coverage --json names the declaration site" -- \
  "$tool" coverage --op gelu_erf --json --kernel-pack "$pack"
contains out "fast_gelu.json kernels\[0\]" "the site is the manifest entry"
expect 0 "SWITCHYARD_KERNEL_PACKS" -- \
  env SWITCHYARD_KERNEL_PACKS="$pack" "$tool" coverage --op gelu_erf --backend cpu
contains out "$kernel" "the environment loads the pack"

expect 0 "the mask hides pack kernels" -- \
  env SWITCHYARD_MASK_KERNELS=cpu:gelu_erf:f32 "$tool" coverage --op gelu_erf --kernel-pack "$pack"
lacks out "$kernel" "a masked pack kernel is not in the table"

expect 0 "verify checks the pack's claim" -- \
  "$tool" verify --op gelu_erf --backend cpu --ledger "$work/ledger.json" --kernel-pack "$pack"
contains out "$kernel" "verify lists the pack kernel"
grep -- "$kernel" "$work/out" | grep -q "pass" || {
  echo "FAIL: the pack kernel does not pass verification"
  failures=$((failures + 1))
}
# --unverified lists every claim the ledger does not back (the other ops' too, so
# it exits 1); the pack's, verified above, is not among them.
expect 1 "a verified pack claim is not unverified" -- \
  "$tool" verify --unverified --op gelu_erf --backend cpu --ledger "$work/ledger.json" \
  --kernel-pack "$pack"
lacks out "$kernel" "the ledger backs the pack's claim"
expect 1 "an unverified pack claim is listed" -- \
  "$tool" verify --unverified --op gelu_erf --backend cpu --ledger "$work/empty.json" \
  --kernel-pack "$pack"
contains out "$kernel" "a fresh ledger lists the pack's claim"

expect 2 "a pack whose claim differs from its manifest" -- \
  "$tool" coverage --kernel-pack "$faults/sy_pack_claim_differs.so"
contains err "precision: manifest says" "the refusal names the field"
expect 1 "a pack that crashes while registering" -- \
  "$tool" coverage --kernel-pack "$faults/sy_pack_crash.so"
contains err "crashed while registering" "the crash is reported, not suffered"
expect 2 "a missing pack" -- "$tool" coverage --kernel-pack "$work/none.so"
expect 1 "a pack for another ABI in SWITCHYARD_KERNEL_PACKS" -- \
  env SWITCHYARD_KERNEL_PACKS="$faults/sy_pack_wrong_abi.so" "$tool" coverage
contains err "SWITCHYARD_KERNEL_PACKS: .*ABI 42" "the refusal names the variable and the ABI"

if [[ $failures -ne 0 ]]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all kernel-pack tool checks passed"
