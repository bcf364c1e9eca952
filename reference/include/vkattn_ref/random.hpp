// Deterministic random data for tests and the tool: a fixed seed per case, so a
// failure reproduces exactly. Never zeros: kernels that ignore their input
// must not pass by accident.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

namespace vkattn::ref {

// splitmix64: small, fast, and the same sequence on every platform.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed * 0x9E3779B97F4A7C15ull + 0xD1B54A32D192ED03ull) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return (next() >> 11) * 0x1.0p-53; }                 // [0, 1)
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  uint32_t below(uint32_t n) { return static_cast<uint32_t>(uniform() * n); }   // [0, n)
  double normal() {                                                         // Box-Muller
    double u = uniform(), v = uniform();
    return std::sqrt(-2.0 * std::log(1.0 - u)) * std::cos(6.283185307179586 * v);
  }

 private:
  uint64_t state_;
};

// n values uniform in [-amplitude, amplitude], none exactly zero.
std::vector<double> random_values(Rng& rng, std::size_t n, double amplitude = 1.0);
// A random permutation of [0, n).
std::vector<uint32_t> random_permutation(Rng& rng, uint32_t n);

}  // namespace vkattn::ref
