// Block-sparse attention's side of the tiled kernels (paged_prefill.comp,
// paged_attention.comp): the same functions paged_attention_io.glsl,
// kv_source.glsl and paged_attention_tiles.glsl give the paged op, for
// FlexAttention's contract (abi/block_sparse.h):
//   the work item: PA_BM query rows of one (batch, q head) inside one q block;
//   Q and the output: [B, Hq, L, D] tensors, any strides;
//   the K/V source: [Bkv, Hkv, Lkv, D] tensors in q's dtype (the paged
//     op's suffix loads, PA_SRC_SUFFIX), Bkv = 1 broadcast by a zero stride;
//     or with BS_PAGED_KV the paged cache (any layout, q's dtype or fp8),
//     batch b's keys the first Lkv tokens of block-table row b's blocks,
//     read as the paged op reads it (kv_cache_reads.glsl);
//   the tile walk: the mask row's partial blocks, then its full blocks, each
//     kv_block / PA_BN tiles; an index outside the keys is reported and its
//     tiles read nothing;
//   logits: the mods of block_sparse_mods.glsl (masks in partial blocks only);
//   results: out, LSE and the row max (natural log, FlexAttention's units).
// Include after abi/block_sparse.h (built with VKA_OP_BLOCK_SPARSE).
#ifndef VKATTN_BLOCK_SPARSE_IO_GLSL
#define VKATTN_BLOCK_SPARSE_IO_GLSL
#ifndef PA_PREFILL_KERNEL
#define PA_PREFILL_KERNEL 0
#endif
#include "number_formats.glsl"
#include "online_softmax.glsl"
#include "status.glsl"
#include "kv_tensor_loads.glsl"

const uint PA_NUM_Q_HEADS = PA_NUM_KV_HEADS * PA_GQA;
// V's head size: BS_V_HEAD_SIZE, or q.k's (0). Only the scalar kernel takes
// a different one; the host keeps the prefill kernel's equal.
const uint PA_V_HEAD_SIZE = BS_V_HEAD_SIZE == 0u ? PA_HEAD_SIZE : BS_V_HEAD_SIZE;
// K/V's dtype: q's (PA_CACHE_DTYPE = PA_Q_DTYPE), but over the paged cache
// (BS_PAGED_KV) the cache's, which may be fp8: the host sets PA_CACHE_DTYPE
// to it there alone.
const bool PA_FP8_CACHE = PA_CACHE_DTYPE == DTYPE_FP8_E4M3 || PA_CACHE_DTYPE == DTYPE_FP8_E5M2;
const uint PA_ESIZE = PA_FP8_CACHE ? 1u : 2u;   // the paged cache's bytes per element

layout(set = 0, binding = BS_BINDING_Q, std430) readonly buffer BsQ16 { uint16_t q16[]; };
layout(set = 0, binding = BS_BINDING_OUT, std430) writeonly buffer BsOut16 { uint16_t out16[]; };
layout(set = 0, binding = BS_BINDING_OUT, std430) writeonly buffer BsOut32 { float out32[]; };
layout(set = 0, binding = BS_BINDING_OUT, std430) writeonly buffer BsOutVec { uvec4 out_vec[]; };
#include "out_words.glsl"
layout(set = 0, binding = BS_BINDING_LSE, std430) writeonly buffer BsLse { float lse_out[]; };
layout(set = 0, binding = BS_BINDING_ROW_MAX, std430) writeonly buffer BsRowMax { float row_max_out[]; };
layout(set = 0, binding = BS_BINDING_K, std430) readonly buffer BsK16 { uint16_t k16[]; };
layout(set = 0, binding = BS_BINDING_K, std430) readonly buffer BsKVec { uvec4 k_vec[]; };
layout(set = 0, binding = BS_BINDING_V, std430) readonly buffer BsV16 { uint16_t v16[]; };
layout(set = 0, binding = BS_BINDING_V, std430) readonly buffer BsVVec { uvec4 v_vec[]; };
layout(set = 0, binding = BS_BINDING_KV_NUM_BLOCKS, std430) readonly buffer BsKvNum { int bs_kv_num_blocks[]; };
layout(set = 0, binding = BS_BINDING_KV_INDICES, std430) readonly buffer BsKvIdx { int bs_kv_indices[]; };
layout(set = 0, binding = BS_BINDING_FULL_NUM_BLOCKS, std430) readonly buffer BsFullNum { int bs_full_num_blocks[]; };
layout(set = 0, binding = BS_BINDING_FULL_INDICES, std430) readonly buffer BsFullIdx { int bs_full_indices[]; };

