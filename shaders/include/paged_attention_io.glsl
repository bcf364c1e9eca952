// What the paged-attention kernels (paged_attention.comp, the scalar path, and
// paged_attention_subgroup.comp, the matrix paths) share besides the online
// softmax: the bindings, the work item, reading K/V (block table -> chunk ->
// element), turning a score into a logit for a row, and writing a row's result
// (final output and LSE, or a split-KV partial for paged_attention_reduce).
// Include after abi/paged_attention.h (the spec constants) and before main();
// paged_prefill.comp defines PA_PREFILL_KERNEL 1 first (which sequences of a
// plan that routes by rows are its).
// Loops over the workgroup step by PA_WORKGROUP_SIZE, never gl_WorkGroupSize:
// the kernels declare local_size_x_id after this file, and until then glslang
// gives gl_WorkGroupSize as (1, 1, 1), so every invocation did all the work.
#ifndef VKATTN_PAGED_ATTENTION_IO_GLSL
#define VKATTN_PAGED_ATTENTION_IO_GLSL
#ifndef PA_PREFILL_KERNEL
#define PA_PREFILL_KERNEL 0
#endif
#include "attention_logits.glsl"
#include "kv_addressing.glsl"
#include "number_formats.glsl"
#include "kv_tensor_loads.glsl"
#include "online_softmax.glsl"

const uint PA_NUM_Q_HEADS = PA_NUM_KV_HEADS * PA_GQA;
const uint PA_V_HEAD_SIZE = PA_HEAD_SIZE;   // V's head size (block-sparse attention's may differ)
#include "paged_attention_bindings.glsl"

const bool PA_FP8_CACHE = PA_CACHE_DTYPE == DTYPE_FP8_E4M3 || PA_CACHE_DTYPE == DTYPE_FP8_E5M2;
const uint PA_ESIZE = PA_FP8_CACHE ? 1u : 2u;
#define PA_CACHE_CHUNK_TABLE pc.chunk_table_address
#define PA_CACHE_NUM_K_CHUNKS pc.num_k_chunks
#define PA_CACHE_BLOCKS_PER_CHUNK pc.blocks_per_chunk
#define PA_CACHE_CHUNK_MAGIC pc.chunk_magic
#include "kv_cache_reads.glsl"

// One work item: rows [row_start, row_start + row_count) of a sequence and
// kv head (row = token_in_sequence * GQA + head_in_group), keys
// [kv_begin, kv_end) of one segment of their range.
struct PaItem {
  uint seq, kv_head, row_start, row_count, segment, token0;
  int kv_begin, kv_end, ctx;
  bool valid;   // false: no rows (a tile past its sequence's)
#if PA_PREFILL_KERNEL
  // Prefix prefill's new-token pass (PA_PASS_NEW_TOKENS): the context pass
  // had keys for this item, so its rows have segment 0's partial results.
  bool after_context;
#endif
};

// First q tile of sequence s when tiles are found by search: every sequence
// gets at least ceil(query_len * GQA / BM) tiles between its first and the
// next sequence's (vLLM's unified attention numbers its q blocks the same way).
uint pa_first_tile(uint s) {
  const uint q = uint(clamp(pa_query_start(s), 0, int(pc.num_tokens)));
  return q * PA_GQA / PA_BM + s;
}

// The sequence that q tile `tile` belongs to: the last s with pa_first_tile(s) <= tile.
uint pa_find_seq(uint tile) {
  uint lo = 0u, hi = pc.num_seqs;
  while (hi - lo > 1u) {
    const uint mid = (lo + hi) / 2u;
    if (pa_first_tile(mid) <= tile) lo = mid;
    else hi = mid;
  }
  return lo;
}

