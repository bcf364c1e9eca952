// `vkattn bench gather`: random 32 KiB blocks read from footprints of 1 to 64
// GiB, as the paged cache's kernels read its blocks (shaders/bench_gather.comp).
// It finds how the footprint's size, its allocations (chunk size, dedicated
// allocations) and the way a block is addressed (a table of chunk addresses
// as the cache has, precomputed addresses, bound buffers) change the read rate,
// with no attention kernel in the way. GB/s count the blocks' bytes.
#include <vkattn/vkattn.hpp>
#include <vkattn_ref/random.hpp>

#include <cstring>
#include <iostream>
#include <memory>
#include <optional>

#define VKATTN_BENCH_GATHER
#include "abi/bench.h"
#include "allocation.hpp"
#include "bench/suites.hpp"
#include "context_impl.hpp"
#include "dispatch.hpp"
#include "op_support.hpp"

namespace vkattn::tool {

namespace {

using detail::Allocation;

enum class Addressing { table, addresses, bound };

std::string addressing_name(Addressing a) {
  switch (a) {
    case Addressing::table: return "table";
    case Addressing::addresses: return "addresses";
    case Addressing::bound: return "bound";
  }
  return "?";
}

struct GatherConfig {
  uint64_t footprint = 0;     // bytes the random blocks are spread over
  uint64_t chunk_bytes = 0;   // per allocation (the last one may hold fewer blocks)
  bool dedicated = false;
  Addressing addressing = Addressing::table;
  bool operator==(const GatherConfig&) const = default;
};

constexpr uint32_t kBlockBytes = 32768;
constexpr uint32_t kBlockVec4 = kBlockBytes / 16;
constexpr uint32_t kIdSets = 4;   // repetitions rotate over this many random id lists

// Whole GiB or MiB, rounded (the cache's largest chunk is 4 GiB less one block).
std::string gib_text(uint64_t bytes) {
  const uint64_t MiB = 1ull << 20, GiB = 1ull << 30;
  return bytes >= GiB ? std::to_string((bytes + GiB / 2) / GiB) + " GiB" : std::to_string((bytes + MiB / 2) / MiB) + " MiB";
}

// The memory of the case being measured. Cases are measured one after another
// (verify, then the timed repetitions), and a footprint of up to 64 GiB can
// only be held once: each case's verify() takes the memory over for its
// configuration, freeing the previous one's.
class GatherMemory {
 public:
  GatherMemory(Context& ctx, uint32_t gathers) : ctx_(ctx), gathers_(gathers) {}
  GatherMemory(const GatherMemory&) = delete;
  GatherMemory& operator=(const GatherMemory&) = delete;
  ~GatherMemory() { release(); }

  uint32_t gathers() const { return gathers_; }

  void hold(const GatherConfig& cfg) {
    if (held_ && *held_ == cfg) return;
    release();
    auto& impl = ctx_.impl();
    blocks_per_chunk_ = static_cast<uint32_t>(cfg.chunk_bytes / kBlockBytes);
    const uint64_t blocks = cfg.footprint / kBlockBytes;
    const uint64_t n = (blocks + blocks_per_chunk_ - 1) / blocks_per_chunk_;
    for (uint64_t c = 0; c < n; ++c) {
      const uint64_t b = std::min<uint64_t>(blocks_per_chunk_, blocks - c * blocks_per_chunk_);
      chunks_.push_back(detail::allocate(impl, b * kBlockBytes, MemoryKind::device_local,
                                         "bench gather: chunk " + std::to_string(c),
                                         cfg.dedicated ? detail::Dedicated::yes : detail::Dedicated::no));
    }
    table_ = detail::allocate(impl, n * 8, MemoryKind::device_local_mapped, "bench gather: chunk table");
    for (uint64_t c = 0; c < n; ++c) static_cast<uint64_t*>(table_.mapped)[c] = chunks_[c].address;
    // Random blocks over the whole footprint, kIdSets lists of them.
    ref::Rng rng(blocks);
    ids_ = detail::allocate(impl, uint64_t(kIdSets) * gathers_ * 4, MemoryKind::device_local_mapped, "bench gather: block ids");
    addresses_ = detail::allocate(impl, uint64_t(kIdSets) * gathers_ * 8, MemoryKind::device_local_mapped, "bench gather: block addresses");
    id_list_.resize(size_t(kIdSets) * gathers_);
    for (size_t i = 0; i < id_list_.size(); ++i) {
      id_list_[i] = static_cast<uint32_t>(rng.below(blocks));
      static_cast<uint64_t*>(addresses_.mapped)[i] =
          chunks_[id_list_[i] / blocks_per_chunk_].address + uint64_t(id_list_[i] % blocks_per_chunk_) * kBlockBytes;
    }
    std::memcpy(ids_.mapped, id_list_.data(), id_list_.size() * 4);
    sums_ = detail::allocate(impl, uint64_t(gathers_) * 4, MemoryKind::device_local_mapped, "bench gather: sums");
    // The pattern, one chunk per submission.
    for (uint64_t c = 0; c < n; ++c) {
      abi::BenchGatherPush push{};
      push.chunk_table = table_.address;
      push.mode = abi::GATHER_MODE_FILL;
      push.fill_chunk = static_cast<uint32_t>(c);
      push.fill_vec4 = static_cast<uint32_t>(chunks_[c].size / 16);
      const uint64_t per_workgroup = 4ull * abi::BenchGatherSpec{}.GATHER_WORKGROUP_SIZE;
      ctx_.submit_and_wait([&](VkCommandBuffer cmd) { dispatch(cmd, push, (push.fill_vec4 + per_workgroup - 1) / per_workgroup, Addressing::table); });
    }
    held_ = cfg;
  }

