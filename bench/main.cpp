// The benchmark program's entry point: Google Benchmark's usual main, after one
// adjustment to the process environment and the publication of the built-in table.
//
// OpenBLAS's worker threads keep spinning for about 2^28 cycles (a tenth of a second
// here) after each threaded call before they sleep. The GEMM benchmarks time the
// OpenBLAS peer alternately with the kernel under test, so on a machine whose cores
// the kernel's own threads fill, the peer's spinning workers took a core from the
// call timed right after it (the kernel's median fell from 0.84 to 0.41-0.59 of
// OpenBLAS between otherwise identical runs). OpenBLAS reads its spin time from
// OPENBLAS_THREAD_TIMEOUT once, when the library loads, before main runs; so when
// the variable is unset the program sets it to the smallest value OpenBLAS accepts
// (2^4 cycles) and starts itself again. OpenBLAS's own speed does not change (its
// workers are woken for each call either way); setting the variable explicitly keeps
// whatever value it names.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "switchyard/backends.h"

int main(int argc, char** argv) {
  if (std::getenv("OPENBLAS_THREAD_TIMEOUT") == nullptr) {
    setenv("OPENBLAS_THREAD_TIMEOUT", "4", 1);
    execv("/proc/self/exe", argv);
    std::perror("switchyard_bench: could not restart with OPENBLAS_THREAD_TIMEOUT set");
  }
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
