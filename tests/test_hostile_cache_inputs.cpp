// Hostile host-side inputs to write_kv_cache and PagedKvCache, generated
// from a fixed seed as test_hostile_inputs.cpp does for paged attention:
// random valid writes, cache configurations and application chunks, each
// broken in one random way, must be refused with a vkattn::Error naming what
// is wrong (the writes recorded into real, submitted command buffers, their
// views in canary arenas).
#include <optional>

#include "hostile_inputs_fixture.hpp"

namespace vkattn::test {
namespace {

using ref::Rng;

// ---- write_kv_cache ----

TEST_F(HostileInputs, WriteKvCacheArguments) {
  Outcomes out("write_kv_cache");
  run_cases(3'000'000, 4000, [&](uint64_t seed, VkCommandBuffer cmd) {
    Rng r = case_rng(seed);
    rewind();
    const uint32_t ci = r.below(static_cast<uint32_t>(caches_.size()));
    const bool app_cache = r.below(3) == 0;
    PagedKvCache* cache = app_cache ? app_caches_[ci].get() : caches_[ci].get();
    const KvCacheConfig& cfg = configs_[ci];
    const int64_t n = r.below(8) == 0 ? 0 : 1 + r.below(12), H = cfg.num_kv_heads, D = cfg.head_size;
    const DType dt = pick(r, {DType::f16, DType::bf16, DType::f32});
    TensorView key = place_view(r, arena(r), dt, {n, H, D}, "key");
    TensorView value = r.below(4) == 0 ? key : place_view(r, arena(r), dt, {n, H, D}, "value");   // inputs may share bytes
    TensorView slots = place_view(r, arena(r), pick(r, {DType::i32, DType::i64}), {n}, "slot_mapping");
    out.expect_error(seed, {"valid write", {kNoCommandBuffer}}, [&] { write_kv_cache(ctx(), *cache, key, value, slots, VK_NULL_HANDLE); });

    const bool binds = n > 0;
    const std::vector<ViewRule> rules = {{"key", {DType::f16, DType::bf16, DType::f32}, {n, H, D}, false, binds, true},
                                         {"value", {dt}, {n, H, D}, false, binds},
                                         {"slot_mapping", {DType::i64, DType::i32}, {n}, false, binds}};
    bool null_cmd = false;
    std::optional<Expect> e;
    while (!e) {
      const uint32_t what = r.below(8);
      if (what < 6) {
        const uint32_t i = r.below(3);
        e = break_view(r, "write_kv_cache", rules[i], i == 0 ? key : i == 1 ? value : slots, foreign_->ref());
      } else if (what == 6) {
        if (app_cache && n > 0 && r.below(2)) {   // an input over the memory of the cache it writes
          const uint32_t i = r.below(3);
          e = onto_cache(r, i == 0 ? key : i == 1 ? value : slots, rules[i].name, ci);
        } else if (r.below(2)) {
          value.dtype = pick(r, {DType::f16, DType::bf16, DType::f32});
          if (value.dtype != key.dtype) e = Expect{"value dtype other than key's", {"write_kv_cache: value has dtype"}};
        } else {
          cache = foreign_caches_[ci].get();
          e = Expect{"foreign cache", {"write_kv_cache: the cache belongs to another Context"}};
        }
      } else {
        null_cmd = true;
        e = Expect{"null command buffer", {kNoCommandBuffer}};
      }
    }
    out.expect_error(seed, *e, [&] { write_kv_cache(ctx(), *cache, key, value, slots, null_cmd ? VK_NULL_HANDLE : cmd); });
  });
  out.report();
}

// ---- PagedKvCache: configurations and the application's chunks ----

TEST_F(HostileInputs, CacheConfigs) {
  Outcomes out("PagedKvCache");
  const uint64_t budget = ctx().capabilities().device_local_budget_bytes;
  run_cases(4'000'000, 2000, [&](uint64_t seed, VkCommandBuffer) {
    Rng r = case_rng(seed);
    KvCacheConfig c = random_cache_config(r);
    if (r.below(100) == 0) {   // now and then, the unbroken config itself
      try {
        PagedKvCache ok(ctx(), c);
      } catch (const std::exception& e) {
        out.fail(seed, "valid config", std::string("refused: ") + e.what());
      }
    }
    std::optional<Expect> e;
    while (!e) {
      switch (r.below(11)) {
        case 0: c.num_blocks = 0; e = Expect{"num_blocks", {"num_blocks = 0"}}; break;
        case 1:
          c.block_size = pick<uint32_t>(r, {0, 1025, 4096, 0xFFFFFFFFu});
          e = Expect{"block_size", {"block_size = " + std::to_string(c.block_size)}};
          break;
        case 2:
          c.num_kv_heads = pick<uint32_t>(r, {0, 1025, 0xFFFFFFFFu});
          e = Expect{"num_kv_heads", {"num_kv_heads = " + std::to_string(c.num_kv_heads)}};
          break;
        case 3:
          c.head_size = pick<uint32_t>(r, {0, 8, 24, 100, 272, 512, 0xFFFFFFF0u});
          e = Expect{"head_size", {"head_size = " + std::to_string(c.head_size)}};
          break;
        case 4:
          c.dtype = bad_dtype(r, {DType::f16, DType::bf16, DType::fp8_e4m3, DType::fp8_e5m2});
          e = Expect{"dtype", {"dtype = "}};
          break;
        case 5:
          c.layout = static_cast<KvLayout>(pick<uint32_t>(r, {3, 7, 0xFFFFFFFFu}));
          e = Expect{"layout", {"layout = KvLayout("}};
          break;
        case 6:
          c.k_scale = pick(r, {0.0f, -1.0f, kNaN, kInf, -kInf, 1e-40f, 5e-39f});   // tiny: 1 / scale is inf
          e = Expect{"k_scale", {"k_scale = "}};
          break;
        case 7:
          c.v_scale = pick(r, {0.0f, -0.0f, -1e-3f, kNaN, kInf, 1e-45f, 1e-39f});
          e = Expect{"v_scale", {"v_scale = "}};
          break;
        case 8:   // 2^31 slots or more
          c.num_blocks = static_cast<uint32_t>(std::min<uint64_t>(0xFFFFFFFFu, (1ull << 31) / c.block_size + 1 + r.below(1000)));
          e = Expect{"slots", {"num_blocks * block_size"}};
          break;
        case 9:   // far more than the device has (valid otherwise: refused before anything is allocated)
          if (!budget) break;
          c.block_size = 1024;
          c.num_kv_heads = 64;
          c.head_size = 256;
          c.num_blocks = static_cast<uint32_t>(std::min<uint64_t>((1ull << 31) / 1024 - 1, 4 * budget / (2ull * 1024 * 64 * 256 * dtype_size(c.dtype)) + 1));
          if (2ull * c.num_blocks * 1024 * 64 * 256 * dtype_size(c.dtype) <= 2 * budget) break;
          e = Expect{"over budget", {"blocks take", "use fewer blocks"}};
          break;
        default:   // several fields at once: any of them may be named first
          c.block_size = 0;
          c.head_size = 7;
          c.dtype = static_cast<DType>(99);
          e = Expect{"several fields", {"PagedKvCache: "}};
          break;
      }
    }
    out.expect_error(seed, *e, [&] { PagedKvCache bad(ctx(), c); });
  });
  out.report();
}

TEST_F(HostileInputs, ApplicationCacheChunks) {
  Outcomes out("PagedKvCache over chunks");
  run_cases(5'000'000, 2000, [&](uint64_t seed, VkCommandBuffer) {
    Rng r = case_rng(seed);
    rewind();
    KvCacheConfig c = random_cache_config(r);
    c.num_blocks = 1 + r.below(10);
    const uint64_t block_bytes = uint64_t(c.block_size) * c.num_kv_heads * c.head_size * dtype_size(c.dtype);
    const uint32_t per = 1 + r.below(c.num_blocks);
    std::vector<KvCacheChunk> chunks;
    CanaryArena& a = *arenas_[0];
    for (uint32_t first = 0; first < c.num_blocks; first += per) {
      KvCacheChunk k;
      k.num_blocks = std::min(per, c.num_blocks - first);
      for (bool is_v : {false, true}) {
        const VkDeviceSize at = a.place(k.num_blocks * block_bytes, 16, is_v ? "V chunk" : "K chunk");
        if (r.below(4) == 0) (is_v ? k.v_address : k.k_address) = a.address() + at;   // a bare address
        else (is_v ? k.v_buffer : k.k_buffer) = a.ref(), (is_v ? k.v_offset : k.k_offset) = at;
      }
      chunks.push_back(k);
    }
    if (r.below(50) == 0) {
      try {
        PagedKvCache ok(ctx(), c, chunks);
      } catch (const std::exception& e) {
        out.fail(seed, "valid chunks", std::string("refused: ") + e.what());
      }
    }
    const uint32_t n = static_cast<uint32_t>(chunks.size());
    const uint32_t i = r.below(n);
    const std::string at = "chunk " + std::to_string(i);
    KvCacheChunk& ch = chunks[i];
    const bool v = r.below(2);
    BufferRef& buf = v ? ch.v_buffer : ch.k_buffer;
    VkDeviceSize& offset = v ? ch.v_offset : ch.k_offset;
    VkDeviceAddress& address = v ? ch.v_address : ch.k_address;
    const std::string part = v ? "V" : "K";
    std::optional<Expect> e;
    while (!e) {
      switch (r.below(12)) {
        case 0: chunks.clear(); e = Expect{"no chunks", {"0 chunks given"}}; break;
        case 1: chunks.resize(65, chunks[0]); e = Expect{"65 chunks", {"65 chunks given"}}; break;
        case 2: ch.num_blocks = 0; e = Expect{"empty chunk", {at + " holds 0 blocks"}}; break;
        case 3:
          if (n < 3 || i == 0 || i + 1 == n || ch.num_blocks == 1) break;
          ch.num_blocks += r.below(2) ? 1 : -1;
          e = Expect{"uneven chunk", {at + " holds", "as chunk 0"}};
          break;
        case 4:
          if (n < 2) break;
          chunks.back().num_blocks = chunks[0].num_blocks + 1 + r.below(3);
          e = Expect{"long last chunk", {"the last chunk holds"}};
          break;
        case 5:
          c.num_blocks += r.below(2) || c.num_blocks == 1 ? 1 + r.below(5) : -1;
          e = Expect{"block count", {"the chunks hold", "config.num_blocks"}};
          break;
        case 6:
          if (!buf.buffer) break;
          offset = pick<VkDeviceSize>(r, {buf.size - ch.num_blocks * block_bytes + 16 * (1 + r.below(4)), buf.size + 16,
                                          ~VkDeviceSize(15)});
          e = Expect{"past the buffer", {at + "'s " + part + " blocks need " + std::to_string(ch.num_blocks * block_bytes) +
                                         " bytes from byte " + std::to_string(offset) + ", past the end of a buffer of"}};
          break;
        case 7:
          if (!buf.buffer) break;
          buf = foreign_->ref();
          e = Expect{"foreign buffer", {at + "'s " + part + " buffer belongs to another Context"}};
          break;
        case 8:
          buf = {};
          address = 0;
          offset = 0;
          e = Expect{"no memory", {at + " has no " + part + " buffer or address"}};
          break;
        case 9:
          if (buf.buffer) break;
          offset = 16 * (1 + r.below(4));
          e = Expect{"offset without buffer", {at + "'s " + part + " offset is"}};
          break;
        case 10:
          if (buf.buffer) offset += pick<VkDeviceSize>(r, {2, 4, 8});
          else address += pick<VkDeviceAddress>(r, {1, 4, 8});
          e = Expect{"misaligned", {at + "'s " + part + " address", "is not a multiple of 16 bytes"}};
          break;
        default: {   // two chunks' blocks (or a chunk's K and V) in the same bytes
          KvCacheChunk& other = chunks[r.below(n)];
          const bool ov = r.below(2);
          if (&other == &ch && ov == v) break;
          buf = ov ? other.v_buffer : other.k_buffer;
          offset = ov ? other.v_offset : other.k_offset;
          address = ov ? other.v_address : other.k_address;
          e = Expect{"overlapping chunks", {"overlap"}};
          break;
        }
      }
    }
    out.expect_error(seed, *e, [&] { PagedKvCache bad(ctx(), c, chunks); });
  });
  out.report();
}

}  // namespace
}  // namespace vkattn::test