#ifndef BS_STAGED_DOCUMENTS
#define BS_STAGED_DOCUMENTS 0
#endif
#if PA_PREFILL_KERNEL && BS_STAGED_DOCUMENTS
// The document modules' (block_sparse_documents, taken for masks with the
// document mod): document ids in shared memory, so that the per-element
// masks of partial tiles read no global memory. The item's rows' are staged
// by bs_stage_row_documents before the key loop's barriers; each tile's
// keys' by bs_stage_key_documents, where the kernel locates the tile's keys,
// two tiles ahead: tile t's in third t % 3 of bs_doc_keys, so that the
// barriers of the tiles between order the stores before tile t's reads, and
// tile t - 3's reads before the stores. pa_item_logit passes a pair's two
// to the mods (BS_DOCUMENT_IDS_GIVEN, block_sparse_mods.glsl).
shared int bs_doc_rows[PA_BM];
shared int bs_doc_keys[3u * PA_BN];
#define BS_DOCUMENT_IDS_GIVEN 1
#endif
#include "block_sparse_mods.glsl"

struct PaItem {
  uint b, h, kv_head;        // batch, q head, its kv head
  uint row_start, row_count;  // query rows [row_start, row_start + row_count)
  uint list;                  // the mask row's first index-list entry
  int partial, full;          // its partial and full blocks
  uint seq;                   // its block-table row with BS_PAGED_KV (the batch); else unused
  bool valid;
};

uint bs_q_block() { return pc.block_sizes & 0xFFFFu; }
// The kv block size is the pipeline's (a spec constant: the variant's, which
// the op takes from the mask), so that the tile walk's divisions by it and
// by the tiles per block, several in every tile, are divisions by constants
// that the driver turns into multiplies; by the push constant's value they
// were divisions by a run-time value (DEVELOPERS.md, "The tile walk's
// divisions").
uint bs_kv_block() { return BS_KV_BLOCK; }
uint bs_kv_block_count() { return (pc.kv_len + bs_kv_block() - 1u) / bs_kv_block(); }

// A block count as the lists hold it, kept within [0, kv_blocks] (reported
// otherwise, the row | 2^31 for the full list's count).
int bs_checked_count(int n, uint row, bool full) {
  if (n < 0 || uint(n) > pc.kv_blocks) {
    vka_report(STATUS_BLOCK_MASK_COUNT, full ? row | 0x80000000u : row, pc.kv_blocks, uint(n));
    return clamp(n, 0, int(pc.kv_blocks));
  }
  return n;
}

