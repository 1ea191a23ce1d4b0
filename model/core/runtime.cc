#include "model/core/runtime.h"

#include <ATen/Parallel.h>
#include <malloc.h>

#include <algorithm>

namespace grail {

void KeepFreedMemoryForReuse() {
  // Blocks come from the heap, never from mmap: glibc caps the mmap threshold at 32 MiB, and
  // the per-edge tensors of a batch of large subgraphs (fb237_v2 on) exceed it, so each
  // step mapped, faulted in and unmapped them again (59k page faults/s, half the CPU time in
  // the kernel). A trim threshold of 1 GiB keeps the heap's free top instead of returning it
  // at once.
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

void UseServingAllocator() {
  // Few arenas, so that memory freed by one thread is reused by the others; and, as above,
  // blocks from the heap, kept when freed: a forward over a whole graph of 12k entities
  // allocates tens of MB of [V, 64] tensors, and with glibc's defaults each forward faulted
  // them in again (a fifth of a loaded server's CPU time in the kernel's page faults). What
  // a burst leaves free goes back when it ends (ReleaseFreedMemory, the engine's).
  mallopt(M_ARENA_MAX, 2);
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

void ReleaseFreedMemory() { malloc_trim(0); }

void SetComputeThreads(int threads) { at::set_num_threads(std::max(1, threads)); }

}  // namespace grail