// Work item number `wg`. The lengths the device holds are kept in bounds
// here, not checked: paged_attention_check.comp reports those that are
// unusable (reports from this prologue slow decode measurably).
// Prefix prefill's two passes on the prefill kernel (PA_PREFIX_PASS,
// abi/paged_attention.h): one item per q tile and kv head in each, its
// segment fixed by the pass (0: the context's keys, from the cache, written
// as partial results; 1: the new tokens', merged and written). The other
// kernels see none of this code (macros, so that their modules stay as they
// were).
#if PA_PREFILL_KERNEL
#define PA_ITEM_SEGMENTS (PA_PREFIX_PASS != 0u ? 1u : pc.num_segments)
#define PA_ITEM_SEGMENT(wg) (PA_PREFIX_PASS != 0u ? PA_PREFIX_PASS - 1u : (wg) % PA_ITEM_SEGMENTS)
// The sequence's new tokens are not in the block table.
#define PA_NEW_TOKENS_APART (PA_KV_SUFFIX != 0u || PA_PREFIX_PASS != 0u)
#define PA_SPLIT_BY_SOURCE PA_NEW_TOKENS_APART
#define PA_WRITES_PARTIAL ((pc.flags & PA_FLAG_SPLIT) != 0u && PA_PREFIX_PASS != PA_PASS_NEW_TOKENS)
#else
#define PA_ITEM_SEGMENTS pc.num_segments
#define PA_ITEM_SEGMENT(wg) ((wg) % PA_ITEM_SEGMENTS)
#define PA_NEW_TOKENS_APART (PA_KV_SUFFIX != 0u)
#define PA_SPLIT_BY_SOURCE (PA_KV_SUFFIX != 0u)
#define PA_WRITES_PARTIAL ((pc.flags & PA_FLAG_SPLIT) != 0u)
#endif

// The rows of an item are its tokens' GQA heads, token-major: local row r is
// the sequence's new token PA_ROW_QUERY(it, r) (0 for its first) for q head
// PA_ROW_HEAD(it, r). Every use of a row's token or head goes through these.
// (Macros, so that their users' code is what it was written inline.)
#define PA_ROW_QUERY(it, r) (((it).row_start + (r)) / PA_GQA)
#define PA_ROW_HEAD(it, r) ((it).kv_head * PA_GQA + ((it).row_start + (r)) % PA_GQA)

PaItem pa_load_item(uint wg) {
  PaItem it;
#if PA_PREFILL_KERNEL
  it.after_context = false;
#endif
  it.segment = PA_ITEM_SEGMENT(wg);
  const uint rest = wg / PA_ITEM_SEGMENTS;
  it.kv_head = rest % PA_NUM_KV_HEADS;
  const uint tile = rest / PA_NUM_KV_HEADS;
  uint local = 0u;
  if (PA_ONE_TILE_PER_SEQ != 0u) {
    it.seq = tile;
  } else {
    it.seq = pa_find_seq(tile);
    local = tile - pa_first_tile(it.seq);
  }
  int q0, q1;
  pa_query_range(it.seq, q0, q1);
  // seq_len within the block table (its cached part, with a contiguous
  // suffix), and covering the new tokens unless 0.
  const uint64_t in_table = uint64_t(pc.max_blocks_per_seq) * PA_BLOCK_SIZE + (PA_NEW_TOKENS_APART ? uint(q1 - q0) : 0u);
  const int table = int(min(in_table, 0x7FFFFFFFul));
  int len = clamp(pa_seq_len(it.seq), 0, table);
  if (len > 0) len = max(len, q1 - q0);
  uint rows = uint(q1 - q0) * PA_GQA;
  // A plan that routes by rows gives each sequence to one kernel; prefix
  // prefill may leave sequences of one token to a decode kernel.
  bool mine = PA_PREFILL_KERNEL != 0 ? rows >= pc.route_rows : pc.route_rows == 0u || rows < pc.route_rows;
  if (PA_NEW_TOKENS_APART && (pc.flags & PA_FLAG_SKIP_DECODE) != 0u && q1 - q0 == 1) mine = false;
  if (PA_ONE_TILE_PER_SEQ != 0u) rows = min(rows, PA_BM);
  it.row_start = local * PA_BM;
  it.valid = it.seq < pc.num_seqs && it.row_start < rows && mine;
  it.row_count = min(PA_BM, rows - it.row_start);
  it.token0 = uint(q0);
  it.ctx = len - (q1 - q0);
  // Keys some row of the tile can see: causal up to its last token, the
  // window from its first. Tiles outside the range are never visited.
  const int first = it.ctx + int(PA_ROW_QUERY(it, 0u)), last = it.ctx + int(PA_ROW_QUERY(it, it.row_count - 1u));
  const int end = len == 0 ? 0 : min(len, last + 1);
  int begin = PA_HAS_WINDOW != 0u ? max(0, first - pc.sliding_window + 1) : 0;
  begin = min(begin, end);
  if (PA_SPLIT_BY_SOURCE) {
    // Segment 0: the keys in the cache; segment 1: the new tokens'.
    const int at = clamp(it.ctx, begin, end);
    it.kv_begin = it.segment == 0u ? begin : at;
    it.kv_end = it.segment == 0u ? at : end;
#if PA_PREFILL_KERNEL
    it.after_context = begin < at;
    // The context pass writes nothing for an item with no context keys, and
    // the new-token pass then reads nothing of it.
    if (PA_PREFIX_PASS == PA_PASS_CONTEXT && !it.after_context) it.valid = false;
#endif
  } else if (PA_WRITES_PARTIAL) {
    // Segments of whole BN-key tiles; trailing ones may be empty.
    const int per = (end - begin + int(pc.num_segments) - 1) / int(pc.num_segments);
    const int seg_len = (per + int(PA_BN) - 1) / int(PA_BN) * int(PA_BN);
    const int b = min(end, begin + int(it.segment) * seg_len);
    it.kv_begin = b;
    it.kv_end = min(end, b + seg_len);
  } else {
    it.kv_begin = begin;
    it.kv_end = end;
  }
  return it;
}

