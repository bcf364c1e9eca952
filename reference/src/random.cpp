#include "vkattn_ref/random.hpp"

#include <numeric>

namespace vkattn::ref {

std::vector<double> random_values(Rng& rng, std::size_t n, double amplitude) {
  std::vector<double> v(n);
  for (auto& x : v) {
    do x = rng.uniform(-amplitude, amplitude);
    while (x == 0.0);
  }
  return v;
}

std::vector<uint32_t> random_permutation(Rng& rng, uint32_t n) {
  std::vector<uint32_t> p(n);
  std::iota(p.begin(), p.end(), 0u);
  for (uint32_t i = n; i > 1; --i) std::swap(p[i - 1], p[rng.below(i)]);
  return p;
}

}  // namespace vkattn::ref
