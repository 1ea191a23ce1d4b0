// Seconds on the steady clock since a point, for the timings reports and logs give.
#ifndef GRAIL_COMMON_ELAPSED_H_
#define GRAIL_COMMON_ELAPSED_H_

#include <chrono>

namespace grail {

inline double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace grail

#endif  // GRAIL_COMMON_ELAPSED_H_