// What writing work item `wg`'s results needs (rows, tokens, head, segment),
// for a kernel that loaded the item with pa_load_item and let it go during
// its key loop: no checks (that load made them) and no key range.
PaItem pa_output_item(uint wg) {
  PaItem it;
  it.segment = wg % pc.num_segments;
  const uint rest = wg / pc.num_segments;
  it.kv_head = rest % PA_NUM_KV_HEADS;
  const uint tile = rest / PA_NUM_KV_HEADS;
  const bool one = PA_ONE_TILE_PER_SEQ != 0u;
  it.seq = one ? tile : pa_find_seq(tile);
  const uint local = one ? 0u : tile - pa_first_tile(it.seq);
  int q0, q1;
  pa_query_range(it.seq, q0, q1);
  it.token0 = uint(q0);
  it.row_start = local * PA_BM;
  it.row_count = min(PA_BM, uint(q1 - q0) * PA_GQA - it.row_start);
  it.kv_begin = it.kv_end = it.ctx = 0;
  it.valid = true;
#if PA_PREFILL_KERNEL
  it.after_context = false;
#endif
  return it;
}

// Absolute position of local row r, or -1 for rows past the item (they see no key).
int pa_row_position(PaItem it, uint r) { return r < it.row_count ? it.ctx + int(PA_ROW_QUERY(it, r)) : -1; }

// Where element d of local row r's query lies in q16 (row r < row_count):
// q's one address formula, for pa_q_bits and pa_q_raw8.
#define PA_Q_AT(it, r, d)                                                                   \
  (pa_view_offset(PA_VIEW_Q) + ((it).token0 + PA_ROW_QUERY(it, r)) * pc.q_token_stride + \
   PA_ROW_HEAD(it, r) * pc.q_head_stride + (d))

// Element d of local row r's query, as stored (f16 or bf16 bits); 0 past the item.
uint pa_q_bits(PaItem it, uint r, uint d) {
  if (r >= it.row_count) return 0u;
  return uint(q16[PA_Q_AT(it, r, d)]);
}

