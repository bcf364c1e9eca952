#include "schedule/paged_attention_schedule.hpp"

#include "abi/paged_attention.h"

#include <vkattn/error.hpp>

#include <algorithm>
#include <bit>
#include <string>

namespace vkattn::detail {

namespace {

[[noreturn]] void fail(const std::string& what) { throw Error("paged_attention: " + what); }

// What a plan's workspace may take: the options' budget, within the kernels'
// 2 GiB and the view the device binds at once.
uint64_t workspace_capacity(const ScheduleDevice& dev, const ScheduleProblem& p) {
  return std::min(p.workspace_bytes, max_workspace_bytes(dev.max_binding_bytes));
}

}  // namespace

ItemKeys::ItemKeys(const std::vector<int64_t>& keys) {
  for (int64_t k : keys) add(k, 1);
}

void ItemKeys::add(int64_t keys, uint64_t count) {
  if (!count) return;
  items += count;
  longest = std::max(longest, keys);
  total += keys * int64_t(count);
}

uint64_t partial_result_bytes(uint64_t num_tokens, uint32_t num_q_heads, uint32_t head_size, uint32_t segments) {
  return num_tokens * num_q_heads * segments * (uint64_t(head_size) + 2) * 4;
}

uint64_t split_workspace_bytes(uint64_t num_tokens, uint32_t num_q_heads, uint32_t head_size, uint32_t segments) {
  if (num_tokens == 0) return 0;   // no rows: nothing to count or merge
  return uint64_t(PA_SPLIT_COUNTER_WORDS + PA_PARTIALS_ALIGN_WORDS - 1) * 4 +
         partial_result_bytes(num_tokens, num_q_heads, head_size, segments);
}

Tile choose_tile(const ScheduleDevice& dev, uint32_t head_size, uint32_t max_rows) {
  if (dev.path != Path::scalar) {
    // paged_attention_subgroup.comp: 8 or 16 rows, tiles of 16 keys, as many
    // subgroups (up to 8) as its shared memory allows (bytes() mirrors its
    // shared arrays). The plan may then take fewer (matrix_subgroups).
    const uint32_t sg = dev.subgroup_size;
    // Rows are the matrices' N: 8 where the device has 16x8x16 (decode with
    // GQA <= 8 then carries half the accumulators), else 16.
    const uint32_t bm = max_rows <= 8 && dev.has_16x8x16 ? 8u : 16u;
    const uint32_t rows = abi::subgroup_tile_rows(bm, max_rows, sg);
    // (Unpacked: a plan packs O only where that fits too, packed_slices_fit.)
    uint32_t nw = 8;
    while (nw > 1 && PA_SUBGROUP_SHARED_BYTES(head_size, nw, bm, rows, 1u) > dev.max_shared_memory) nw /= 2;
    return {bm, 16, nw * sg, rows};
  }
  // Scalar: the largest tile whose shared memory fits the device.
  // (head_size: the larger of q.k's and V's where they differ, an upper bound.)
  auto shared_bytes = [&](uint32_t bm, uint32_t bn) { return PA_SCALAR_SHARED_BYTES(head_size, head_size, bm, bn); };
  uint32_t bm = max_rows >= 16 ? 16u : std::bit_ceil(std::max<uint32_t>(max_rows, 1));
  uint32_t bn = head_size <= 128 ? 32 : 16;
  while (shared_bytes(bm, bn) > dev.max_shared_memory && (bm > 4 || bn > 8)) {
    if (bn > 16 || (bn > 8 && bm <= 4)) bn /= 2;
    else bm /= 2;
  }
  uint32_t wg = 128;
  while ((bm * head_size) % wg) wg /= 2;
  // The kernel's prefetch registers: bn * head_size / 8 / wg <= 8 words.
  while (bn > 8 && bn * head_size / 8 / wg > 8) bn /= 2;
  // One invocation per key sets a tile's block addresses (and one per row the
  // row state): head size 16 with one row made 16 invocations for 32-key
  // tiles, and half the addresses were never set.
  while (bn > wg) bn /= 2;
  return {bm, bn, wg, bm};
}

float half_staging_wave(DType q_dtype) {
  // H200, ctx 4096, 32/8 heads x 128 (DEVELOPERS.md, "What holds decode
  // workgroups per SM"). f16 q, e5m2 cache: B=48 (384 items, one wave of 3
  // per SM) 124.6 µs, B=32 (256 items, one wave of 2) 101.9: 1.22. bf16 q,
  // e4m3 cache: B=48 in one wave of 3 176.7 µs, B=34 in 1.25 waves of 2
  // (4 segments) 171.2: 1.29 (e5m2 1.20; the larger keeps B=34 on whole
  // tiles, where e4m3 was 2.5% slower in halves).
  return q_dtype == DType::bf16 ? 1.29f : 1.22f;
}

bool half_staging_pays(Path path, uint32_t sms, const ItemKeys& st, float wave, uint32_t halves_per_sm,
                       uint32_t whole_per_sm) {
  // Up to whole_per_sm per SM, more per SM would run no more items at once.
  if (path == Path::scalar || wave <= 0 || halves_per_sm <= whole_per_sm || st.items <= uint64_t(whole_per_sm) * sms)
    return false;
  if (!st.even()) return true;   // (uneven batches stay unsplit: more of them at once)
  auto waves = [&](uint32_t per_sm) {
    const uint64_t s = automatic_segments(path, sms, st, per_sm), per_wave = uint64_t(per_sm) * sms;
    return double((st.items * s + per_wave - 1) / per_wave) / double(s);
  };
  return double(wave) * waves(halves_per_sm) < waves(whole_per_sm);
}

uint32_t decode_workgroups_per_sm(const ScheduleDevice& dev, uint32_t head_size, uint32_t bm, uint32_t tile_rows,
                                  bool halves) {
  return std::max<uint32_t>(
      1u, dev.max_shared_memory / PA_SUBGROUP_SHARED_BYTES_H(head_size, 4u, bm, tile_rows, 1u, halves ? 1u : 0u));
}

uint32_t automatic_segments(Path path, uint32_t sms, const ItemKeys& st, uint32_t per_sm) {
  const uint64_t items = st.items;
  const int64_t max_range = st.longest;
  if (items == 0 || max_range == 0) return 1;
  // Matrix kernel, even items beyond per_sm per SM, in workgroups of 4
  // subgroups (matrix_subgroups): their time steps at every per_sm
  // workgroups per SM, the ones an SM's 48 KiB of shared memory holds at
  // once (H200, ctx 4096, 2 per SM: B=34 to 64, 2.1 to 3.9 items per SM, took
  // 209 to 253 µs; B=72 to 96, 4.4 to 5.8, 355 to 376). So
  // split into the segments (up to 4, of >= 1024 keys) that need the fewest
  // such waves, each 1/s as long, where that promises 15% or more: the
  // partial results and the reduce took about 10 points of what the waves
  // promised (DEVELOPERS.md, "The decode schedule's rules"). Uneven batches
  // wait on their longest item and stay unsplit.
  const uint64_t per_wave = uint64_t(std::max(per_sm, 1u)) * sms;
  if (path != Path::scalar && st.even() && items > per_wave) {
    auto waves = [&](uint64_t s) { return double((items * s + per_wave - 1) / per_wave) / double(s); };
    const uint64_t most = static_cast<uint64_t>(std::min<int64_t>(max_range / 1024, 4));
    uint64_t best = 1;
    for (uint64_t s = 2; s <= most; ++s)
      if (waves(s) < waves(best)) best = s;
    return waves(best) <= 0.85 * waves(1) ? static_cast<uint32_t>(best) : 1u;
  }
  if (items >= 2ull * sms) return 1;
  uint64_t by_fill, min_keys;
  if (path == Path::scalar) {
    by_fill = (4ull * sms + items - 1) / items;
    min_keys = 256;
  } else {
    // Segments as short as one 16-key tile per subgroup (64 keys) pay when the
    // batch is small: more SMs share a short context.
    min_keys = 64;
    // At most one workgroup per SM (matrix_subgroups then gives it 8) unless
    // segments stay long: two per SM pays only when each subgroup still has
    // >= 64 tiles, and a segment count that leaves some SMs two workgroups
    // waits on those SMs.
    const uint64_t one = std::max<uint64_t>(1, sms / items);
    const uint64_t two = std::max<uint64_t>(1, 2ull * sms / items);
    by_fill = uint64_t(max_range) / two >= 4096 ? two : one;
  }
  const uint64_t by_length = static_cast<uint64_t>(std::min<int64_t>(max_range / int64_t(min_keys), 64));
  return static_cast<uint32_t>(std::max<uint64_t>(1, std::min({by_fill, by_length, uint64_t(64)})));
}

uint32_t matrix_subgroups(uint32_t max_subgroups, uint32_t sms, const ItemKeys& st) {
  // Tuned on an H200 with Hq 32 / Hkv 8, d 128 (DEVELOPERS.md, "The decode
  // schedule's rules").
  // At most one workgroup per SM: as many subgroups as shared memory allows
  // (8 for decode tiles up to head size 128), if each gets a 16-key tile.
  const uint32_t usual = std::min<uint32_t>(max_subgroups, 4);
  if (st.items <= sms) return st.longest >= 16 * int64_t(max_subgroups) ? max_subgroups : usual;
  // More items: workgroups of 4. An SM holds 2 of them (its workgroups share
  // 48 KiB of shared memory; 3 with half-tile staging), as it holds 4 of 2;
  // but an item's 4 subgroups finish it in half the time, and they beat 2
  // (and 3 and 8) at every batch and context measured, even and uneven.
  return usual;
}

bool packed_slices_fit(const ScheduleDevice& dev, uint32_t head_size, uint32_t bm, uint32_t rows, uint32_t subgroups) {
  // At least 4 subgroups: an invocation then has at most 32 outputs (the
  // kernel's bit mask of the ones to compute again).
  const uint32_t go = PA_SUBGROUP_O_GROUPS(bm, rows, 1u);
  return dev.bf16 && dev.path != Path::scalar && go > 1 && subgroups >= 4 &&
         PA_SUBGROUP_SHARED_BYTES(head_size, subgroups, bm, rows, go) <= dev.max_shared_memory;
}

bool pack_slices(uint32_t subgroups, uint32_t sms, const ItemKeys& st) {
  // H200, bf16, same calls (DEVELOPERS.md, "What the matrix decode kernel is
  // sensitive to"): packed, the subgroups' merge is two stores where it was
  // eight through a scratch, which gained at one item per SM (B=1 ctx=4096
  // 18.18 -> 16.90 µs in 8-subgroup workgroups, B=1 ctx=512 13.92 -> 13.15
  // in 4-subgroup ones, one tile each); but in workgroups of 4 every tile
  // took 1.45x as long (B=17 ctx=4096 117.8 -> 181.8, B=64 ctx=512 45.3 ->
  // 62.5).
  if (st.items > sms) return false;
  return subgroups >= 8 || st.longest <= 16 * int64_t(subgroups);
}

std::vector<uint32_t> matrix_subgroup_choices(uint32_t max_subgroups) {
  const uint32_t usual = std::min<uint32_t>(max_subgroups, 4);
  return usual == max_subgroups ? std::vector<uint32_t>{usual} : std::vector<uint32_t>{usual, max_subgroups};
}

bool prefill_tile_fits(const ScheduleDevice& dev, uint32_t head_size, uint32_t nw, uint32_t bn, uint32_t extra_shared) {
  const uint32_t sm = dev.prefill_shared_softmax ? 1 : 0, row = PP_ROW_VEC4(head_size), parts = PP_HEAD_PARTS(head_size);
  // A pair splits the head's 16-wide slices evenly: 144, 176, 208 and 240 keep the decode kernel.
  return head_size <= 256 && head_size % (16 * parts) == 0 && nw % parts == 0 && bn % 16 == 0 && bn <= 64 &&
         PP_SHARED_BYTES(head_size, nw, bn, sm) + extra_shared <= dev.max_shared_memory && 2 * bn * row >= PP_EPILOGUE_VEC4(nw) &&
         bn * head_size / 8 <= 8 * 32 * nw;
}

Tile prefill_tile(const ScheduleDevice& dev, uint32_t head_size) {
  const uint32_t sm = dev.prefill_shared_softmax ? 1 : 0, parts = PP_HEAD_PARTS(head_size);
  auto fits = [&](uint32_t nw, uint32_t bn) { return prefill_tile_fits(dev, head_size, nw, bn); };
  auto tile = [&](uint32_t nw, uint32_t bn) { return Tile{16 * nw / parts, bn, 32 * nw}; };
  // Registers per invocation: O head_size / (2 parts), Q head_size / (4
  // parts), the next tile's loads bn * head_size / (4 * 32 * nw), S and P 3 *
  // bn / 4. Up to head size 128 that is near the limit of 255 with one
  // subgroup per 16 rows; above it, a pair of subgroups (PP_HEAD_PARTS).
  if (head_size > 256) return {0, 0, 0};
  // Pairs (head sizes 160 to 256): 32 rows in 4 subgroups, tiles of 16 keys,
  // on either matrix path. Measured at head size 256 on coopmat2 against 64
  // rows in 8 subgroups, 16 rows in 2 and tiles of 32 keys (DEVELOPERS.md,
  // "Head size 256").
  if (parts > 1) return fits(4, 16) ? tile(4, 16) : Tile{0, 0, 0};
  // S and P in registers: 8 subgroups share each K/V tile of 64 keys.
  if (!sm && fits(8, 64)) return tile(8, 64);
  // 4 subgroups, S and P through shared memory.
  uint32_t bn = head_size <= 64 ? 64 : 32;
  return fits(4, bn) ? tile(4, bn) : Tile{0, 0, 0};
}

Tile block_sparse_prefill_tile(const ScheduleDevice& dev, uint32_t head_size, uint32_t q_block, uint32_t kv_block) {
  const uint32_t parts = PP_HEAD_PARTS(head_size);   // subgroups per 16 rows
  auto usable = [&](uint32_t nw, uint32_t bn) {
    // A softmax through shared memory: 4 subgroups at most.
    return nw % parts == 0 && q_block % (16 * nw / parts) == 0 && kv_block % bn == 0 &&
           !(dev.prefill_shared_softmax && nw > 4) &&
           prefill_tile_fits(dev, head_size, nw, bn, PP_BS_DOCUMENT_BYTES(16 * nw / parts, bn));
  };
  const Tile best = prefill_tile(dev, head_size);
  if (best.bm && usable(best.workgroup / 32, best.bn)) return best;
  for (uint32_t nw : {8u, 4u, 2u, 1u})
    for (uint32_t bn : {64u, 32u, 16u})
      if (usable(nw, bn)) return Tile{16 * nw / parts, bn, 32 * nw};
  return {0, 0, 0};
}

namespace {

// Where a plan's sequences go: the packed rows from which they take the
// prefill kernel (0: none; the decode kernel takes the rest), and the
// segments the routing needs (0: the split is chosen as usual).
struct Route {
  uint32_t rows = 0;
  uint32_t segments = 0;
};

// The most segments, and the fewest keys per segment of the longest routed
// sequence, for which a split routes sequences that are too few to fill
// the GPU to the prefill kernel, and the most decode-kernel work items per
// multiprocessor that the split may take along: the segments split every
// item of the plan, and a batch of many decodes loses by that more than its
// chunk gains (DEVELOPERS.md, "The prefill kernel").
constexpr uint64_t kMaxRoutingSegments = 4;
constexpr int64_t kMinRoutingSegmentKeys = 256;
constexpr uint64_t kMaxRoutingDecodeItemsPerSm = 4;
// The smallest head size that automatic routes where the prefill kernel's
// softmax goes through shared memory (the KHR module without the element
// order): there it was 1.4-1.6x faster than the decode kernel at head size
// 128 and 4.4x at 256, even with it at 96, and slower at 80 and 64 (H200,
// `bench prefill --path coopmat` before the KHR module's softmax ran in
// registers; README has the figures).
constexpr uint32_t kMinKhrRoutingHeadSize = 128;

//   PrefillKernel::on: more rows than one token's decode tile.
//   automatic: on a matrix path, a whole prefill tile of rows or more,
//     where such sequences give the prefill kernel at least a workgroup per
//     multiprocessor, unsplit or, with an automatic split, in up to
//     kMaxRoutingSegments segments of kMinRoutingSegmentKeys or more (the
//     fewest that fill the GPU) while the other sequences give the decode
//     kernel fewer than kMaxRoutingDecodeItemsPerSm items per SM. Shorter
//     sequences leave most of its tile's rows empty, and fewer workgroups
//     leave multiprocessors idle that the decode kernel's 16-row items would
//     use. A softmax through shared memory does so from head size
//     kMinKhrRoutingHeadSize; the scalar path keeps the decode kernel.
//     (DEVELOPERS.md, "The prefill kernel", "Automatic routing on the KHR
//     path" and "The KHR prefill module's softmax in registers", has the
//     measurements.)
Route prefill_route(const ScheduleDevice& dev, const ScheduleProblem& p, const Tile& pre) {
  const uint32_t gqa = p.num_q_heads / p.num_kv_heads;
  const uint64_t max_rows = uint64_t(p.max_query_len) * gqa;
  if (p.prefill == PrefillKernel::on) {
    const uint32_t one_token = choose_tile(dev, p.head_size, gqa).bm;
    return {max_rows > one_token ? one_token + 1 : 0, 0};
  }
  if (p.prefill != PrefillKernel::automatic || dev.path == Path::scalar || max_rows < pre.bm ||
      (dev.prefill_shared_softmax && p.head_size < kMinKhrRoutingHeadSize))
    return {};
  auto tiles = [&](uint64_t rows) { return rows >= pre.bm ? (rows + pre.bm - 1) / pre.bm : 0; };
  uint64_t workgroups = 0;
  uint64_t decode_items = 0;   // the other sequences' 16-row tiles
  int64_t longest = 0;         // keys of the longest routed sequence
  if (p.seq_lens.empty()) {
    workgroups = p.num_seqs * tiles(max_rows);   // a replay plan: every sequence as long as it may be
    longest = std::max<int64_t>(p.max_seq_len, p.max_query_len);
  } else {
    for (uint32_t i = 0; i < p.num_seqs; ++i) {
      const uint64_t rows = uint64_t(std::max(p.query_start_loc[i + 1] - p.query_start_loc[i], 0)) * gqa;
      const uint64_t t = tiles(rows);
      workgroups += t;
      if (t) longest = std::max<int64_t>(longest, p.seq_lens[i]);
      else decode_items += (rows + 15) / 16;
    }
  }
  workgroups *= p.num_kv_heads;
  decode_items *= p.num_kv_heads;
  const uint64_t sms = std::max(dev.multiprocessors, 1u);
  if (workgroups >= sms) return {pre.bm, 0};
  if (p.split != SplitKv::automatic || workgroups == 0) return {};
  const uint64_t segments = (sms + workgroups - 1) / workgroups;
  if (segments > kMaxRoutingSegments || longest / int64_t(segments) < kMinRoutingSegmentKeys ||
      decode_items >= kMaxRoutingDecodeItemsPerSm * sms ||
      split_workspace_bytes(p.num_tokens, p.num_q_heads, p.head_size, static_cast<uint32_t>(segments)) >
          workspace_capacity(dev, p))
    return {};
  return {pre.bm, static_cast<uint32_t>(segments)};
}

}  // namespace

Schedule schedule_paged_attention(const ScheduleDevice& dev, const ScheduleProblem& p) {
  Schedule s;
  const uint32_t gqa = p.num_q_heads / p.num_kv_heads;
  const uint64_t max_rows = uint64_t(p.max_query_len) * gqa;
  // Sequences of route_rows or more go to the prefill kernel, the others to
  // the decode kernel.
  const Tile pre = dev.prefill_kernel ? prefill_tile(dev, p.head_size) : Tile{0, 0, 0};
  const Route route = pre.bm ? prefill_route(dev, p, pre) : Route{};
  const uint32_t route_rows = route.rows;
  const bool routed = route_rows != 0;
  const uint32_t decode_rows = static_cast<uint32_t>(std::min<uint64_t>(max_rows, routed ? route_rows - 1 : 1u << 30));
  const Tile tile = choose_tile(dev, p.head_size, decode_rows);
  s.bm = tile.bm;
  s.bn = tile.bn;
  s.tile_rows = tile.rows;
  s.workgroup = s.max_workgroup = tile.workgroup;
  s.one_tile_per_seq = decode_rows <= tile.bm;
  // The kernels compute token * GQA in 32 bits.
  if (uint64_t(p.num_tokens) * gqa >= (1ull << 32))
    fail("num_tokens * (num_q_heads / num_kv_heads) = " + std::to_string(uint64_t(p.num_tokens) * gqa) +
         " packed rows; at most 2^32 - 1 are supported");
  if (routed) {
    s.prefill.on = true;
    s.prefill.bm = pre.bm;
    s.prefill.bn = pre.bn;
    s.prefill.workgroup = pre.workgroup;
    s.prefill.min_rows = route_rows;
  }
  const uint64_t q_tiles = s.one_tile_per_seq ? p.num_seqs : uint64_t(p.num_tokens) * gqa / s.bm + p.num_seqs;
  const uint64_t prefill_q_tiles = routed ? uint64_t(p.num_tokens) * gqa / pre.bm + p.num_seqs : 0;

  // Work items before splitting: one per q tile with rows, and kv head. The
  // window is a layer's, unknown here: items are sized by their causal range.
  bool any_decode = !routed, any_prefill = false;
  auto add_sequence = [&](ItemKeys& to, int64_t query_len, int64_t seq_len) {
    const uint64_t rows = uint64_t(query_len) * gqa;
    const bool prefill = routed && rows >= route_rows;
    (prefill ? any_prefill : any_decode) = true;
    const uint64_t bm = prefill ? pre.bm : s.bm;
    const int64_t ctx = seq_len - query_len;
    for (uint64_t r0 = 0; r0 < rows; r0 += bm) {
      const uint64_t last = (r0 + std::min<uint64_t>(bm, rows - r0) - 1) / gqa;
      const int64_t end = seq_len == 0 ? 0 : std::min<int64_t>(seq_len, ctx + int64_t(last) + 1);
      to.add(end, p.num_kv_heads);
    }
  };
  ItemKeys base;
  if (!p.seq_lens.empty()) {
    for (uint32_t i = 0; i < p.num_seqs; ++i)
      add_sequence(base, p.query_start_loc[i + 1] - p.query_start_loc[i], p.seq_lens[i]);
  } else {
    // A replay plan: every sequence as long as it may be; both kernels run.
    ItemKeys one;
    add_sequence(one, p.max_query_len, std::max(p.max_seq_len, p.max_query_len));
    base.items = one.items * p.num_seqs;
    base.longest = p.num_seqs ? one.longest : 0;
    base.total = one.total * int64_t(p.num_seqs);
    any_decode = true;
  }

  const uint32_t sms = std::max(dev.multiprocessors, 1u);
  // 4-subgroup workgroups an SM's shared memory holds, whole and half tiles.
  const uint32_t whole_fit = decode_workgroups_per_sm(dev, p.head_size, s.bm, s.tile_rows, false);
  const uint32_t halves_fit = decode_workgroups_per_sm(dev, p.head_size, s.bm, s.tile_rows, true);
  // Head halves where two such workgroups fit an SM's shared memory (not
  // with 8 tile rows: GQA 8 at head size 256).
  const bool head_halves = p.head_halves && halves_fit >= 2u;
  const bool halves = p.registers_hold_two || head_halves ||
                      half_staging_pays(dev.path, sms, base, p.half_staging_wave, std::min(halves_fit, 3u), whole_fit);
  // 4-subgroup workgroups an SM holds: 2 where registers or head halves
  // allow no more; with fp8 half tiles as many as their shared memory
  // allows, 2 or 3 (16 tile rows at head size 128: 20.3 KiB each, 2; up to
  // 8: 3); else as many as whole tiles' shared memory allows, 1 to 3 (3
  // from head size 80 down: H200, head size 64, ctx 4096, B=64 took 187.8
  // µs unsplit and 154.7 in the 3 segments this gives, B=256 579.8
  // unsplit, as it stays; 1 with 16 tile rows at head size 128, 29 KiB per
  // workgroup, where f16 and bf16 caches have no half tiles; DEVELOPERS.md,
  // "What holds decode workgroups per SM").
  const uint32_t per_sm = p.registers_hold_two || head_halves ? 2u : std::clamp(halves ? halves_fit : whole_fit, 1u, 3u);
  uint64_t segments = 1;
  if (p.split == SplitKv::on)
    segments = p.num_segments ? p.num_segments : std::max<uint64_t>(2, (4ull * sms + base.items - 1) / std::max<uint64_t>(base.items, 1));
  else if (p.split == SplitKv::automatic)
    segments = route.segments ? route.segments : automatic_segments(dev.path, sms, base, per_sm);
  if (p.split == SplitKv::on && p.num_segments > 256)
    fail("num_segments = " + std::to_string(p.num_segments) + " is not supported: expected 1 to 256");
  segments = std::clamp<uint64_t>(segments, 1, 256);
  const uint64_t per_segment = partial_result_bytes(p.num_tokens, p.num_q_heads, p.head_size, 1);
  const uint64_t counters = split_workspace_bytes(p.num_tokens, p.num_q_heads, p.head_size, 0);   // the arrival counters alone
  const uint64_t capacity = workspace_capacity(dev, p);
  if ((segments > 1 || p.split == SplitKv::on) && counters + per_segment * segments > capacity) {
    if (p.split == SplitKv::on)
      fail(std::to_string(segments) + " segments need " + std::to_string(counters + per_segment * segments) +
           " bytes of arrival counters and partial results, more than the workspace's " + std::to_string(capacity) +
           " (PagedAttentionPlanOptions::workspace_bytes, at most the kernels' 2 GiB" +
           (dev.max_binding_bytes < kMaxWorkspaceBytes
                ? " and the " + std::to_string(dev.max_binding_bytes) + " bytes the device binds at once, maxStorageBufferRange"
                : std::string()) +
           "); use fewer segments or a larger workspace");
    segments = capacity > counters ? std::max<uint64_t>(1, (capacity - counters) / std::max<uint64_t>(per_segment, 1)) : 1;
  }
  s.num_segments = static_cast<uint32_t>(segments);
  s.split = segments > 1 || p.split == SplitKv::on;
  s.workspace_bytes = s.split ? counters + per_segment * segments : 0;

  if (dev.path != Path::scalar) {
    // Items after the split: the longest is one segment of the longest item.
    ItemKeys split = base;
    split.items = base.items * segments;
    if (s.split) {
      const int64_t per = (base.longest + int64_t(segments) - 1) / int64_t(segments);
      split.longest = std::min(base.longest, (per + s.bn - 1) / s.bn * s.bn);
    }
    s.workgroup = matrix_subgroups(s.max_workgroup / dev.subgroup_size, sms, split) * dev.subgroup_size;
    const uint32_t nw = s.workgroup / dev.subgroup_size;
    s.pack_o = packed_slices_fit(dev, p.head_size, s.bm, s.tile_rows, nw) && pack_slices(nw, sms, split);
    // (Packed modules stage whole tiles. Head halves only where an SM runs
    // more than one workgroup: at one per SM, whole tiles took 1.4-1.7% less
    // time with f16 and 15% with bf16, whose halves module spills.)
    s.stage_halves = halves && nw == 4 && !s.pack_o && (!head_halves || split.items > sms);
  }
  s.q_tiles = static_cast<uint32_t>(std::min<uint64_t>(q_tiles, UINT32_MAX));
  s.num_workgroups = any_decode ? q_tiles * p.num_kv_heads * segments : 0;
  if (routed && !any_prefill) s.prefill.on = false;   // a batch of decode rows only
  // Each item's counter is one word of the workspace's PA_SPLIT_COUNTER_WORDS.
  s.merge_last = s.split && !s.prefill.on && q_tiles * p.num_kv_heads <= PA_SPLIT_COUNTER_WORDS;
  if (s.prefill.on) s.prefill.num_workgroups = prefill_q_tiles * p.num_kv_heads * segments;
  for (uint64_t n : {q_tiles, prefill_q_tiles, s.num_workgroups, s.prefill.num_workgroups})
    if (n > UINT32_MAX) fail(std::to_string(n) + " workgroups are more than one dispatch holds (2^32 - 1)");
  return s;
}

void prefix_prefill_passes(Schedule& s) {
  if (!s.prefill.on || s.prefill.passes) return;
  s.prefill.passes = true;
  s.prefill.num_workgroups /= s.num_segments;
}

}  // namespace vkattn::detail
