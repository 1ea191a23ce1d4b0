// Compiling the operators' CPU loops for the widest vectors the CPU has: on x86-64 with GCC,
// each GRAIL_VECTOR_CLONES function is compiled for AVX-512, AVX2 and the baseline, the one
// to run picked at load time. Helpers of a cloned function are GRAIL_INLINE, so that they are
// compiled for the clone's ISA.
//
// Not under ThreadSanitizer: the clones' resolvers run while the dynamic loader relocates the
// program, before ThreadSanitizer's runtime is initialised, and instrumented they crash it
// (SIGSEGV in the resolver of TieRows, before main).
#ifndef GRAIL_MODEL_OPS_CPU_CLONES_H_
#define GRAIL_MODEL_OPS_CPU_CLONES_H_

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define GRAIL_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define GRAIL_VECTOR_CLONES
#endif
#define GRAIL_INLINE inline __attribute__((always_inline))

#endif  // GRAIL_MODEL_OPS_CPU_CLONES_H_