#if PA_PREFILL_KERNEL
// q as 16-byte words too, for pa_q_raw8.
layout(set = 0, binding = PA_BINDING_Q, std430) readonly buffer Q16x8 { uvec4 q16x8[]; };
// Whether q's rows of 8 elements lie on 16-byte words of its binding (the
// host's PA_FLAG_Q_WIDE: its offset and strides multiples of 8 elements).
bool pa_q_wide() { return (pc.flags & PA_FLAG_Q_WIDE) != 0u; }
// Elements d .. d + 7 (d a multiple of 8) of local row r's query, as stored;
// 0 past the item. `wide` (pa_q_wide()): one 16-byte load, else eight 2-byte ones.
uvec4 pa_q_raw8(PaItem it, uint r, uint d, bool wide) {
  if (r >= it.row_count) return uvec4(0);
  const uint at = PA_Q_AT(it, r, d);
  VKA_RAW8_BODY(q16x8, q16, wide, at)
}
#endif

// The block-table entry of key k_pos (< seq_len <= the table's capacity,
// which pa_load_item ensures), as stored. Kernels load it a phase before use
// (pa_checked_block), so the load is in flight meanwhile.
int pa_raw_block(uint seq, int k_pos) {
  const uint col = min(uint(k_pos) / PA_BLOCK_SIZE, pc.max_blocks_per_seq - 1u);
  return block_table_words[pa_view_offset(PA_VIEW_BLOCK_TABLE) + seq * pc.block_table_stride + col];
}

#if PA_DEFERRED_BLOCK_REPORT
#include "deferred_report.glsl"
// The report of key k's bad entry: the sequence, the block-table column and the entry.
#define PA_REPORT_BAD_KEY(seq, k) \
  vka_report(STATUS_BLOCK_OUT_OF_RANGE, seq, min((k) / PA_BLOCK_SIZE, pc.max_blocks_per_seq - 1u), uint(pa_raw_block(seq, int(k))))
#if PA_DEFERRED_REPORT_PER_SUBGROUP
// After the key loop, in uniform control flow: this subgroup's first bad key.
void pa_report_bad_block(uint seq) {
  PA_SUBGROUP_BAD_KEY(k);
  if (gl_SubgroupInvocationID == 0u && k != 0xFFFFFFFFu)
    PA_REPORT_BAD_KEY(seq, k);
}
#else
// After that barrier: the first key whose block-table entry is bad.
void pa_report_bad_block(uint seq) {
  if (gl_LocalInvocationIndex != 0u) return;
  const uint k = pa_first_bad_block_key;
  if (k != 0xFFFFFFFFu)
    PA_REPORT_BAD_KEY(seq, k);
}
#endif
#endif

// Keeps an entry that is not a block of the cache inside it (block 0 stands
// in) and reports it.
uint pa_checked_block(int b, uint seq, int k_pos) {
#if PA_DEFERRED_BLOCK_REPORT
  const bool bad = b < 0 || uint(b) >= pc.num_blocks;
  pa_bad_key = bad ? min(pa_bad_key, uint(k_pos)) : pa_bad_key;
  return bad ? 0u : uint(b);
#else
  if (b < 0 || uint(b) >= pc.num_blocks) {
    vka_report(STATUS_BLOCK_OUT_OF_RANGE, seq, min(uint(k_pos) / PA_BLOCK_SIZE, pc.max_blocks_per_seq - 1u), uint(b));
    return 0u;
  }
  return uint(b);
#endif
}

// ---- Prefix prefill's contiguous suffix (PA_KV_SUFFIX) ----------------------
// Segment 1 of a prefix-prefill plan (the prefill kernel's new-token pass)
// reads the new tokens' K and V from their views (q's dtype), not from the
// cache: key k >= ctx is new token token0 + k - ctx. The cache's
// keys keep their fp8 scales; these have none.
layout(set = 0, binding = PA_BINDING_NEW_K, std430) readonly buffer NewK16 { uint16_t new_k16[]; };
layout(set = 0, binding = PA_BINDING_NEW_K, std430) readonly buffer NewKVec { uvec4 new_k_vec[]; };
layout(set = 0, binding = PA_BINDING_NEW_V, std430) readonly buffer NewV16 { uint16_t new_v16[]; };
layout(set = 0, binding = PA_BINDING_NEW_V, std430) readonly buffer NewVVec { uvec4 new_v_vec[]; };