  // One gather of id list `set`.
  void record(VkCommandBuffer cmd, const GatherConfig& cfg, uint32_t set) {
    abi::BenchGatherPush push{};
    push.chunk_table = table_.address;
    push.block_addresses = addresses_.address + uint64_t(set) * gathers_ * 8;
    push.mode = cfg.addressing == Addressing::table ? abi::GATHER_MODE_TABLE
                : cfg.addressing == Addressing::addresses ? abi::GATHER_MODE_ADDRESSES
                                                          : abi::GATHER_MODE_BOUND;
    push.blocks_per_chunk = blocks_per_chunk_;
    push.gathers = gathers_;
    dispatch(cmd, push, gathers_, cfg.addressing, uint64_t(set) * gathers_ * 4);
  }

  // Whether every block's sum is the pattern's (after record(set) ran).
  Verification check(uint32_t set) const {
    Verification v;
    v.pass = true;
    const auto* got = static_cast<const uint32_t*>(sums_.mapped);
    for (uint32_t w = 0; w < gathers_; ++w) {
      const uint32_t id = id_list_[size_t(set) * gathers_ + w], chunk = id / blocks_per_chunk_;
      const uint32_t word0 = (id % blocks_per_chunk_) * kBlockVec4 * 4;
      uint32_t want = 0;
      for (uint32_t j = 0; j < kBlockVec4 * 4; ++j) want += GATHER_PATTERN(chunk, word0 + j);
      if (got[w] != want) {
        v.pass = false;
        v.failure = "block " + std::to_string(w) + " (id " + std::to_string(id) + ") sums to " + std::to_string(got[w]) +
                    ", expected " + std::to_string(want);
        break;
      }
    }
    return v;
  }

  void poison_sums() { std::memset(sums_.mapped, 0xFF, sums_.size); }

 private:
  void dispatch(VkCommandBuffer cmd, abi::BenchGatherPush push, uint64_t workgroups, Addressing addressing, uint64_t ids_at = 0) {
    auto& impl = ctx_.impl();
    abi::BenchGatherSpec spec;
    spec.GATHER_BLOCK_VEC4 = kBlockVec4;
    const detail::Pipeline& p = impl.pipelines->get(
        {"bench_gather", ctx_.path_for("bench_gather"), detail::spec_words(spec), 3 + GATHER_BOUND_CHUNKS, sizeof(abi::BenchGatherPush)});
    detail::Grid g = detail::fold_grid(impl, workgroups, "bench gather");
    push.grid_x = g.x;
    std::vector<detail::BufferBinding> b = {{ids_.buffer, ids_at, uint64_t(gathers_) * 4}, {sums_.buffer, 0, sums_.size}};
    for (uint32_t c = 0; c < GATHER_BOUND_CHUNKS; ++c)
      b.push_back(addressing == Addressing::bound && c < chunks_.size() ? detail::BufferBinding{chunks_[c].buffer, 0, chunks_[c].size}
                                                                       : detail::placeholder_binding(impl));
    detail::record_dispatch(impl, cmd, p, b, &push, g, detail::ReportingOp::bench);
  }

