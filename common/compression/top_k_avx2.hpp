#pragma once
// Whether the top-k selection may compile AVX2 paths (x86-64 with GCC or Clang): the functions
// using them are marked target("avx2") and chosen at run time (detail::haveAvx2), so the binary
// stays baseline x86-64.
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
// AVX2 halves the instructions of the filtering pass, which is compute-bound with SSE2
// (measured: ~1.5x the time of a plain streaming read, ~1x with AVX2).
#define TERN_TOPK_AVX2 1
#endif