// Whether the item's keys are the new tokens' (the same for a whole workgroup).
#if PA_PREFILL_KERNEL
bool pa_suffix_item(PaItem it) { return PA_KV_SUFFIX != 0u && (PA_PREFIX_PASS == PA_PASS_NEW_TOKENS || it.segment == 1u); }
#else
bool pa_suffix_item(PaItem it) { return PA_KV_SUFFIX != 0u && it.segment == 1u; }
#endif

// Where an item's keys come from. The kernels branch on it once per tile, not
// per load, and call the loads with it as a constant: a per-load branch
// between the sources made the prefill kernel's key loop 20% slower.
const uint PA_SRC_CACHE = 0u;
const uint PA_SRC_SUFFIX = 1u;          // the new K/V views, 16-byte loads
const uint PA_SRC_SUFFIX_NARROW = 2u;   // their offsets or strides are not multiples of 8 elements
#define PA_SUFFIX_SOURCE ((pc.flags & PA_FLAG_SUFFIX_NARROW) != 0u ? PA_SRC_SUFFIX_NARROW : PA_SRC_SUFFIX)
uint pa_key_source(PaItem it) {
  if (!pa_suffix_item(it)) return PA_SRC_CACHE;
  return PA_SUFFIX_SOURCE;
}

// Element index of key k_pos's row (the item's kv head) in the new K or V view.
uint pa_suffix_row(PaItem it, bool is_value, int k_pos) {
  const uint token = it.token0 + uint(k_pos - it.ctx);
  const uint head_stride = (pc.PA_PUSH_NEW_KV_HEAD_STRIDES >> (is_value ? 16u : 0u)) & 0xFFFFu;
  const uint token_stride = is_value ? pc.PA_PUSH_NEW_V_TOKEN_STRIDE : pc.PA_PUSH_NEW_K_TOKEN_STRIDE;
  return pa_view_offset(is_value ? PA_VIEW_NEW_V : PA_VIEW_NEW_K) + token * token_stride + it.kv_head * head_stride;
}

// Eight elements of the new K or V view from element `at`: one 16-byte load,
// or eight 2-byte ones (narrow).
VKA_DEFINE_KV_RAW8(pa_suffix_raw8, new_k_vec, new_k16, new_v_vec, new_v16)

// The eight values of pa_load_raw8's word, fp8 values times `fp8_scale`.
void pa_decode_raw8(uvec4 w, float fp8_scale, out float x[8]) {
  if (PA_FP8_CACHE) {
    VKA_DECODE_FP8X8(w, PA_CACHE_DTYPE == DTYPE_FP8_E4M3, fp8_scale, x)
  } else {
    vka_decode_16bit8(w, PA_CACHE_DTYPE != DTYPE_F16, x);
  }
}

// ---- Keys from either source ---------------------------------------------------

// Where key k_pos's K (is_value false) or V starts for the item: its cache
// block's address (entry: the block-table entry, pa_raw_block), or in a
// suffix item the element index of its row in the new K/V view.
uint64_t pa_key_at(PaItem it, bool is_value, int k_pos, int entry) {
  if (pa_suffix_item(it)) return uint64_t(pa_suffix_row(it, is_value, k_pos));
  return pa_block_address(is_value, pa_checked_block(entry, it.seq, k_pos));
}

