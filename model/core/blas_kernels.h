// Start-up check of the BLAS kernels LibTorch's matrix products run on.
//
// Debian's OpenBLAS (0.3.21) picks its kernels by CPU model at load time and falls back to
// its oldest x86-64 ones ("Prescott", SSE3) on models newer than it knows, such as Xeons of
// 2023 on (Sapphire and Emerald Rapids): the matrix products then run 2 to 5 times slower
// than the CPU can (docs/BENCHMARKS-log.md, "BLAS kernels"). OpenBLAS reads OPENBLAS_CORETYPE
// only when it loads, before main(), so the fix is to start again with it set.
#ifndef GRAIL_MODEL_CORE_BLAS_KERNELS_H_
#define GRAIL_MODEL_CORE_BLAS_KERNELS_H_

#include <string>

namespace grail {

// The OpenBLAS kernel family in use ("" when the BLAS is not OpenBLAS), and the one this CPU
// should use ("" when none is better).
std::string BlasKernels();
std::string PreferredBlasKernels();

// Call first in main(): when OpenBLAS runs kernels older than the CPU supports and the user
// has not chosen (OPENBLAS_CORETYPE unset), re-executes the program with OPENBLAS_CORETYPE
// naming the CPU's kernels (SkylakeX with AVX-512, Haswell with AVX2 and FMA). Returns when
// nothing needs doing or the re-execution failed; then nothing has changed.
void UseFastestBlasKernels(char** argv);

}  // namespace grail

#endif  // GRAIL_MODEL_CORE_BLAS_KERNELS_H_
