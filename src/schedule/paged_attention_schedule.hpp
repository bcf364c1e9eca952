// Internal: how a paged-attention plan maps a batch onto workgroups. Pure host
// arithmetic, O(num_seqs), with no Vulkan in it, so that it can be tested on
// its own and run every step.
#pragma once
#include <algorithm>
#include <vkattn/capabilities.hpp>
#include <vkattn/paged_attention.hpp>

#include <cstdint>
#include <span>
#include <vector>

namespace vkattn::detail {

// What scheduling needs to know of the device and the kernel path.
struct ScheduleDevice {
  Path path = Path::scalar;        // the attention kernel's
  uint32_t subgroup_size = 32;
  uint32_t multiprocessors = 16;   // Capabilities::scheduling_multiprocessors
  uint32_t max_shared_memory = 48 * 1024;
  bool has_16x8x16 = false;        // KHR 16x8x16 subgroup matrices of the element type: 8-row tiles
  bool bf16 = false;               // the element type is bf16: the decode kernel's bf16 modules may pack O
                                   // (Schedule::pack_o), which takes more shared memory
  // paged_prefill.comp can run (a matrix path with subgroups of 32), and
  // whether its softmax goes through shared memory: where the Context did
  // not find the matrices' element order (Capabilities::coopmat_register_order),
  // which its softmax in registers needs on either matrix path.
  bool prefill_kernel = false;
  bool prefill_shared_softmax = true;
  // The largest view the device binds (maxStorageBufferRange): a split
  // run binds its workspace whole, so a plan's workspace stays within it.
  uint64_t max_binding_bytes = UINT64_MAX;
};

// The path of paged_prefill.comp's module for an op on `path`: the coopmat2
// module's softmax works on each lane's accumulator elements by row, in the
// order the Context checked (Capabilities::coopmat_register_order); without
// it (another order, or a Context that could not run the probe) the KHR
// module runs instead, its softmax through shared memory. (With the order
// the KHR module's softmax runs in registers too.)
inline Path prefill_kernel_path(Path path, bool register_order) {
  return path == Path::coopmat2 && !register_order ? Path::coopmat : path;
}

struct ScheduleProblem {
  uint32_t num_q_heads = 0, num_kv_heads = 0, head_size = 0;
  uint32_t num_seqs = 0, num_tokens = 0, max_query_len = 0;
  // One batch's host lengths; empty for a replay plan, which is sized as if
  // every sequence had max_query_len tokens and max_seq_len keys.
  std::span<const int32_t> query_start_loc, seq_lens;
  uint32_t max_seq_len = 0;
  SplitKv split = SplitKv::automatic;
  PrefillKernel prefill = PrefillKernel::automatic;
  uint32_t num_segments = 0;
  uint64_t workspace_bytes = 0;
  // Where the decode kernel's module for this cache and q can stage half a
  // tile per subgroup (PA_STAGE_HALVES: fp8 cache in 16-value pieces, head
  // size 128), which lets an SM hold 3 of its 4-subgroup workgroups, not 2:
  // how long a wave of 3 per SM takes against a wave of 2
  // (half_staging_wave); 0 where it cannot.
  float half_staging_wave = 0;
  // bf16 q with K/V matrices built in registers (the decode kernel's
  // REGISTER_MATRICES): that module's registers (182 on an H200) hold an SM
  // to 2 workgroups of 4 whatever their shared memory. It stages nothing, so
  // half tiles only keep its shared memory within what 2 per SM allow (whole
  // ones would allow 1), and a split must count waves of 2 per SM, not 3.
  bool registers_hold_two = false;
  // A 16-bit cache at head size 256 (the decode kernel's HEAD_HALVES): whole
  // tiles hold an SM to one 4-subgroup workgroup, with no prefetch; half
  // tiles, each loaded two halves ahead, to two where the tile's rows allow
  // (up to 4: GQA 4). Such plans split by waves of 2 per SM, and stage
  // halves where the items are more than the SMs.
  bool head_halves = false;
};

// The prefill kernel's part of a plan that routes sequences by their rows.
struct PrefillSchedule {
  bool on = false;
  uint32_t bm = 0, bn = 0, workgroup = 0;
  uint32_t min_rows = 0;           // sequences of at least this many packed rows are its
  uint64_t num_workgroups = 0;     // q tiles (of bm rows) * num_kv_heads * num_segments (1 in passes)
  // Prefix prefill in two passes (prefix_prefill_passes): an item per q
  // tile and kv head in each, the context's keys, then the new tokens' with
  // the outputs (abi/paged_attention.h, PA_PREFIX_PASS); num_workgroups
  // counts one pass's. The decode kernel's items keep the plan's segments.
  bool passes = false;
};


struct Schedule {
  uint32_t bm = 0, bn = 0;         // rows per q tile, keys per KV tile
  uint32_t tile_rows = 0;          // rows a q tile holds at most (<= bm)
  uint32_t workgroup = 0;          // invocations of the attention kernel
  uint32_t max_workgroup = 0;      // the most the tile's shared memory allows (matrix paths)
  // The bf16 decode kernel packs O's head slices (PA_PACK_O, pack_slices).
  bool pack_o = false;
  // The decode kernel stages half a tile at a time (PA_STAGE_HALVES): 4-subgroup workgroups of a module that can.
  bool stage_halves = false;
  bool one_tile_per_seq = false;   // every sequence's rows fit one q tile (tile index = sequence)
  uint32_t q_tiles = 0;
  bool split = false;
  uint32_t num_segments = 1;
  uint64_t num_workgroups = 0;     // q_tiles * num_kv_heads * num_segments
  uint64_t workspace_bytes = 0;    // split-KV arrival counters and partial results; 0 unsplit
  // A split run's last segment of each item merges the item (PA_FLAG_MERGE_LAST),
  // with no reduce dispatch: decode-kernel items only, at most PA_SPLIT_COUNTER_WORDS.
  bool merge_last = false;
  // With a prefill part, the decode kernel takes the sequences of fewer than
  // prefill.min_rows rows and num_workgroups counts its workgroups only (0:
  // the batch has none of them).
  PrefillSchedule prefill;
};

// Throws vkattn::Error for a problem it cannot schedule (an explicit
// num_segments whose partial results exceed the workspace, a grid too large).
Schedule schedule_paged_attention(const ScheduleDevice& device, const ScheduleProblem& problem);

// Makes a prefix-prefill schedule's prefill-kernel items run in two passes (PrefillSchedule::passes).
void prefix_prefill_passes(Schedule& s);

// Rows per tile, keys per tile and invocations of the kernel for `max_rows`
// packed rows (query tokens x GQA heads) per sequence.
struct Tile {
  uint32_t bm, bn, workgroup;
  uint32_t rows = 0;   // the decode kernel's: rows an item has at most (abi::subgroup_tile_rows); else bm
};
Tile choose_tile(const ScheduleDevice& device, uint32_t head_size, uint32_t max_rows);

// The prefill kernel's tile. Up to head size 128: with the softmax in
// registers 128 rows in 8 subgroups and K/V tiles of 64 keys; else, or where
// that does not fit, 64 rows in 4 subgroups and 64 or 32 keys by head size.
// Above it (pairs of subgroups per 16 rows, PP_HEAD_PARTS): 32 rows in 4
// subgroups, 16 keys.
// {0, 0, 0} where no tile fits (its shared memory, PP_SHARED_BYTES; head
// sizes above 256, or above 128 of an odd number of 16-wide slices).
Tile prefill_tile(const ScheduleDevice& device, uint32_t head_size);
// Whether the prefill kernel can run nw subgroups (16 rows each, or each pair
// 16 rows above head size 128) with K/V tiles of bn keys for this head size:
// its shared memory (PP_SHARED_BYTES), the layout rules abi/paged_attention.h
// states, and its registers. extra_shared: bytes an op's modules declare
// beyond PP_SHARED_BYTES (block-sparse attention's document ids).
bool prefill_tile_fits(const ScheduleDevice& device, uint32_t head_size, uint32_t nw, uint32_t bn, uint32_t extra_shared = 0);
// Block-sparse attention's tile on the prefill kernel, whose rows must divide
// the mask's q blocks and whose keys its kv blocks: prefill_tile's where it
// does, else the largest that does (subgroups first, then keys; at most 4
// subgroups where the softmax goes through shared memory); {0, 0, 0} where
// none does.
Tile block_sparse_prefill_tile(const ScheduleDevice& device, uint32_t head_size, uint32_t q_block, uint32_t kv_block);

// The most a split workspace may take: partial results are indexed with
// 32-bit arithmetic in the kernels.
inline constexpr uint64_t kMaxWorkspaceBytes = 1ull << 31;
// The most one split run's workspace may take on a device: that, within the
// view the device binds at once (maxStorageBufferRange: a run binds its
// workspace whole).
inline uint64_t max_workspace_bytes(uint64_t max_binding_bytes) { return std::min(kMaxWorkspaceBytes, max_binding_bytes); }

// Bytes of split-KV partial results.
uint64_t partial_result_bytes(uint64_t num_tokens, uint32_t num_q_heads, uint32_t head_size, uint32_t segments);
// A split run's workspace: the arrival counters, the gap that aligns what
// follows (abi/paged_attention.h), then the partial results.
uint64_t split_workspace_bytes(uint64_t num_tokens, uint32_t num_q_heads, uint32_t head_size, uint32_t segments);

// What the split and workgroup choices look at in a batch's work items
// (one per q tile and kv head): how many, the longest and the total key count.
struct ItemKeys {
  uint64_t items = 0;
  int64_t longest = 0, total = 0;
  ItemKeys() = default;
  ItemKeys(const std::vector<int64_t>& keys);   // NOLINT: tests pass lists of key counts
  void add(int64_t keys, uint64_t count);
  bool even() const { return longest * int64_t(items) <= 2 * total; }   // longest <= twice the mean
};

// A wave of 3 half-staging workgroups per SM against a wave of 2 whole-tile
// ones, as measured for the module of this q dtype (H200, fp8 caches).
float half_staging_wave(DType q_dtype);
// Whether a module that can stage half a tile per subgroup should, for these
// items: when its halves_per_sm workgroups per SM, each wave of them `wave`
// times as long as a wave of whole_per_sm whole-tile ones, run the batch in
// less time than whole tiles would, each with its best split. The counts are
// what an SM's shared memory holds (decode_workgroups_per_sm): 3 and 2 at
// head size 128 with up to 8 tile rows, 2 and 1 with 16.
bool half_staging_pays(Path path, uint32_t multiprocessors, const ItemKeys& items, float wave, uint32_t halves_per_sm = 3,
                       uint32_t whole_per_sm = 2);
// 4-subgroup decode workgroups of this tile (whole or half tiles staged)
// that an SM's shared memory holds at once, at least 1 (the SM gives all its
// workgroups together dev.max_shared_memory; DEVELOPERS.md, "What holds
// decode workgroups per SM").
uint32_t decode_workgroups_per_sm(const ScheduleDevice& dev, uint32_t head_size, uint32_t bm, uint32_t tile_rows,
                                  bool halves);
// Segments of an automatically split plan (1: no split), from the work items
// before any split: split when they give fewer than 2 workgroups per
// multiprocessor, and on the matrix paths when even items would leave the
// last of the waves the kernel runs them in mostly empty; the rule per kernel
// is explained where it is defined.
// per_sm: the decode kernel's 4-subgroup workgroups an SM holds at once (its
// shared memory decides: 2, or 3 with half-tile staging).
uint32_t automatic_segments(Path path, uint32_t multiprocessors, const ItemKeys& items, uint32_t per_sm = 2);

// Subgroups per workgroup of the matrix kernel (at most max_subgroups, which
// its shared memory allows: 8, 4 or 2), from the work items (after any
// split): the most for at most one item per multiprocessor if each subgroup
// gets a tile, else 4.
uint32_t matrix_subgroups(uint32_t max_subgroups, uint32_t multiprocessors, const ItemKeys& items);
// Every count matrix_subgroups may return for max_subgroups: the workgroup
// sizes a plan prepares pipelines for.
std::vector<uint32_t> matrix_subgroup_choices(uint32_t max_subgroups);

// Whether the bf16 decode kernel packs O's head slices (PA_PACK_O) for work
// items (after any split) in workgroups of `subgroups`: for at most one item
// per multiprocessor, in workgroups of 8, or of 4 where each subgroup gets
// one 16-key tile.
bool pack_slices(uint32_t subgroups, uint32_t multiprocessors, const ItemKeys& items);
// Whether the decode kernel's bf16 module can pack O for that tile in
// workgroups of `subgroups`: rows <= bm / 2, at least 4 subgroups, and the
// packed shared memory fits (it does not at 8 subgroups with 8 rows, GQA 5
// to 8). The pipelines prepare() creates packed.
bool packed_slices_fit(const ScheduleDevice& device, uint32_t head_size, uint32_t bm, uint32_t rows, uint32_t subgroups);

}  // namespace vkattn::detail
