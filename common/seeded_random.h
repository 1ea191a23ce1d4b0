// Deterministic pseudo-randomness that gives the same sequence on every platform and
// standard library (std::uniform_int_distribution and std::shuffle do not), so that a seed
// reproduces a split, a sampled neighbourhood or a set of negatives exactly.
#ifndef GRAIL_COMMON_SEEDED_RANDOM_H_
#define GRAIL_COMMON_SEEDED_RANDOM_H_

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

namespace grail {

// SplitMix64's finaliser: a bijective 64-bit mix, good enough to hash ids.
inline uint64_t MixBits(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// xoshiro256** seeded through SplitMix64. Not thread-safe; one per thread.
class SeededRandom {
 public:
  explicit SeededRandom(uint64_t seed) {
    for (uint64_t& word : state_) {
      seed += 0x9e3779b97f4a7c15ULL;
      word = MixBits(seed);
    }
  }

  uint64_t Next() {
    const uint64_t result = Rotl(state_[1] * 5, 7) * 9;
    const uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = Rotl(state_[3], 45);
    return result;
  }

  // Uniform in [0, n), unbiased (Lemire's multiply-and-reject). Requires n > 0.
  uint64_t Uniform(uint64_t n) {
    unsigned __int128 m = static_cast<unsigned __int128>(Next()) * n;
    uint64_t low = static_cast<uint64_t>(m);
    if (low < n) {
      const uint64_t threshold = -n % n;
      while (low < threshold) {
        m = static_cast<unsigned __int128>(Next()) * n;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }

  // Uniform in [0, 1) with 53 random bits.
  double UniformDouble() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

  // Fisher-Yates shuffle.
  template <typename T>
  void Shuffle(std::vector<T>& items) {
    for (size_t i = items.size(); i > 1; --i) {
      std::swap(items[i - 1], items[Uniform(i)]);
    }
  }

  // The generator's whole state, to checkpoint and restore a sequence mid-way.
  std::array<uint64_t, 4> state() const { return {state_[0], state_[1], state_[2], state_[3]}; }
  void set_state(const std::array<uint64_t, 4>& state) {
    for (int i = 0; i < 4; ++i) state_[i] = state[i];
  }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t state_[4];
};

}  // namespace grail

#endif  // GRAIL_COMMON_SEEDED_RANDOM_H_
