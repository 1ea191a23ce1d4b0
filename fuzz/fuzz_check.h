// FUZZ_CHECK: a property of a fuzz target. Unlike assert() it is never compiled out, and a
// failure aborts with the condition, so libFuzzer saves the input as a crash.
#ifndef GRAIL_FUZZ_FUZZ_CHECK_H_
#define GRAIL_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(condition)                                                                 \
  do {                                                                                        \
    if (!(condition)) {                                                                       \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK failed: %s\n", __FILE__, __LINE__, #condition); \
      std::abort();                                                                           \
    }                                                                                         \
  } while (false)

#endif  // GRAIL_FUZZ_FUZZ_CHECK_H_