// Work item wg: batch (slowest), q head, q tile. A (batch, head)'s q tiles
// are neighbours, so the items running at once share their K/V through L2
// (and the q heads of one kv head are neighbours too); with the heads
// fastest, the items running at once each read another head's K/V. Within
// a head the later q tiles run first (the kernels run items from the last):
// under causal masks they hold more blocks.
PaItem pa_load_item(uint wg) {
  PaItem it;
  const uint q_tiles = (pc.q_len + PA_BM - 1u) / PA_BM;
  const uint bh = wg / q_tiles;
  const uint tile = wg % q_tiles;
  it.b = bh / PA_NUM_Q_HEADS;
  it.h = bh % PA_NUM_Q_HEADS;
  it.kv_head = it.h / PA_GQA;
  it.seq = it.b;
  it.row_start = tile * PA_BM;
  it.valid = it.row_start < pc.q_len;
  it.row_count = it.valid ? min(PA_BM, pc.q_len - it.row_start) : 0u;
  const uint sz = pc.mask_extents & 0xFFFFu, sh = pc.mask_extents >> 16;
  const uint qb = it.row_start / bs_q_block();   // the host keeps PA_BM dividing q_block
  const uint row = ((it.b % sz) * sh + it.h % sh) * pc.q_blocks + qb;
  it.list = row * pc.kv_blocks;
  it.partial = it.valid ? bs_checked_count(bs_kv_num_blocks[bs_view_offset(BS_BINDING_KV_NUM_BLOCKS - 1u) + row], row, false) : 0;
  it.full = it.valid && (pc.flags & BS_FLAG_FULL_BLOCKS) != 0u
                ? bs_checked_count(bs_full_num_blocks[bs_view_offset(BS_BINDING_FULL_NUM_BLOCKS - 1u) + row], row, true)
                : 0;
  return it;
}

// Where element d of local row r's query lies in q16 (row r < row_count).
#define BS_Q_AT(it, r, d)                                                                    \
  (bs_view_offset(BS_BINDING_Q - 1u) + (it).b * pc.q_batch_stride + (it).h * pc.q_head_stride + \
   ((it).row_start + (r)) * pc.q_token_stride + (d))

uint pa_q_bits(PaItem it, uint r, uint d) {
  if (r >= it.row_count) return 0u;
  return uint(q16[BS_Q_AT(it, r, d)]);
}

// Whether every view is wide (16-byte loads and stores), by the pipeline's form.
bool bs_all_wide() { return BS_VIEWS_FORM != BS_VIEWS_AT_RUN_TIME; }

#if PA_PREFILL_KERNEL
// As paged_attention_io.glsl's, with BS_FLAG_Q_WIDE.
layout(set = 0, binding = BS_BINDING_Q, std430) readonly buffer BsQ16x8 { uvec4 q16x8[]; };
bool pa_q_wide() { return bs_all_wide() || (pc.flags & BS_FLAG_Q_WIDE) != 0u; }
uvec4 pa_q_raw8(PaItem it, uint r, uint d, bool wide) {
  if (r >= it.row_count) return uvec4(0);
  const uint at = BS_Q_AT(it, r, d);
  VKA_RAW8_BODY(q16x8, q16, wide, at)
}
#endif

