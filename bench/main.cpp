// The benchmark program's entry point: Google Benchmark's usual main, after the
// publication of the built-in table. (The OpenBLAS peer runs on the backend's
// pool, one single-threaded call per thread, so no OpenBLAS worker spins between
// timed calls: Note [OpenBLAS on the backend's threads].)
#include <benchmark/benchmark.h>

#include <cstdio>

#include "switchyard/backends.h"

int main(int argc, char** argv) {
  // The benchmarks read the built-in table through current_table().
  if (!switchyard::install_builtin_table().is_ok()) {
    std::fputs("switchyard_bench: the built-in kernel table does not finalize\n", stderr);
    return 1;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
