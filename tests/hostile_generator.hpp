// Random pieces the hostile-input tests build their cases from (a fixed seed
// per case, so that a failure names the case and reproduces alone): batch
// lengths of every kind a step may hold, cache geometries, values outside an
// enum, and the bookkeeping of what each generated case expected and got.
#pragma once
#include <gtest/gtest.h>
#include <vkattn/vkattn.hpp>
#include <vkattn_ref/random.hpp>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <iostream>
#include <limits>
#include <map>
#include <string>
#include <vector>

namespace vkattn::test {

// The generator of case `index`. Not ref::Rng(index): splitmix64 advances
// its state by the constant it multiplies the seed by, so Rng(i + 1) is
// Rng(i) one draw later, and consecutive cases would repeat each other's
// choices. A hashed seed starts each case somewhere unrelated.
inline ref::Rng case_rng(uint64_t index) { return ref::Rng(ref::Rng(index).next()); }

template <class T>
T pick(ref::Rng& r, std::initializer_list<T> values) {
  return values.begin()[r.below(static_cast<uint32_t>(values.size()))];
}

// A dtype outside `allowed`: another real one, or a value outside the enum.
inline DType bad_dtype(ref::Rng& r, const std::vector<DType>& allowed) {
  std::vector<DType> out;
  for (uint32_t v : {0u, 1u, 2u, 3u, 4u, 5u, 6u, 7u, 42u, 0x80000000u, 0xFFFFFFFFu}) {
    const DType t = static_cast<DType>(v);
    if (std::find(allowed.begin(), allowed.end(), t) == allowed.end()) out.push_back(t);
  }
  return out[r.below(static_cast<uint32_t>(out.size()))];
}

// Host lengths of a batch: decodes, prefills, chunked prefills, padding
// sequences (seq_len 0, with or without query tokens) and sequences with
// no new token, in random order.
struct Lengths {
  std::vector<int32_t> qsl{0}, lens;
  uint32_t num_seqs() const { return static_cast<uint32_t>(lens.size()); }
  uint32_t num_tokens() const { return static_cast<uint32_t>(qsl.back()); }
  uint32_t max_query_len() const {
    int32_t m = 0;
    for (std::size_t s = 0; s < lens.size(); ++s) m = std::max(m, qsl[s + 1] - qsl[s]);
    return static_cast<uint32_t>(m);
  }
  uint32_t max_seq_len() const {
    int32_t m = 0;
    for (int32_t l : lens) m = std::max(m, l);
    return static_cast<uint32_t>(m);
  }
  void add(uint32_t query_len, uint32_t seq_len) {
    qsl.push_back(qsl.back() + int32_t(query_len));
    lens.push_back(int32_t(seq_len));
  }
};

inline Lengths random_lengths(ref::Rng& r, uint32_t min_seqs, uint32_t max_seqs, uint32_t max_query, uint32_t max_len) {
  Lengths b;
  const uint32_t S = min_seqs + r.below(max_seqs - min_seqs + 1);
  for (uint32_t s = 0; s < S; ++s) {
    switch (r.below(8)) {
      case 0: case 1: case 2: b.add(1, 1 + r.below(max_len)); break;                // decode
      case 3: { const uint32_t q = 1 + r.below(max_query); b.add(q, q); break; }     // prefill
      case 4: case 5: {                                                            // chunked prefill
        const uint32_t q = 1 + r.below(max_query);
        b.add(q, q + r.below(max_len + 1));
        break;
      }
      case 6: b.add(r.below(3) ? 0 : std::min(2u, max_query), 0); break;           // padding
      default: b.add(0, r.below(max_len + 1)); break;                              // no new token
    }
  }
  return b;
}

// A small cache geometry: every layout and dtype, block sizes with and
// without powers of two.
inline KvCacheConfig random_cache_config(ref::Rng& r) {
  KvCacheConfig c;
  c.num_blocks = 8 + r.below(24);
  c.block_size = pick<uint32_t>(r, {1, 2, 3, 5, 7, 8, 16, 17, 32});
  c.num_kv_heads = 1 + r.below(3);
  c.head_size = pick<uint32_t>(r, {16, 32, 64});
  c.dtype = pick(r, {DType::f16, DType::bf16, DType::fp8_e4m3, DType::fp8_e5m2});
  c.layout = pick(r, {KvLayout::nhd, KvLayout::hnd, KvLayout::split});
  c.k_scale = static_cast<float>(r.uniform(0.01, 2));
  c.v_scale = static_cast<float>(r.uniform(0.01, 2));
  return c;
}

// What one generated case expects: a vkattn::Error whose message holds every
// fragment (the field's name, and what about it is wrong).
struct Expect {
  std::string kind;                    // the mutation, for the tally
  std::vector<std::string> fragments;
  std::vector<std::string> or_fragments = {};   // another acceptable message, when not empty
};

inline bool has_all(const std::string& what, const std::vector<std::string>& fragments) {
  for (const auto& f : fragments)
    if (what.find(f) == std::string::npos) return false;
  return true;
}

// Runs the generated cases' calls and keeps the tally; the first failures
// are reported in full (with the case's seed), the rest counted.
class Outcomes {
 public:
  explicit Outcomes(std::string suite) : suite_(std::move(suite)) {}
  template <class F>
  void expect_error(uint64_t seed, const Expect& e, F&& call) {
    ++counts_[e.kind];
    std::string problem;
    try {
      call();
      problem = "no error was thrown";
    } catch (const Error& err) {
      const std::string what = err.what();
      if (!has_all(what, e.fragments) && (e.or_fragments.empty() || !has_all(what, e.or_fragments))) {
        problem = "message '" + what + "' lacks one of:";
        for (const auto& f : e.fragments) problem += " '" + f + "'";
      }
    } catch (const std::exception& err) {
      problem = std::string("threw something other than vkattn::Error: ") + err.what();
    } catch (...) {
      problem = "threw something other than a std::exception";
    }
    if (!problem.empty()) fail(seed, e.kind, problem);
  }
  // Counts a case whose outcome the caller checks itself (then fail() if wrong).
  void count(const std::string& kind) { ++counts_[kind]; }
  void fail(uint64_t seed, const std::string& kind, const std::string& problem) {
    ++failures_;
    ++failed_[kind];
    if (failures_ <= 25) ADD_FAILURE() << suite_ << " case seed " << seed << " (" << kind << "): " << problem;
  }
  uint64_t cases() const {
    uint64_t n = 0;
    for (const auto& [k, c] : counts_) n += c;
    return n;
  }
  // The tally, on stdout (how many cases of each kind ran).
  void report() const {
    std::cout << "[ hostile  ] " << suite_ << ": " << cases() << " cases, " << failures_ << " failed;";
    for (const auto& [k, c] : counts_) std::cout << " " << k << " " << c << ";";
    std::cout << "\n";
    if (failures_ == 0) return;
    std::string kinds;
    for (const auto& [k, c] : failed_) kinds += " " + k + " " + std::to_string(c) + ";";
    ADD_FAILURE() << suite_ << ": " << failures_ << " failures (" << std::max<int64_t>(0, int64_t(failures_) - 25)
                  << " not shown), by kind:" << kinds;
  }

 private:
  std::string suite_;
  std::map<std::string, uint64_t> counts_, failed_;
  uint64_t failures_ = 0;
};

}  // namespace vkattn::test
