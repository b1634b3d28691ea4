#ifndef ZBPP_COMMON_COUNTER_HASH_H_
#define ZBPP_COMMON_COUNTER_HASH_H_

#include <cstdint>

namespace zbpp {

/// The SplitMix64 finalizer (Steele, Lea, Flood, "Fast splittable
/// pseudorandom number generators", OOPSLA 2014): a bijective 64-bit mix;
/// SplitMix64(0) == 0xe220a8397b1dcdaf. Counter-based randomness built on
/// it is a pure function of its inputs, so processes that never talk agree
/// on the values (the sampler's rows; parameters' initial values).
constexpr uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// Folds `value` into `hash`: SplitMix64(hash ^ SplitMix64(value)). A key
/// (x1, ..., xk) hashes as HashCombine(...HashCombine(SplitMix64(x1), x2)...,
/// xk).
constexpr uint64_t HashCombine(uint64_t hash, uint64_t value) {
  return SplitMix64(hash ^ SplitMix64(value));
}

/// Maps a uniform 64-bit `hash` to [0, n) as (hash * n) >> 64 (Lemire's
/// multiply-shift: no division; bias below n / 2^64). n >= 1.
constexpr uint64_t UniformIndex(uint64_t hash, uint64_t n) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(hash) * n) >>
                               64);
}

}  // namespace zbpp

#endif  // ZBPP_COMMON_COUNTER_HASH_H_
