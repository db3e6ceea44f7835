#!/usr/bin/env bash
# Builds Switchyard with the CUDA backend on a machine with an NVIDIA GPU and runs
# what needs the GPU: the `cuda`-labelled tests, the conformance harness on the
# cuda backend, the embedded model on the GPU and on the CPU in f32, f16 and
# bf16, a calibration of the cuda kernels, the routing regret of the GPU's plans
# and the report page of the GPU run. Logs go to $OUT (or ./cuda-device-out); the
# last lines printed are a summary.
#
# Usage: scripts/cuda_device.sh [--full] [--e2e]
#   --full also runs the whole ctest suite; --e2e also runs the end-to-end
#   figures of docs/benchmarks.md section 13 (the llama3-8b and llama3-1b shapes
#   in bf16, with and without --admit-precision-trades, and in the q4_k_m
#   layout; prompt 512, 128 generated tokens) and the copy peer they divide by.
# BENCH_FILTER narrows the CUDA benchmarks (default: all of them, "Cuda").
# WERROR=OFF builds without -Werror (a newer compiler than CI's may warn where CI's
# does not).
# GoogleTest comes from the system, or from a source tree at .gtest-src (copy
# /usr/src/googletest there on a machine without the package). Google Benchmark
# comes from the system, or from an installed copy at .bench-prefix (include/ and
# lib/x86_64-linux-gnu/ as a Debian package lays them out); without either, the
# CUDA benchmarks are not built. The report page's charts need Chart.js: from the
# system (libjs-chart.js), or a copy at .chartjs/chart.min.js.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-$PWD/cuda-device-out}
mkdir -p "$out"
build=build/cuda-device
summary=()
step() {  # step NAME COMMAND...: runs it with its log in $out/NAME.log
  local name=$1
  shift
  local start=$SECONDS
  "$@" >"$out/$name.log" 2>&1
  local rc=$?
  summary+=("$(printf '%-24s exit %-3s %4ss' "$name" "$rc" "$((SECONDS - start))")")
  return $rc
}

nvidia-smi >"$out/nvidia-smi.log" 2>&1
gtest=()
[[ -d .gtest-src ]] && gtest=(-DSWITCHYARD_GTEST_SOURCE_DIR="$PWD/.gtest-src")
bench=(-DSWITCHYARD_BUILD_BENCHMARKS=OFF)
if [[ -d .bench-prefix ]]; then
  bench=(-DSWITCHYARD_BUILD_BENCHMARKS=ON
         -Dbenchmark_DIR="$PWD/.bench-prefix/lib/x86_64-linux-gnu/cmake/benchmark")
  export LD_LIBRARY_PATH="$PWD/.bench-prefix/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
elif [[ -f /usr/include/benchmark/benchmark.h ]]; then
  bench=(-DSWITCHYARD_BUILD_BENCHMARKS=ON)
fi
charts=()
[[ -f .chartjs/chart.min.js ]] && charts=(-DSWITCHYARD_CHARTJS="$PWD/.chartjs/chart.min.js")
step configure cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DSWITCHYARD_WERROR="${WERROR:-ON}" -DSWITCHYARD_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  "${gtest[@]}" "${bench[@]}" "${charts[@]}"
step build cmake --build "$build" -j "$(nproc)"
tool=$build/tools/switchyard/switchyard
step ctest-cuda ctest --test-dir "$build" -L cuda --output-on-failure
step verify-cuda "$tool" verify --backend cuda --no-record
for t in f32 f16 bf16; do
  for b in cuda cpu; do
    step "run-$t-$b" "$tool" run --backend "$b" --model-type "$t" --prompt-tokens 64 --tokens 32
  done
done
step run-mix-auto "$tool" run --prompt-tokens 64 --tokens 32
# Calibration on the GPU at the plans' shapes, then the router's regret on the
# GPU's plans without and with that profile.
step calibrate-cuda "$tool" calibrate --backend cuda --graph llama,block,mlp \
  --budget-s "${CALIBRATE_BUDGET_S:-60}" --out "$out/cuda-profile.json" --plot "$out/cuda-plots"
step regret-cuda "$tool" regret --backend cuda --calibration "$out/cuda-profile.json"
# The report page of the embedded model on the GPU, with device times per node.
step report-cuda "$tool" report --backend cuda --device-profile \
  --calibration "$out/cuda-profile.json" --out "$out/report-cuda.html"
if [[ -x $build/bench/switchyard_bench ]]; then
  step bench-cuda "$build/bench/switchyard_bench" --benchmark_filter="${BENCH_FILTER:-Cuda}" \
    --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
fi
full=0 e2e=0
for arg in "$@"; do
  case $arg in
    --full) full=1 ;;
    --e2e) e2e=1 ;;
    *) echo "unknown argument $arg" >&2 ;;
  esac
done
if ((full)); then
  step ctest-all ctest --test-dir "$build" -j "$(nproc)" --output-on-failure
fi
if ((e2e)); then
  for shape in llama3-8b llama3-1b; do
    for type in bf16 bf16-trades mix; do
      extra=()
      [[ $type == bf16-trades ]] && extra=(--admit-precision-trades)
      step "run-e2e-$shape-$type" "$tool" run --synthetic "$shape" --backend cuda \
        --model-type "${type%-trades}" --prompt-tokens 512 --tokens 128 "${extra[@]}"
    done
  done
  if [[ -x $build/bench/switchyard_bench ]]; then
    step bench-copy "$build/bench/switchyard_bench" --benchmark_filter=CudaCopy \
      --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
  fi
fi
{
  printf '%s\n' "${summary[@]}"
  grep -h "tests passed\|tests failed" "$out"/ctest-*.log
  tail -n 1 "$out/verify-cuda.log"
  grep -h "regret" "$out/regret-cuda.log" | tail -n 12
  [[ -f $out/bench-cuda.log ]] && grep "_median" "$out/bench-cuda.log"
  [[ -f $out/bench-copy.log ]] && grep "_median" "$out/bench-copy.log"
  for f in "$out"/run-*.log; do
    printf '%s: ' "$(basename "$f" .log)"
    grep -h "tokens/s\|backend " "$f" | tr '\n' ' '
    echo
  done
} | tee "$out/summary.log"