// Eight consecutive head dims (d, a multiple of 8) of key k_pos from where
// pa_key_at put it, raw: the cache's bits, or q's dtype from the suffix.
// src: pa_key_source of the item (a constant where loads are issued in a loop).
uvec4 pa_key_raw8(uint src, uint64_t at, bool is_value, int k_pos, uint head, uint d) {
  if (PA_KV_SUFFIX != 0u && src != PA_SRC_CACHE) return pa_suffix_raw8(src == PA_SRC_SUFFIX_NARROW, is_value, uint(at) + d);
  return pa_load_raw8(at, is_value, uint(k_pos) % PA_BLOCK_SIZE, head, d);
}

// pa_key_raw8's eight values as f32: fp8 cache values times `fp8_scale`.
void pa_decode_key8(bool suffix, uvec4 w, float fp8_scale, out float x[8]) {
  if (PA_KV_SUFFIX != 0u && suffix) {
    vka_decode_16bit8(w, PA_Q_DTYPE == DTYPE_BF16, x);
    return;
  }
  pa_decode_raw8(w, fp8_scale, x);
}

// The factors an item's scores and values take in the matrix kernels: the
// softmax scale, and an fp8 cache's k_scale and v_scale (the suffix's keys
// have none).
float pa_score_scale(PaItem it) { return pc.scale * (PA_FP8_CACHE && !pa_suffix_item(it) ? pc.k_scale * PA_STAGED_FP8_FACTOR : 1.0); }
float pa_value_scale(PaItem it) { return PA_FP8_CACHE && !pa_suffix_item(it) ? pc.v_scale * PA_STAGED_FP8_FACTOR : 1.0; }

// Logit of score s (scale * q.k) for local row r at q_pos and key k_pos:
// softcap, masks and biases as configured (attention_logits.glsl).
float pa_logit(PaItem it, float s, uint r, int q_pos, int k_pos) {
  VkaLogitParams p;
  p.has_softcap = PA_HAS_SOFTCAP != 0u;
  p.softcap = pc.softcap;
  p.has_window = PA_HAS_WINDOW != 0u;
  p.window = pc.sliding_window;
  p.has_alibi = PA_HAS_ALIBI != 0u;
  p.alibi_slope = PA_HAS_ALIBI != 0u ? pa_alibi_slope(PA_ROW_HEAD(it, r)) : 0.0;
  p.ctx = it.ctx;
  float bias = 0.0;
  if (PA_HAS_QQ_BIAS != 0u) {
    const int kj = k_pos - it.ctx;
    const uint qi = PA_ROW_QUERY(it, r);
    if (kj >= 0 && uint(kj) < pc.qq_bias_columns && qi < pc.qq_bias_rows)
      bias = qq_bias_words[pa_view_offset(PA_VIEW_QQ_BIAS) + qi * pc.qq_bias_stride + uint(kj)];
  }
  return vka_logit(s, p, q_pos, k_pos, it.kv_end, bias);
}

// The factor that turns local row r's unnormalised accumulator into its
// output, from its softmax state (m, l) and the head's sink (0 for a row that
// saw nothing; 1 where the kernel writes split-KV partial results). A kernel
// that writes many elements of a row computes it once
// (pa_write_result_scaled); pa_write_result computes it per element.
float pa_result_factor(PaItem it, uint r, float m, float l) {
  if (PA_WRITES_PARTIAL || r >= it.row_count) return 1.0;
  const uint head = PA_ROW_HEAD(it, r);
  float factor, lse;
  const float sink = PA_HAS_SINKS != 0u ? pa_sink(head, false) : VKA_NEG_INF;
  vka_softmax_finish(m, l, PA_HAS_SINKS != 0u, sink, factor, lse);
  return factor;
}

// What a row's result writes once, with its element 0: the ALiBi slope's
// check, and without split-KV the LSE (and the sink's check).
void pa_write_row_once(uint token, uint head, float m, float l) {
  if (PA_HAS_ALIBI != 0u) pa_alibi_slope_checked(head);
  if (PA_WRITES_PARTIAL || (PA_WRITE_LSE == 0u && PA_HAS_SINKS == 0u)) return;
  float unused, lse;
  const float sink = PA_HAS_SINKS != 0u ? pa_sink(head, true) : VKA_NEG_INF;
  vka_softmax_finish(m, l, PA_HAS_SINKS != 0u, sink, unused, lse);
  if (PA_WRITE_LSE != 0u) pa_write_lse(token, head, lse);
}