// ---- The paged cache (BS_PAGED_KV) ------------------------------------------
// With BS_PAGED_KV, K's and V's stride words in the push constants carry the
// cache (abi/block_sparse.h), and the kernels read it through the paged op's
// functions (kv_cache_reads.glsl: the chunk bases in shared memory, a block's
// address, a key's eight dims); the block table is bound at K's binding.
// Without it the chunk bases are neither read nor stored (PA_CACHE_READ).
#include "kv_addressing.glsl"
uint64_t bs_chunk_table() { return uint64_t(pc.BS_PUSH_CHUNK_TABLE_LO) | (uint64_t(pc.BS_PUSH_CHUNK_TABLE_HI) << 32); }
#define PA_CACHE_CHUNK_TABLE bs_chunk_table()
#define PA_CACHE_NUM_K_CHUNKS pc.BS_PUSH_NUM_K_CHUNKS
#define PA_CACHE_BLOCKS_PER_CHUNK pc.BS_PUSH_BLOCKS_PER_CHUNK
#define PA_CACHE_CHUNK_MAGIC pc.chunk_magic
#define PA_CACHE_READ (BS_PAGED_KV != 0u)
#include "kv_cache_reads.glsl"
layout(set = 0, binding = BS_BINDING_K, std430) readonly buffer BsBlockTable { int bs_block_table[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) readonly buffer BsCacheScales { float s[2]; };

// An fp8 cache's k_scale (v_scale), from behind its chunk table's zeros
// (the push constants have no word left for them); 1 for K/V of q's dtype.
float pa_decode_scale(bool is_value) {
  if (!PA_FP8_CACHE) return 1.0;
  const uint zeros = KV_CHUNK_TABLE_ZEROS_BYTES(PA_BLOCK_SIZE, PA_HEAD_SIZE, PA_ESIZE);
  return BsCacheScales(bs_chunk_table() + uint64_t(KV_CHUNK_TABLE_SCALES_OFFSET(zeros))).s[is_value ? 1 : 0];
}
// The factors the matrix kernels' scores and values take: the softmax
// scale, and an fp8 cache's scales times its staging factor.
float pa_score_scale(PaItem it) { return PA_FP8_CACHE ? pc.scale * pa_decode_scale(false) * PA_STAGED_FP8_FACTOR : pc.scale; }
float pa_value_scale(PaItem it) { return PA_FP8_CACHE ? pa_decode_scale(true) * PA_STAGED_FP8_FACTOR : 1.0; }

// The block-table entry of key k (< Lkv) of the item's sequence, as stored
// (the host keeps the table's rows long enough for Lkv).
int pa_raw_block(uint seq, int k) {
  if (BS_PAGED_KV == 0u) return 0;
  return bs_block_table[bs_view_offset(BS_BINDING_K - 1u) + seq * pc.BS_PUSH_BLOCK_TABLE_STRIDE + uint(k) / PA_BLOCK_SIZE];
}

// ---- The tile walk ------------------------------------------------------------
const int PA_TILE_KEYS = int(PA_BN);
int bs_tiles_per_block() { return int(bs_kv_block()) / PA_TILE_KEYS; }
int pa_tile_count(PaItem it) { return (it.partial + it.full) * bs_tiles_per_block(); }
bool bs_partial_tile(PaItem it, int t) { return t / bs_tiles_per_block() < it.partial; }

// List entry j (partial blocks, then full ones; `partial`: j < it.partial):
// where it lies, its index as stored, and the report of an index outside
// the keys. Macros, so that bs_block's two forms below share them and each
// compiles to the code it was measured as.
#define BS_LIST_AT(it, j, partial) ((it).list + uint((partial) ? (j) : (j) - (it).partial))
#define BS_INDEX_AT(partial, at)                                         \
  ((partial) ? bs_kv_indices[bs_view_offset(BS_BINDING_KV_INDICES - 1u) + (at)] \
             : bs_full_indices[bs_view_offset(BS_BINDING_FULL_INDICES - 1u) + (at)])
#define BS_REPORT_BAD_INDEX(it, j, partial, idx) \
  vka_report(STATUS_BLOCK_MASK_INDEX, (it).list / pc.kv_blocks, (partial) ? uint(j) : uint((j) - (it).partial) | 0x80000000u, uint(idx))

int bs_raw_index(PaItem it, int j) {
  const bool partial = j < it.partial;
  const uint at = BS_LIST_AT(it, j, partial);
  return BS_INDEX_AT(partial, at);
}

// The report of key k's block-table entry outside the cache: the sequence,
// the table's column and the entry (the paged op's).
#define BS_REPORT_BAD_ENTRY(it, k, entry) vka_report(STATUS_BLOCK_OUT_OF_RANGE, (it).seq, uint(k) / PA_BLOCK_SIZE, uint(entry))
#if PA_DEFERRED_BLOCK_REPORT
void bs_report_bad_index(PaItem it, int j, int idx) {
  const bool partial = j < it.partial;
  BS_REPORT_BAD_INDEX(it, j, partial, idx);
}
// The prefill kernel reports a bad index after its key loop, as the paged
// op's block-table entries (deferred_report.glsl): pa_bad_key holds the
// first bad list entry j, or BS_BAD_ENTRY | k for key k whose block-table
// entry is bad (BS_PAGED_KV), so that a bad list entry is reported first.
const uint BS_BAD_ENTRY = 0x80000000u;
#include "deferred_report.glsl"
void pa_report_bad_block(PaItem it) {
  if (gl_LocalInvocationIndex != 0u) return;
  const uint j = pa_first_bad_block_key;
  if (j == 0xFFFFFFFFu) return;
  if ((j & BS_BAD_ENTRY) != 0u) {
    const int k = int(j & ~BS_BAD_ENTRY);
    BS_REPORT_BAD_ENTRY(it, k, pa_raw_block(it.seq, k));
  } else {
    bs_report_bad_index(it, int(j), bs_raw_index(it, int(j)));
  }
}
#endif

// The cache's block from key k's entry: an entry that is no block of the
// cache is reported (after the key loop in the prefill kernel) and block 0
// read instead.
uint bs_checked_entry(PaItem it, int k, int entry) {
  const bool bad = entry < 0 || uint(entry) >= pc.BS_PUSH_NUM_BLOCKS;
#if PA_DEFERRED_BLOCK_REPORT
  pa_bad_key = bad ? min(pa_bad_key, BS_BAD_ENTRY | uint(k)) : pa_bad_key;
#else
  if (bad) BS_REPORT_BAD_ENTRY(it, k, entry);
#endif
  return bad ? 0u : uint(entry);
}

// The kv block of list entry j, or the first block past the keys for an
// index outside them (reported).
uint bs_block(PaItem it, int j) {
#if PA_DEFERRED_BLOCK_REPORT
  const int idx = bs_raw_index(it, j);
  const uint n = bs_kv_block_count();
  const bool bad = idx < 0 || uint(idx) >= n;
  pa_bad_key = bad ? min(pa_bad_key, uint(j)) : pa_bad_key;
  return bad ? n : uint(idx);
#else
  // (The scalar kernel's form. Not through bs_raw_index and
  // bs_report_bad_index: its modules' code stays what it was measured as.)
  const bool partial = j < it.partial;
  const uint at = BS_LIST_AT(it, j, partial);
  const int idx = BS_INDEX_AT(partial, at);
  const uint n = bs_kv_block_count();
  if (idx < 0 || uint(idx) >= n) {
    BS_REPORT_BAD_INDEX(it, j, partial, idx);
    return n;
  }
  return uint(idx);
#endif
}
int pa_tile_key0(PaItem it, int t) {
  const int per = bs_tiles_per_block();
  return int(bs_block(it, t / per) * bs_kv_block()) + (t % per) * PA_TILE_KEYS;
}
bool pa_key_in_item(PaItem it, int k) { return k >= 0 && uint(k) < pc.kv_len; }
// pa_tile_key0 reads the index lists: the prefill kernel reads each tile's once.
#define PA_TILE_KEY_LOADS 1

#if PA_PREFILL_KERNEL && BS_STAGED_DOCUMENTS
uint bs_doc_third(int t) { return (uint(t) % 3u) * PA_BN; }
void bs_stage_row_documents(PaItem it) {
  const uint r = gl_LocalInvocationIndex;
  if (!BS_DOCUMENTS || r >= PA_BM) return;
  bs_doc_rows[r] = r < it.row_count ? bs_document_id(int(it.row_start + r) + pc.q_offset) : 0;
}
void bs_stage_key_documents(PaItem it, int k0, int t) {   // (tiles start at multiples of PA_BN)
  const uint j = gl_LocalInvocationIndex;
  if (!BS_DOCUMENTS || j >= PA_BN) return;
  bs_doc_keys[bs_doc_third(t) + j] = bs_document_id(k0 + int(j));
}
#endif

// Non-finite V values: rows see different keys of a partial block only.
struct PaTiles {
  uint unused;
};
PaTiles pa_tiles_setup(PaItem it) { return PaTiles(0u); }
bool pa_tile_partly_seen(PaItem it, PaTiles s, int t, int k0) { return bs_partial_tile(it, t); }

struct PaRows {
  bool has_rows, all_rows;
};
PaRows pa_subgroup_setup(PaItem it, uint row0) { return PaRows(row0 < it.row_count, row0 + 16u <= it.row_count); }
// A tile wholly past the keys (of a kv block that runs past Lkv, or of an
// index outside the keys, reported) has nothing to see.
bool pa_subgroup_skips(PaItem it, PaRows r, int t, int k0) { return !r.has_rows || k0 >= int(pc.kv_len); }
bool pa_subgroup_whole(PaItem it, PaRows r, int t, int k0) {
  return !BS_HAS_SCORE_MOD && r.all_rows && !bs_partial_tile(it, t) && k0 + PA_TILE_KEYS <= int(pc.kv_len);
}

float pa_item_logit(PaItem it, uint row, int k, float s, int t) {
  const int q_idx = int(it.row_start + row);
  if (row >= it.row_count || !pa_key_in_item(it, k)) return VKA_NEG_INF;
#if PA_PREFILL_KERNEL && BS_STAGED_DOCUMENTS
  const int doc_q = bs_doc_rows[row], doc_k = bs_doc_keys[bs_doc_third(t) + uint(k) % PA_BN];
  if (bs_partial_tile(it, t) && !bs_mask(it.b, it.h, q_idx, k, doc_q, doc_k)) return VKA_NEG_INF;
#else
  if (bs_partial_tile(it, t) && !bs_mask(it.b, it.h, q_idx, k)) return VKA_NEG_INF;
#endif
  return bs_score(s, it.b, it.h, q_idx, k);
}

// ---- K/V: the tensors, through the paged op's suffix loads --------------------
// Three sources, in the places of the kernel's LOAD_PART: rows without a
// test (PA_SRC_CACHE's place: every key located is a row of K and V), rows
// whose keys past Lkv read as 0 (a test of each piece's address, between
// the address and the load), and the narrow loads. Where Lkv is a multiple
// of the tile, a tile lies wholly before Lkv or wholly past it, and no
// subgroup uses the tiles past it (pa_subgroup_skips), so their keys may
// read any row (Lkv - 1's) and the test is left out (DEVELOPERS.md, "The
// tile walk's divisions", prices it). A prefill pipeline of a wide form
// (BS_VIEWS_FORM, the host's choice) holds one of the first two; the form
// for narrow views, and the scalar kernel, choose per item.
const uint PA_SRC_CACHE = 0u;
const uint BS_SRC_ROWS = PA_SRC_CACHE;
const uint PA_SRC_SUFFIX = 1u;
const uint PA_SRC_SUFFIX_NARROW = 2u;
bool bs_narrow_views() { return !bs_all_wide() && (pc.flags & BS_FLAG_NARROW_KV) != 0u; }
bool bs_whole_tiles() {
  if (BS_VIEWS_FORM == BS_VIEWS_WIDE_WHOLE_TILES) return true;
  if (BS_VIEWS_FORM == BS_VIEWS_WIDE) return false;   // (keys past Lkv located at no row: read as 0)
  return pc.kv_len != 0u && pc.kv_len % PA_BN == 0u;
}
// (The paged cache: PA_SRC_CACHE, its keys past Lkv located at the cache's zeros.)
uint pa_key_source(PaItem it) {
  if (BS_PAGED_KV != 0u) return PA_SRC_CACHE;
  return bs_narrow_views() ? PA_SRC_SUFFIX_NARROW : bs_whole_tiles() ? BS_SRC_ROWS : PA_SRC_SUFFIX;
}
// K/V views are "suffix" keys (q's dtype, staged as loaded); the cache's are
// not (converted where the cache is fp8: matrix_element.glsl's elem8_from_key).
bool pa_suffix_item(PaItem it) { return BS_PAGED_KV == 0u; }

// Element index of key k's row in K (or V).
uint bs_key_row(PaItem it, bool is_value, int k) {
  if (is_value)
    return bs_view_offset(BS_BINDING_V - 1u) + it.b * pc.v_batch_stride + it.kv_head * pc.v_head_stride + uint(k) * pc.v_token_stride;
  return bs_view_offset(BS_BINDING_K - 1u) + it.b * pc.k_batch_stride + it.kv_head * pc.k_head_stride + uint(k) * pc.k_token_stride;
}

VKA_DEFINE_KV_RAW8(bs_raw8, k_vec, k16, v_vec, v16)

// The scalar kernel's lookups (paged_attention_io.glsl's interface): the
// K/V views' (element indices; the entry is unused), or with BS_PAGED_KV
// the paged cache's (the block's address, as the paged op's).
uint64_t pa_key_at(PaItem it, bool is_value, int k, int entry) {
  if (BS_PAGED_KV != 0u) return pa_block_address(is_value, bs_checked_entry(it, k, entry));
  return uint64_t(bs_key_row(it, is_value, k));
}
uvec4 pa_key_raw8(uint src, uint64_t at, bool is_value, int k, uint head, uint d) {
  if (BS_PAGED_KV != 0u) return pa_load_raw8(at, is_value, uint(k) % PA_BLOCK_SIZE, head, d);
  return bs_raw8(src == PA_SRC_SUFFIX_NARROW, is_value, uint(at) + d);
}

// The prefill kernel's (kv_source.glsl's interface). K/V views: 0 = no key,
// else the row's element index + 1. The paged cache: the address of the
// key's slot for its kv head (pa_slot_address), or for a key past Lkv the
// cache's zeros, so that the loads need no test.
int kv_source_entry(PaItem it, int k) {
  if (BS_PAGED_KV == 0u) return 0;
  return pa_key_in_item(it, k) ? pa_raw_block(it.seq, k) : -1;
}
void kv_source_locate_entry(PaItem it, int k, int entry, out uint64_t k_at, out uint64_t v_at) {
  if (BS_PAGED_KV != 0u) {
    if (!pa_key_in_item(it, k)) {
      k_at = v_at = pa_zeros_address();
      return;
    }
    const uint block = bs_checked_entry(it, k, entry), t = uint(k) % PA_BLOCK_SIZE;
    k_at = pa_slot_address(pa_block_address(false, block), false, t, it.kv_head);
    v_at = pa_slot_address(pa_block_address(true, block), true, t, it.kv_head);
    return;
  }
  k_at = v_at = 0ul;
  if (!pa_key_in_item(it, k)) {
    if (!bs_whole_tiles()) return;
    k = int(pc.kv_len) - 1;   // a skipped tile's: any row
  }
  k_at = uint64_t(bs_key_row(it, false, k)) + 1ul;
  v_at = uint64_t(bs_key_row(it, true, k)) + 1ul;
}
uvec4 kv_source_raw8(uint src, uint64_t at, bool is_value, int k, uint head, uint d) {
  if (BS_PAGED_KV != 0u) return pa_load_slot_raw8(at, is_value, d);
  if (src != BS_SRC_ROWS && at == 0ul) return uvec4(0);
  return bs_raw8(src == PA_SRC_SUFFIX_NARROW, is_value, uint(at - 1ul) + d);
}

// V's raw bits, dims d .. d + 7 (d a multiple of 8), of key k (< Lkv): for
// what runs once after the key loop (block_sparse_nonfinite.glsl).
uvec4 bs_value_raw8(PaItem it, int k, uint d) {
  if (BS_PAGED_KV != 0u) return pa_key_raw8(PA_SRC_CACHE, pa_key_at(it, true, k, pa_raw_block(it.seq, k)), true, k, it.kv_head, d);
  return bs_raw8(bs_narrow_views(), true, bs_key_row(it, true, k) + d);
}

// Eight values of q's dtype as f32.
void pa_decode_raw8(uvec4 w, float unused_scale, out float x[8]) { vka_decode_16bit8(w, PA_Q_DTYPE == DTYPE_BF16, x); }
// A key's eight values: q's dtype, or an fp8 cache's times its scale (fp8_scale).
void pa_decode_key8(bool suffix, uvec4 w, float fp8_scale, out float x[8]) {
  if (PA_FP8_CACHE) {
    VKA_DECODE_FP8X8(w, PA_CACHE_DTYPE == DTYPE_FP8_E4M3, fp8_scale, x)
    return;
  }
  pa_decode_raw8(w, 1.0, x);
}

// ---- Results ------------------------------------------------------------------
// The factor that turns local row r's unnormalised accumulator into its
// output (0 for a row that counted no key): pa_write_result_scaled takes it,
// computed once per row; pa_write_result computes it per element.
float pa_result_factor(PaItem it, uint r, float m, float l) {
  float factor, lse;
  vka_softmax_finish(m, l, false, VKA_NEG_INF, factor, lse);
  return factor;
}

// Element d of out's row: its index in the out view.
uint bs_out_at(PaItem it, uint q, uint d) {
  return bs_view_offset(BS_BINDING_OUT - 1u) + it.b * pc.out_batch_stride + it.h * pc.out_head_stride + q * pc.out_token_stride + d;
}

// What a row's result writes once, with its element 0: the ALiBi slope's
// check (once per item), the LSE and the row max.
void bs_write_row_once(PaItem it, uint r, float m, float l) {
  const uint q = it.row_start + r;
  if (r == 0u && (BS_SCORE_MODS & BS_SCORE_ALIBI) != 0u) {   // once per item: its head's slope
    const float slope = bs_alibi[bs_view_offset(BS_BINDING_ALIBI - 1u) + it.h];
    if (isnan(slope) || isinf(slope)) vka_report(STATUS_PARAMETER, 0u, it.h, floatBitsToUint(slope));
  }
  const uint row = (it.b * PA_NUM_Q_HEADS + it.h) * pc.q_len + q;
  if (PA_WRITE_LSE != 0u) {
    float unused, lse;
    vka_softmax_finish(m, l, false, VKA_NEG_INF, unused, lse);
    lse_out[bs_view_offset(BS_BINDING_LSE - 1u) + row] = lse;
  }
  if (BS_WRITE_ROW_MAX != 0u) row_max_out[bs_view_offset(BS_BINDING_ROW_MAX - 1u) + row] = m;
}

void pa_write_result_scaled(PaItem it, uint r, uint d, float o, float m, float l, float factor) {
  if (r >= it.row_count) return;
  const uint at = bs_out_at(it, it.row_start + r, d);
  if (PA_OUT_DTYPE == DTYPE_F32) out32[at] = o * factor;
  else out16[at] = uint16_t(vka_encode(PA_OUT_DTYPE, o * factor));
  if (d == 0u) bs_write_row_once(it, r, m, l);
}

// Elements d .. d + 7 (d a multiple of 8) of local row r's result: one
// 16-byte store for a 16-bit output (f32: two) whose rows lie on 16-byte
// words (BS_FLAG_OUT_WIDE), else one element at a time (paged_attention_io.glsl's).
void pa_write_result8_scaled(PaItem it, uint r, uint d, float o[8], float m, float l, float factor) {
  if (!bs_all_wide() && (pc.flags & BS_FLAG_OUT_WIDE) == 0u) {
    [[unroll]] for (uint i = 0; i < 8u; ++i) pa_write_result_scaled(it, r, d + i, o[i], m, l, factor);
    return;
  }
  if (r >= it.row_count) return;
  vka_store_out8(bs_out_at(it, it.row_start + r, d), o, factor);
  if (d == 0u) bs_write_row_once(it, r, m, l);
}

void pa_write_result(PaItem it, uint r, uint d, float o, float m, float l) {
  pa_write_result_scaled(it, r, d, o, m, l, pa_result_factor(it, r, m, l));
}

#endif
