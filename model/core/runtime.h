// Process-wide settings of the code that runs models: LibTorch's threads per operator and how
// the allocator keeps freed memory. Callers set them at start-up (the tools, the server) or
// per phase (a trainer's threads); none includes LibTorch.
#ifndef GRAIL_MODEL_CORE_RUNTIME_H_
#define GRAIL_MODEL_CORE_RUNTIME_H_

namespace grail {

// Threads LibTorch uses inside one operator (matmuls, gathers). Callers that run several
// forwards in parallel set 1; a single forward at a time can use every core.
void SetComputeThreads(int threads);

// Keeps freed tensor memory in the process for reuse. Forwards allocate and free tens of MB
// per step; with glibc's defaults those blocks go back to the kernel (munmap) and are
// faulted in again on the next step, which measured 2.1x slower training on fb237_v1
// (18 s of 65 s in the kernel). Call once at start-up, before any thread starts.
void KeepFreedMemoryForReuse();

// The allocator settings of a long-running server, instead of KeepFreedMemoryForReuse():
// freed memory kept for reuse as there, with few malloc arenas, so that memory freed by one
// thread is reused by the others rather than kept per thread; the server returns what is
// free when a burst of work ends (ReleaseFreedMemory). Call once at start-up, before any
// thread starts.
void UseServingAllocator();

// Returns freed heap memory to the kernel (malloc_trim). For servers, when a burst of work
// ends; costs a few milliseconds with much memory free.
void ReleaseFreedMemory();

}  // namespace grail

#endif  // GRAIL_MODEL_CORE_RUNTIME_H_