// Declares `token` and `head` of local row r.
#define PA_ROW_TOKEN_AND_HEAD(it, r)                    \
  const uint token = (it).token0 + PA_ROW_QUERY(it, r); \
  const uint head = PA_ROW_HEAD(it, r);

// Element d of local row r's result, from its unnormalised accumulator o,
// softmax state (m, l) and pa_result_factor: the output (and LSE, written
// with d == 0) without split-KV; with it, this segment's partial result for
// paged_attention_reduce.
void pa_write_result_scaled(PaItem it, uint r, uint d, float o, float m, float l, float factor) {
  if (r >= it.row_count) return;
  PA_ROW_TOKEN_AND_HEAD(it, r)
  if (PA_WRITES_PARTIAL) pa_write_partial(token, head, it.segment, d, o, m, l);
  else pa_write_out(token, head, d, o * factor);
  if (d == 0u) pa_write_row_once(token, head, m, l);
}

#if PA_PREFILL_KERNEL
// Elements d .. d + 7 (d a multiple of 8) of local row r's result, as
// pa_write_result_scaled writes them: one 16-byte store for a 16-bit output,
// two for f32 outputs and split-KV partial results (which
// abi/paged_attention.h aligns), where out's rows lie on 16-byte words
// (PA_FLAG_OUT_WIDE); fp8 outputs and the rest one element at a time. (The
// prefill kernel's epilogue made 64 element stores per invocation and item.)
void pa_write_result8_scaled(PaItem it, uint r, uint d, float o[8], float m, float l, float factor) {
  const bool narrow_out = PA_OUT_DTYPE == DTYPE_FP8_E4M3 || PA_OUT_DTYPE == DTYPE_FP8_E5M2 || (pc.flags & PA_FLAG_OUT_WIDE) == 0u;
  if (!PA_WRITES_PARTIAL && narrow_out) {
    [[unroll]] for (uint i = 0; i < 8u; ++i) pa_write_result_scaled(it, r, d + i, o[i], m, l, factor);
    return;
  }
  if (r >= it.row_count) return;
  PA_ROW_TOKEN_AND_HEAD(it, r)
  if (PA_WRITES_PARTIAL) {
    const uint slot = pa_partial_slot(token, head, it.segment), at = pa_partial_out(slot, d);
    workspace4[at / 4u] = vec4(o[0], o[1], o[2], o[3]);
    workspace4[at / 4u + 1u] = vec4(o[4], o[5], o[6], o[7]);
    if (d == 0u) pa_write_partial_stats(slot, m, l);
  } else {
    vka_store_out8(PA_OUT_AT(token, head, d), o, factor);
  }
  if (d == 0u) pa_write_row_once(token, head, m, l);
}

// Prefix prefill's new-token pass (PA_PASS_NEW_TOKENS): local row r's
// partial result from the context pass (segment 0; the dispatch before),
// its (m, l) and its dims d .. d + 7 (d a multiple of 8), for an item with
// after_context.
vec2 pa_context_stats(PaItem it, uint r) {
  PA_ROW_TOKEN_AND_HEAD(it, r)
  return workspace_in2[pa_partial_stats(pa_partial_slot(token, head, 0u)) / 2u];
}
void pa_context_out8(PaItem it, uint r, uint d, out vec4 lo, out vec4 hi) {
  PA_ROW_TOKEN_AND_HEAD(it, r)
  const uint at = pa_partial_out(pa_partial_slot(token, head, 0u), d);
  lo = workspace_in4[at / 4u];
  hi = workspace_in4[at / 4u + 1u];
}
#endif

void pa_write_result(PaItem it, uint r, uint d, float o, float m, float l) {
  pa_write_result_scaled(it, r, d, o, m, l, pa_result_factor(it, r, m, l));
}
#endif
