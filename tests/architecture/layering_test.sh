#!/usr/bin/env bash
# The layers' include paths enforce the architecture (Note [Layers the compiler
# enforces] in cmake/layers.cmake): a file of a layer compiles against the headers
# of its own layer and those below, and an include of anything above fails.
#
# Usage: layering_test.sh <c++ compiler> <layer>=<include dirs, :-separated>...
# (tests/CMakeLists.txt passes each layer's include path as its sources see it).
set -euo pipefail
compiler=$1
shift
declare -A dirs
for arg in "$@"; do dirs[${arg%%=*}]=${arg#*=}; done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0

# compiles <layer> <include line>: 0 when a file of <layer> holding only that
# include compiles.
compiles() {
  local flags=()
  IFS=':' read -r -a list <<<"${dirs[$1]}"
  for d in "${list[@]}"; do [[ -n $d ]] && flags+=("-I$d"); done
  printf '%s\n' "$2" >"$tmp/probe.cpp"
  "$compiler" -std=c++20 -fsyntax-only "${flags[@]}" "$tmp/probe.cpp" 2>"$tmp/err"
}

expect() {  # expect <ok|fails> <layer> <include line>
  if compiles "$2" "$3"; then result=ok; else result=fails; fi
  if [[ $result != "$1" ]]; then
    echo "layering: in layer $2, '$3' $result; expected it to be $1" >&2
    [[ $result == fails ]] && sed 's/^/    /' "$tmp/err" >&2
    failed=1
  fi
}

# Down and sideways-within-a-layer edges build.
expect ok core '#include "switchyard/kernel.h"'
expect ok dispatch '#include "switchyard/binding_table.h"'
expect ok dispatch '#include "switchyard/cost.h"'
expect ok plan '#include "switchyard/registry.h"'
expect ok exec '#include "switchyard/bucket_plan.h"'
expect ok backend_cpu '#include "switchyard/quant_blocks.h"'
expect ok backend_cpu '#include "backends/cpu/kernel_util.h"'
expect ok models '#include "switchyard/backends.h"'
expect ok models '#include "switchyard/executor.h"'
# Upward edges do not.
expect fails core '#include "switchyard/cost.h"'
expect fails cost '#include "switchyard/binding_table.h"'
expect fails dispatch '#include "switchyard/backends.h"'
expect fails dispatch '#include "switchyard/registry.h"'
expect fails registry '#include "switchyard/plan.h"'
expect fails plan '#include "switchyard/executor.h"'
expect fails exec '#include "switchyard/llama.h"'
expect fails quant '#include "switchyard/binding_table.h"'
expect fails formats '#include "switchyard/quant.h"'
expect fails backend_cpu '#include "switchyard/backends.h"'
expect fails backend_cpu '#include "switchyard/plan.h"'
expect fails backend_null '#include "switchyard/quant_blocks.h"'
expect fails verify '#include "switchyard/llama.h"'
# The CUDA toolkit is private to src/backends/cuda/ (linked privately there), but
# an include path cannot keep it so where the toolkit's headers sit in a system
# folder (/usr/local/include on some machines): no file outside that folder may
# include a CUDA header.
root=$(cd "$(dirname "$0")/../.." && pwd)
cuda_header='#[[:space:]]*include[[:space:]]*[<"](cuda|cublas|cusparse|curand|nvrtc)[A-Za-z0-9_]*\.h'
leaks=$(grep -rlE "$cuda_header" "$root/src" "$root/include" "$root/tools" "$root/tests" \
          "$root/bench" "$root/fuzz" | grep -v "^$root/src/backends/cuda/" || true)
if [[ -n $leaks ]]; then
  echo "layering: CUDA headers included outside src/backends/cuda/:" >&2
  sed 's/^/    /' <<<"$leaks" >&2
  failed=1
fi
# Private headers stay in their layer.
expect fails exec '#include "plan/passes.h"'
expect fails backend_cpu '#include "verify/reference.h"'
expect fails models '#include "backends/cpu/kernel_util.h"'

if ((failed)); then exit 1; fi
echo "layering: every edge behaves"