  void release() {
    const auto& impl = ctx_.impl();
    for (auto& a : chunks_) detail::release(impl, a);
    chunks_.clear();
    for (Allocation* a : {&table_, &ids_, &addresses_, &sums_}) detail::release(impl, *a);
    held_.reset();
  }

  Context& ctx_;
  uint32_t gathers_;
  std::optional<GatherConfig> held_;
  std::vector<Allocation> chunks_;
  Allocation table_, ids_, addresses_, sums_;
  uint32_t blocks_per_chunk_ = 0;
  std::vector<uint32_t> id_list_;
};

}  // namespace

std::vector<BenchOp> gather_cases(Context& ctx, bool quick) {
  const auto& caps = ctx.capabilities();
  // The cache's chunks: the largest a binding can reach (PagedKvCache), whole blocks.
  const uint64_t max_chunk = ctx.impl().max_chunk_bytes() / kBlockBytes * kBlockBytes;
  const uint64_t MiB = 1ull << 20, GiB = 1ull << 30;
  const uint64_t read = quick ? 8 * MiB : GiB;   // read per repetition
  auto memory = std::make_shared<GatherMemory>(ctx, static_cast<uint32_t>(read / kBlockBytes));
  std::vector<BenchOp> ops;
  auto add = [&](uint64_t footprint, uint64_t chunk, bool dedicated, Addressing addressing) {
    chunk = std::min(chunk, max_chunk);
    const GatherConfig cfg{footprint, chunk, dedicated, addressing};
    const uint64_t chunks = (footprint + chunk - 1) / chunk;
    const std::string name = gib_text(footprint) + " in " + gib_text(chunk) + " chunks" + (dedicated ? " dedicated" : "") + ", " +
                             addressing_name(addressing);
    // What the case needs, with room for everything else on the device.
    if (caps.device_local_budget_bytes && footprint > caps.device_local_budget_bytes / 10 * 9) {
      std::cerr << "bench gather: skipping '" << name << "': " << footprint << " bytes exceed 90% of the device-local budget ("
                << caps.device_local_budget_bytes << ")\n";
      return;
    }
    if (addressing == Addressing::bound && chunks > GATHER_BOUND_CHUNKS) return;
    BenchOp op;
    op.info.name = name;
    op.info.params = {{"footprint", std::to_string(footprint)}, {"chunk_bytes", std::to_string(chunk)},
                      {"chunks", std::to_string(chunks)},       {"dedicated", dedicated ? "yes" : "no"},
                      {"addressing", addressing_name(addressing)}, {"block_bytes", std::to_string(kBlockBytes)},
                      {"gathers", std::to_string(memory->gathers())}, {"path", "universal"}};
    op.info.bytes = double(memory->gathers()) * kBlockBytes;
    op.info.bound = "memory";
    op.record = [memory, cfg](VkCommandBuffer cmd, uint32_t rep) { memory->record(cmd, cfg, rep % kIdSets); };
    op.verify = [&ctx, memory, cfg]() {
      memory->hold(cfg);
      memory->poison_sums();
      ctx.submit_and_wait([&](VkCommandBuffer cmd) { memory->record(cmd, cfg, 1); });
      return memory->check(1);
    };
    ops.push_back(std::move(op));
  };
  if (quick) {
    for (uint64_t f : {8 * MiB, 32 * MiB}) add(f, 4 * MiB, false, Addressing::table);
    add(32 * MiB, 4 * MiB, true, Addressing::table);
    add(32 * MiB, 4 * MiB, false, Addressing::addresses);
    add(32 * MiB, 4 * MiB, false, Addressing::bound);
    return ops;
  }
  // Where the rate falls, with the cache's allocations...
  for (uint64_t f : {1, 2, 4, 8, 16, 32, 64}) add(f * GiB, max_chunk, false, Addressing::table);
  // ...and what changes it at 32 GiB, where paged decode fell to 16% of copy.
  add(32 * GiB, GiB, false, Addressing::table);
  add(32 * GiB, 256 * MiB, false, Addressing::table);
  add(32 * GiB, max_chunk, true, Addressing::table);
  add(32 * GiB, max_chunk, false, Addressing::addresses);
  add(32 * GiB, max_chunk, false, Addressing::bound);
  add(4 * GiB, max_chunk, true, Addressing::table);
  return ops;
}

}  // namespace vkattn::tool
