// The hostile host-input tests' fixture: caches of a few random geometries
// (of their own, of another Context, and over the application's memory),
// canary arenas for the views, another Context, and the loop that records
// generated cases into real command buffers and checks the canaries after
// each submission.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "hostile_views.hpp"
#include "vk_test.hpp"

namespace vkattn::test {

constexpr uint64_t kCasesPerSubmission = 250;

class HostileInputs : public VkTest {
 protected:
  void SetUp() override {
    VkTest::SetUp();
    other_ = std::make_unique<Context>(test_options());
    arenas_.push_back(std::make_unique<CanaryArena>(ctx(), 8 << 20, 11));
    arenas_.push_back(std::make_unique<CanaryArena>(ctx(), 8 << 20, 12));
    foreign_ = std::make_unique<CanaryArena>(*other_, 8 << 20, 13);
    cache_arena_ = std::make_unique<CanaryArena>(ctx(), 8 << 20, 14);
    ref::Rng r(2024);
    for (int i = 0; i < 4; ++i) {
      const KvCacheConfig c = random_cache_config(r);
      configs_.push_back(c);
      caches_.push_back(std::make_unique<PagedKvCache>(ctx(), c));
      foreign_caches_.push_back(std::make_unique<PagedKvCache>(*other_, c));
      // The same geometry over the application's memory: one chunk of K and one of V in cache_arena_.
      const uint64_t bytes = uint64_t(c.num_blocks) * c.block_size * c.num_kv_heads * c.head_size * dtype_size(c.dtype);
      KvCacheChunk chunk{.k_buffer = cache_arena_->ref(), .v_buffer = cache_arena_->ref(), .num_blocks = c.num_blocks};
      chunk.k_offset = cache_arena_->place(bytes, 16, "K chunk");
      chunk.v_offset = cache_arena_->place(bytes, 16, "V chunk");
      app_caches_.push_back(std::make_unique<PagedKvCache>(ctx(), c, std::span<const KvCacheChunk>(&chunk, 1)));
    }
  }
  void TearDown() override {
    if (cache_arena_) arenas_.push_back(std::move(cache_arena_));
    for (const auto& a : arenas_)
      if (std::string s = a->check(true); !s.empty()) ADD_FAILURE() << "at the end: " << s;
    caches_.clear();
    foreign_caches_.clear();
    app_caches_.clear();
    arenas_.clear();
    cache_arena_.reset();
    foreign_.reset();
    if (other_)
      for (const auto& m : other_->validation_messages()) ADD_FAILURE() << "validation error (other Context): " << m;
    other_.reset();
    VkTest::TearDown();
  }

  // Runs `count` generated cases, case(seed, cmd), into command buffers that
  // are submitted every kCasesPerSubmission cases; then checks the canaries.
  template <class F>
  void run_cases(uint64_t first_seed, uint64_t count, F&& one_case) {
    for (uint64_t i = 0; i < count; i += kCasesPerSubmission) {
      try {
        ctx().submit_and_wait([&](VkCommandBuffer cmd) {
          for (uint64_t j = i; j < std::min(count, i + kCasesPerSubmission); ++j) one_case(first_seed + j, cmd);
        });
      } catch (const std::exception& e) {
        ADD_FAILURE() << "the submission of cases " << first_seed + i << "+ failed: something was dispatched: " << e.what();
      }
      for (const auto* a : {arenas_[0].get(), arenas_[1].get(), cache_arena_.get()})
        if (std::string s = a->check(); !s.empty()) ADD_FAILURE() << "after cases " << first_seed + i << "+: " << s;
    }
  }
  CanaryArena& arena(ref::Rng& r) { return *arenas_[r.below(static_cast<uint32_t>(arenas_.size()))]; }
  void rewind() {
    for (auto& a : arenas_) a->rewind();
  }

  std::unique_ptr<Context> other_;
  std::vector<std::unique_ptr<CanaryArena>> arenas_;   // where views are placed
  std::unique_ptr<CanaryArena> cache_arena_;            // app_caches_' chunks: views land there only on purpose
  std::unique_ptr<CanaryArena> foreign_;
  std::vector<KvCacheConfig> configs_;
  // Per geometry: a cache of its own, one of another Context, one over the application's memory.
  std::vector<std::unique_ptr<PagedKvCache>> caches_, foreign_caches_, app_caches_;

  // Moves `v` onto the K or V chunk of an application's cache (geometry i).
  Expect onto_cache(ref::Rng& r, TensorView& v, const std::string& name, std::size_t i) {
    const KvCacheChunk& ch = app_caches_[i]->chunk(0);
    const VkDeviceSize es = dtype_size(v.dtype);
    v.buffer = cache_arena_->ref();
    v.offset = (r.below(2) ? ch.k_offset : ch.v_offset) / es * es + es * r.below(8);
    return {name + " over the cache", {" " + name + " (bytes", "overlaps", "the cache's"}};
  }
};

}  // namespace vkattn::test
