// Where the benchmark harnesses find the paper's data sets: $GRAIL_DATA_DIR, or
// ../shared/data beside the source tree.
#ifndef GRAIL_BENCH_DATA_DIR_H_
#define GRAIL_BENCH_DATA_DIR_H_

#include <cstdlib>
#include <filesystem>
#include <string>

namespace grail {

inline std::string BenchmarkDataDir() {
  const char* env = std::getenv("GRAIL_DATA_DIR");
  if (env != nullptr) return env;
  return (std::filesystem::path(GRAIL_SOURCE_DIR) / ".." / "shared" / "data").string();
}

}  // namespace grail

#endif  // GRAIL_BENCH_DATA_DIR_H_
