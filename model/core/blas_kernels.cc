#include "model/core/blas_kernels.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace grail {
namespace {

// OpenBLAS's generic and pre-AVX2 x86 kernel families: what it reports on an unknown model.
bool OlderThanHaswell(const std::string& core) {
  for (const char* old :
       {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Atom", "Sandybridge", "Katmai",
        "Coppermine", "Northwood", "Banias", "Opteron", "Opteron_SSE3", "Barcelona", "Bobcat"}) {
    if (strcasecmp(core.c_str(), old) == 0) return true;
  }
  return false;
}

}  // namespace

std::string BlasKernels() {
  using CoreName = char* (*)();
  const auto corename = reinterpret_cast<CoreName>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  const char* name = corename != nullptr ? corename() : nullptr;
  return name != nullptr ? name : "";
}

std::string PreferredBlasKernels() {
#if defined(__x86_64__) && defined(__GNUC__)
  const std::string core = BlasKernels();
  if (core.empty() || !OlderThanHaswell(core)) return "";
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl")) {
    return "SkylakeX";
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
#endif
  return "";
}

void UseFastestBlasKernels(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return;  // the user's choice, or done
  const std::string preferred = PreferredBlasKernels();
  if (preferred.empty()) return;
  setenv("OPENBLAS_CORETYPE", preferred.c_str(), 1);
  execv("/proc/self/exe", argv);
  unsetenv("OPENBLAS_CORETYPE");  // exec failed: carry on as started
}

}  // namespace grail
