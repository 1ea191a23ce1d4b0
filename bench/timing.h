// Small timing helpers shared by the bench harnesses that print JSON lines.
#ifndef GRAIL_BENCH_TIMING_H_
#define GRAIL_BENCH_TIMING_H_

#include <algorithm>
#include <chrono>
#include <vector>

namespace grail::bench {

inline double Micros(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

// The q-quantile of `v` (nearest rank below), q in [0, 1]; v must not be empty.
inline double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * (v.size() - 1))];
}

}  // namespace grail::bench

#endif  // GRAIL_BENCH_TIMING_H_
