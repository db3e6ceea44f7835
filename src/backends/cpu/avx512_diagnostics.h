// GCC 12's AVX-512 intrinsic headers build some results from a deliberately
// undefined vector (_mm512_undefined_*), which its uninitialised-use analysis
// reports once the intrinsics are inlined. The warning is about the header, not
// the kernels, so the AVX-512 and AMX kernel files silence it by including this
// first (clang has no such analysis). Diagnostic pragmas hold to the end of the
// file that includes them: include it only from a kernel .cpp file (or from a
// header that only those include), never from a header portable code includes.
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
