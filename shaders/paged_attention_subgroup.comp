#version 460
// Paged attention, matrix paths (coopmat, coopmat2): one workgroup per work
// item of the plan (paged_attention_io.glsl: up to PA_BM rows of one sequence and
// kv head, a range of keys). Each subgroup runs its own online softmax over
// every NW-th tile of 16 keys, with KHR subgroup matrices (16 x 16 x rows),
// and the subgroups' (O, m, l) are merged once at the end. There is no
// workgroup barrier inside the key loop: decode has 4-8 rows per kv head, and
// the kernel must be bound by memory, not by synchronisation.
//
// Per tile, in one subgroup:
//   - K and V arrive as 16-byte loads in registers, issued a tile ahead (the
//     prefetch), and go through this subgroup's part of `stage` (decoded to
//     the element type for fp8) into matrices: V must be transposed into the B layout,
//     which shared memory does well (matrices loaded straight from the
//     cache, 2-byte gathers for V, decoded 12% slower);
//   - S^T = K Q^T; S through shared memory, where each lane owns part of one
//     row (logits, masks, max, sum) and writes P in the element type;
//   - O^T = O^T * alpha + V^T P^T: O stays in accumulator registers; alpha,
//     one value per row, is a matrix loaded with stride 0 (skipped when no
//     row's max moved).
// Keys past the sequence are zero in the tile (unwritten slots may hold NaN
// bits, which P = 0 would not cancel). The matrices' element type is f16, or
// bf16 in the module built with PA_MATRIX_BF16 (bf16 q with bf16 or fp8
// caches; P is then rounded to bf16 too). fp8 values are exact in both;
// k_scale and v_scale apply in f32.
//
// Non-finite V values a row must not see (attention_nonfinite.glsl): in
// partly seen 16-key tiles they are staged as 0 by a pass of its own over the
// staged tile, only in kernels for rows of several tokens: code in the key
// loop, even never run, slows it (DEVELOPERS.md, "What the matrix decode
// kernel is sensitive to").
//
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_KHR_shader_subgroup_vote : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#if VKATTN_PATH == 2 && PA_MATRIX_BF16
#extension GL_NV_cooperative_matrix2 : require
#endif

#include "abi/paged_attention.h"
#include "grid.glsl"
#define PA_DEFERRED_BLOCK_REPORT 1          // a bad block-table entry reported after the key loop
#define PA_DEFERRED_REPORT_PER_SUBGROUP 1   // by each subgroup (no shared word)
#include "paged_attention_io.glsl"
#define PA_MERGE_BATCH 8u           // (split_kv_merge.glsl)
#define PA_MERGE_LOOP [[unroll]]
#include "split_kv_merge.glsl"

#include "matrix_element.glsl"
#include "attention_nonfinite.glsl"

layout(local_size_x_id = 6) in;

const uint D = PA_HEAD_SIZE;
const uint DT = PA_HEAD_SIZE / 16u;        // 16-wide slices of the head
const uint SG = PA_SUBGROUP_SIZE;
const uint NW = PA_WORKGROUP_SIZE / PA_SUBGROUP_SIZE;   // subgroups
const uint BM = PA_BM;                     // rows: 8 (decode, GQA <= 8) or 16
// The rows an item has at most (abi/paged_attention.h): 4 for decode with GQA
// 4. The softmax maps the lanes to these rows only, so that with GQA 4 each
// lane takes 2 keys of a tile rather than 4 (8-row tiles) or 8 (16-row
// tiles): the softmax is the serial part of every tile.
const uint TR = PA_TILE_ROWS;
const uint LPR = PA_SUBGROUP_SIZE / TR;    // lanes per row of a 16-key tile
const uint CPL = 16u / LPR;                // keys each lane owns in the softmax (even: the host's TR)
const uint CPL_MAX = 16u;

// A 16-key tile that starts at a multiple of 16 lies in one block.
const bool ALIGNED = PA_BLOCK_SIZE % 16u == 0u;
// Pieces of a K or V tile each lane loads (8 elements; 16 for fp8, below).
// The next tile's pieces are loaded a phase ahead when they fit 8 registers
// of 16 bytes for K and 8 for V (head_size <= 128 with 32 lanes): 64
// registers (168 in all on an H200). Measured there, more subgroups per SM beat a deeper prefetch: K
// loaded a phase earlier (188 registers) or two tiles ahead (a load-only
// build: 194 registers, 80% of copy against 86% at 100 registers) were slower.
// An fp8 cache's pieces are 16 elements, one 16-byte load each (8 elements
// were an 8-byte load: as many load instructions as f16 for half the bytes),
// except where the V dims of a key lie apart (split layout) and in modules
// with prefix prefill's 16-bit new tokens as a key source.
const bool WIDE = PA_FP8_CACHE && PA_LAYOUT != KV_LAYOUT_SPLIT && PA_KV_SUFFIX == 0u;
const uint PIECE = WIDE ? 16u : 8u;                 // elements per loaded piece
// WIDE pieces are staged with the middle two head dims of every four swapped
// (dims 0, 2, 1, 3: each f16 pair is one mask and at most one shift from the
// fp8 word, where dims in order took a shift and a mask per byte; the
// conversion was most of fp8 decode's time over f16's). Q is staged with the
// same swap, so S is unchanged, and O's dims are swapped back when written.
const bool SWAP_DIMS = WIDE;
// (The conversion: elem8_from_fp8_swapped, matrix_element.glsl.) From head
// size 128 up (8 or more WIDE pieces per row), the two halves of a row's
// WIDE piece k are staged as pieces k and k + D / 16 of the row, not 2k and
// 2k + 1: then each 16-byte store of 8 lanes fills the 32 banks of shared
// memory once, where side by side their stores met 2-way bank conflicts
// (lanes 4 apart, 32 bytes apart). Q is staged, and O written, with the
// same order of dims. (At head size 64 the rows' padding already spreads the
// halves side by side over the banks.)
const bool HALVES = WIDE ? PA_HEAD_SIZE / 16u >= 8u : false;   // (glslang emits no spec-constant &&)
// REGISTER_MATRICES (the host's PA_REGISTER_MATRICES, where the Context found
// the device's matrix element order to be abi/matrix_element_order.h's): the
// WIDE pieces of head size 128 are not staged. Each lane loads the cache
// bytes of its own elements of the K and V^T matrices, converts them as
// staging does, and sets the elements (lane 4 g + t: K rows g and g + 8 are
// keys, its columns the dims below; V^T's rows g and g + 8 are dims, its
// columns keys 2t, 2t + 1, 2t + 8, 2t + 9). The staging's conversion and
// stores, and the matrix loads back, were most of fp8 decode's work per key
// (DEVELOPERS.md, "K and V matrices built in registers"). Q is staged, and O
// written, in the dims order this needs: Q's position 16 j + c, c = 2 t + e
// + 8 h, holds dim 32 t + 4 j + h + 2 e (a word of 4 fp8 values gives a
// slice's pairs (e = 0, 1) for h = 0 and 1, as SWAP_DIMS does); O^T's row
// 16 j + g + 8 h holds dim 16 g + 2 j + h.
// (Not with packed O, PA_PACK_O: in the bf16 modules' batches of at most one
// item per SM that took more registers than staging, spilled, and ran
// slower: DEVELOPERS.md.)
const bool REGISTER_MATRICES = PA_REGISTER_MATRICES != 0u ? (PA_PACK_O == 0u ? (WIDE ? PA_HEAD_SIZE == 128u : false) : false) : false;
// The head dim that staged position p of a Q, K or V row holds.
uint staged_dim(uint p) {
  if (REGISTER_MATRICES) {
    const uint j = p / 16u, c = p % 16u;
    return 32u * ((c % 8u) / 2u) + 4u * j + c / 8u + 2u * (c % 2u);
  }
  const uint q = SWAP_DIMS ? (p & ~3u) | ((p & 1u) << 1) | ((p >> 1) & 1u) : p;
  if (!HALVES) return q;
  const uint piece = q / 8u;   // staged 8-element piece: half piece / (D / 16) of WIDE piece piece % (D / 16)
  return (piece % (D / 16u)) * 16u + (piece / (D / 16u)) * 8u + q % 8u;
}
// The head dim of O^T's row p (the order O is written in).
uint out_dim(uint p) {
  if (REGISTER_MATRICES) return 16u * (p % 8u) + 2u * (p / 16u) + (p % 16u) / 8u;
  return staged_dim(p);
}

const uint TILE_PIECES = 16u * PA_HEAD_SIZE / PIECE;
const uint PPL = (TILE_PIECES + PA_SUBGROUP_SIZE - 1u) / PA_SUBGROUP_SIZE;
const uint STAGED_PPL = (2u * PA_HEAD_SIZE + PA_SUBGROUP_SIZE - 1u) / PA_SUBGROUP_SIZE;   // 8-element staged pieces
const bool PREFETCH = PPL <= 8u;
// The split layout's module (PA_SPLIT_MODULE, "paged_attention_split"): the
// layout keeps each head's V transposed in a block ([head_size]
// [block_size]), 8 keys of one head dim together and a key's dims
// block_size apart, and K's dims in 16-byte groups [head_size / x]
// [block_size][x]. Its V tiles are loaded 8 keys of one dim per piece and
// staged as V^T ([head_size][16 keys], 2 uvec4s per row), which P V reads
// row-major (VT); a key's 8 dims per piece would be eight 2-byte gathers.
// Its K pieces are numbered keys first within each group of dims (KT), so
// that a load's lanes read neighbouring bytes. Where a 16-key tile spans
// blocks (block sizes not multiples of 16), or with prefix prefill's new
// tokens as a key source, V keeps the gathers. Rows of 32 bytes make V^T's
// matrix loads meet 2-way bank conflicts; wider rows would not fit the K
// tile's space. A module of its own: the same code in this one, present but
// never run for other layouts, made NHD decode 7% slower (DEVELOPERS.md).
#ifndef PA_SPLIT_MODULE
#define PA_SPLIT_MODULE 0
#endif
// STAGE_HALVES (the host's PA_STAGE_HALVES, where this module can take it:
// WIDE pieces staged in HALVES, loaded a tile ahead, O not packed): each
// subgroup stages half of its tile's row at a time, whose WIDE pieces' halves
// are the staged row's two halves already. K: the low halves, S's products
// with Q's first D / 32 slices, the high halves, the rest. V: the low halves
// (the high ones kept in registers while the next tile's loads go out),
// P V for O's first slices, then the high halves and the rest. Half the
// shared memory per subgroup, so 3 workgroups of 4 fit an SM's 48 KiB
// (abi/paged_attention.h), for two more subgroup barriers per tile. (In the
// bf16 modules, not with PACK: defined below.)
const uint HALF_ROW_VEC4 = PA_SUBGROUP_HALF_ROW_VEC4(PA_HEAD_SIZE);
// HEAD_HALVES (the host's PA_STAGE_HALVES with a 16-bit cache at head size
// 256, O not packed): a whole 16-key tile of 256 dims is 16 pieces per lane
// for K and 16 for V, more than the registers hold as a prefetch, and staged
// whole it held an SM to one workgroup of 4 (38.5 KiB), each waiting on its
// own loads. Here each half of the head is loaded and staged on its own (8
// pieces per lane: keys 2 i, 2 i + 1 of piece i, 128 dims each), into the
// same half-tile space as STAGE_HALVES (2 workgroups of 4 per SM), and each
// half is loaded two halves ahead of its staging, through two sets of 8
// registers (kraw and vraw in turn): K low, K high, V low, V high. (Only
// where PREFETCH is false: the whole-tile prefetch would load over these
// registers. Taken at head size 128 too, for 16-row tiles, it was correct
// with that kept out, and slower: DEVELOPERS.md.)
#if PA_SPLIT_MODULE
const bool HEAD_HALVES_MODULE = false;
#else
const bool HEAD_HALVES_MODULE = WIDE ? false : (PA_HEAD_SIZE == 256u ? PA_KV_SUFFIX == 0u : false);
#endif
#if PA_SPLIT_MODULE
const bool VT = PA_LAYOUT == KV_LAYOUT_SPLIT && ALIGNED && PA_KV_SUFFIX == 0u;
const uint VT_ROW_VEC4 = 2u;
const bool KT = PA_LAYOUT == KV_LAYOUT_SPLIT && PA_KV_SUFFIX == 0u;
#endif

// Transposed products, so that the rows are the matrices' N (8 or 16: the
// H200 has both for f16, only 16 for bf16; the plan picks by the device's
// shapes): S^T = K Q^T and O^T += V^T P^T. Decode tiles of 8 rows halve O's
// registers (16x8 slices), which lets more subgroups run.
#define MatA coopmat<ELEM, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>        // K or V^T: 16 x 16
#define MatB coopmat<ELEM, gl_ScopeSubgroup, 16, PA_BM, gl_MatrixUseB>     // Q^T or P^T: 16 x rows
#define MatC coopmat<float, gl_ScopeSubgroup, 16, PA_BM, gl_MatrixUseAccumulator>   // S^T or O^T slice

// REGISTER_MATRICES: a lane's 8 elements of a 16 x 16 matrix from 4 ELEM
// pairs, in abi/matrix_element_order.h's order: (row g, columns 2t, 2t + 1),
// (g, 2t + 8, 2t + 9), (g + 8, 2t, 2t + 1), (g + 8, 2t + 8, 2t + 9).
void set_elements(inout MatA m, uint g_lo, uint g_hi, uint g8_lo, uint g8_hi) {
#if PA_MATRIX_BF16
  m[0] = elem_from_bits(uint16_t(g_lo & 0xFFFFu));
  m[1] = elem_from_bits(uint16_t(g_lo >> 16));
  m[2] = elem_from_bits(uint16_t(g_hi & 0xFFFFu));
  m[3] = elem_from_bits(uint16_t(g_hi >> 16));
  m[4] = elem_from_bits(uint16_t(g8_lo & 0xFFFFu));
  m[5] = elem_from_bits(uint16_t(g8_lo >> 16));
  m[6] = elem_from_bits(uint16_t(g8_hi & 0xFFFFu));
  m[7] = elem_from_bits(uint16_t(g8_hi >> 16));
#else
  const f16vec2 a = unpackFloat2x16(g_lo), b = unpackFloat2x16(g_hi), c = unpackFloat2x16(g8_lo), d = unpackFloat2x16(g8_hi);
  m[0] = a.x; m[1] = a.y; m[2] = b.x; m[3] = b.y; m[4] = c.x; m[5] = c.y; m[6] = d.x; m[7] = d.y;
#endif
}

// O^T's 16-wide head slices are 16 separate variables, not an array: with an
// array of 16 (head_size <= 256) the driver put the whole array in local
// memory whenever some slices were unused, and decode ran 10% slower. Each
// variable is live or dead as a whole. EACH_SLICE(F) applies F(j) for j < DT.
#define SLICE_IF(F, j) if (j < DT) { F(j) }
#define EACH_SLICE(F) SLICE_IF(F, 0) SLICE_IF(F, 1) SLICE_IF(F, 2) SLICE_IF(F, 3) SLICE_IF(F, 4) \
  SLICE_IF(F, 5) SLICE_IF(F, 6) SLICE_IF(F, 7) SLICE_IF(F, 8) SLICE_IF(F, 9) SLICE_IF(F, 10)     \
  SLICE_IF(F, 11) SLICE_IF(F, 12) SLICE_IF(F, 13) SLICE_IF(F, 14) SLICE_IF(F, 15)

// O^T's head slices per accumulator (abi/paged_attention.h): in the bf16
// modules, where the plan asks (PA_PACK_O), GO = BM / TR slices side by side
// if an item has at most half a tile's rows (decode: 4 of bf16's 16 columns),
// so that O takes NACC accumulators, not DT. Slice j lies in accumulator
// j / GO, columns (j % GO) * TR + row. Elsewhere one slice per accumulator.
// A non-finite V value reaches every column of its accumulator (0 x Inf is
// NaN), so a packed output that is not finite is computed again key by key
// (packed_exact_element): rare, and only where the cache holds such values.
#if PA_MATRIX_BF16
const uint GO = PA_SUBGROUP_O_GROUPS(PA_BM, PA_TILE_ROWS, PA_PACK_O);
const bool PACK = GO > 1u;
const uint NACC = (DT + GO - 1u) / GO;
const bool STAGE_HALVES = PA_STAGE_HALVES != 0u ? (HALVES ? (PREFETCH ? (PACK ? false : true) : false) : false) : false;
const bool HEAD_HALVES = PA_STAGE_HALVES != 0u ? (HEAD_HALVES_MODULE ? (PACK ? false : true) : false) : false;
#else
const bool STAGE_HALVES = PA_STAGE_HALVES != 0u ? (HALVES ? PREFETCH : false) : false;
const bool HEAD_HALVES = PA_STAGE_HALVES != 0u ? HEAD_HALVES_MODULE : false;
#endif
#define ACC_IF(F, a) if (a < NACC) { F(a) }
#define EACH_ACC(F) ACC_IF(F, 0) ACC_IF(F, 1) ACC_IF(F, 2) ACC_IF(F, 3) ACC_IF(F, 4) ACC_IF(F, 5) \
  ACC_IF(F, 6) ACC_IF(F, 7) ACC_IF(F, 8) ACC_IF(F, 9) ACC_IF(F, 10) ACC_IF(F, 11) ACC_IF(F, 12)      \
  ACC_IF(F, 13) ACC_IF(F, 14) ACC_IF(F, 15)

// Rows of shared tiles are padded by 16 bytes: with rows of 256 bytes (head
// size 128), the 8 rows a matrix load reads at once would share memory banks.
const uint ROW_VEC4 = PA_SUBGROUP_ROW_VEC4(PA_HEAD_SIZE);   // uvec4s per staged Q, K or V row
const uint SROW = STAGE_HALVES || HEAD_HALVES ? HALF_ROW_VEC4 : ROW_VEC4;  // uvec4s per staged K or V row
const uint TILE_VEC4 = 16u * SROW;                          // per subgroup
const uint STAGE_HALVES_U = STAGE_HALVES || HEAD_HALVES ? 1u : 0u;
// Q's TR rows as given (the scale applies to S in f32), then per subgroup a
// [16 keys][head_size] K or V tile of ELEMs; at the end, the subgroups' O
// (f32) for the merge. uvec4: 16-byte stores. Q^T's matrix loads read BM
// columns: those past TR read the first tile, which reaches only S^T's
// columns of rows no item has.
const uint TILES_AT = TR * ROW_VEC4;
shared uvec4 stage[PA_SUBGROUP_STAGE_VEC4_H(PA_HEAD_SIZE, PA_WORKGROUP_SIZE / PA_SUBGROUP_SIZE, PA_TILE_ROWS, STAGE_HALVES_U)];
// The merge's slots: as many subgroups' O ([BM][head_size] f32, SLOT
// uvec4s) as `stage` holds store theirs at once, the rest add theirs in
// later rounds: one round for 8-row tiles, two for 8 subgroups of 16 rows
// (one subgroup per round showed in bf16 decode's time at short contexts:
// DEVELOPERS.md).
const uint SLOT = BM * D / 4u;
const uint STAGE_SLOTS = PA_SUBGROUP_STAGE_VEC4_H(PA_HEAD_SIZE, PA_WORKGROUP_SIZE / PA_SUBGROUP_SIZE, PA_TILE_ROWS, STAGE_HALVES_U) / SLOT;
const uint SLOTS = STAGE_SLOTS < NW ? STAGE_SLOTS : NW;
#if PA_MATRIX_BF16
// bf16's tiles have 16 columns (the device's only bf16 shape), of which an
// item uses TR (4 in decode with GQA 4): slots of all 16 rows made 8
// subgroups, and 2, merge in two rounds, which was most of bf16 decode's time
// over f16's at short contexts (DEVELOPERS.md). Where TR < BM (COMPACT), only
// each O^T slice's TR rows go into the slot: on coopmat2 by a tensor store
// that discards the others, on KHR coopmat through a scratch of the
// subgroup's own, after the slots. (A store of each lane's own elements,
// their rows read from a matrix of indices, was slower: DEVELOPERS.md.)
const uint SCRATCH_VEC4 = 2u * 64u;   // two 16 x 16 f32 matrices, used in turn
const uint STAGE_VEC4 = PA_SUBGROUP_STAGE_VEC4_H(PA_HEAD_SIZE, PA_WORKGROUP_SIZE / PA_SUBGROUP_SIZE, PA_TILE_ROWS, STAGE_HALVES_U);
const uint TR_SLOT = TR * D / 4u;
// Slots of TR rows beside the scratches (0 where none fits, or TR = BM).
// Nested selections: glslang emits no spec-constant && .
const uint COMPACT_FIT = STAGE_VEC4 >= NW * SCRATCH_VEC4 + TR_SLOT ? (STAGE_VEC4 - NW * SCRATCH_VEC4) / TR_SLOT : 0u;
const uint COMPACT_SLOTS = TR < BM ? COMPACT_FIT : 0u;
const bool COMPACT = !PACK && COMPACT_SLOTS > 0u;
// With PACK a slot holds the NACC accumulators as they are (16 x BM f32
// each, column-major): no scratch, and no column stored that holds nothing.
const uint ACC_VEC4 = 4u * BM;
const uint MSLOT = PACK ? NACC * ACC_VEC4 : COMPACT_SLOTS > 0u ? TR_SLOT : SLOT;   // uvec4s per slot
const uint MSLOTS_FIT = PACK ? STAGE_VEC4 / MSLOT : COMPACT_SLOTS > 0u ? COMPACT_SLOTS : STAGE_SLOTS;
const uint MSLOTS = MSLOTS_FIT < NW ? MSLOTS_FIT : NW;
#endif
// S and P tiles are sized by the rows (16 keys x 8 or 16): with 8-row tiles
// 8 subgroups fit 48 KiB at head size 128, and on an H200 a 2-subgroup
// workgroup's 16.2 KiB (not 17.7) let B=256 decode run 19% faster. Per
// subgroup: S^T as [row][key] f32, and P^T as [row][key] ELEM pairs, in S's
// rows past TR where they are free (abi/paged_attention.h).
#if PA_MATRIX_BF16
#define SP_WORDS PA_SUBGROUP_SP_WORDS(PA_BM, PA_TILE_ROWS, GO)
#else
#define SP_WORDS PA_SUBGROUP_SP_WORDS_UNPACKED(PA_BM, PA_TILE_ROWS)
#endif
const uint SP = SP_WORDS;   // words per subgroup
#if PA_MATRIX_BF16
// P^T's TR columns; with PACK, inside its zero-padded region (abi/paged_attention.h).
const uint P_PAD_AT = SP - PA_SUBGROUP_P_PAD_WORDS(PA_BM, PA_TILE_ROWS, GO);
const uint P_AT = PACK ? P_PAD_AT + (GO - 1u) * TR * 8u
                       : PA_SUBGROUP_P_IN_S(PA_BM, PA_TILE_ROWS) ? 8u * PA_BM : 16u * PA_BM;
// The region's zeros that S^T's store overwrites: [P_PAD_AT, P_AT) and
// [P_AT + 8 TR, 16 BM), written again every tile.
const uint ZEROS_BEFORE = P_AT - P_PAD_AT;
const uint ZEROS_AFTER = 16u * PA_BM > P_AT + 8u * TR ? 16u * PA_BM - P_AT - 8u * TR : 0u;
#else
const uint P_AT = PA_SUBGROUP_P_IN_S(PA_BM, PA_TILE_ROWS) ? 8u * PA_BM : 16u * PA_BM;
#endif
// Matrices move through arrays of 16-byte elements (matrix_element.glsl's
// VKA_SHARED_WORD says why); scalars through SP_WORD and ROW_SCALE. (SP_WORDS
// and every offset of a matrix in it are multiples of 8 words:
// abi/paged_attention.h.)
shared uvec4 sp_tile[(PA_WORKGROUP_SIZE / PA_SUBGROUP_SIZE) * SP_WORDS / 4u];
shared vec4 row_scale[(PA_WORKGROUP_SIZE / PA_SUBGROUP_SIZE) * 4u];     // per subgroup: a factor per row
#define SP_WORD(i) VKA_SHARED_WORD(sp_tile, i)
// The softmax reads a lane's S words and writes its P pairs a whole element
// at a time where they fill elements: a lane's CPL keys start at a multiple
// of CPL, S's rows are 16 words and P's 8 (at P_AT, a multiple of 8 words
// unpacked). A word through a dynamic component instead made prefill-shaped
// work (16-row tiles, CPL 8) measurably slower (DEVELOPERS.md, "The decode
// kernel's softmax in 16-byte elements, and the item function inlined").
const bool S_VEC4 = CPL % 4u == 0u;
#if PA_MATRIX_BF16
const bool P_VEC4 = CPL % 8u == 0u ? (PACK ? false : true) : false;
#else
const bool P_VEC4 = CPL % 8u == 0u;
#endif
#define ROW_SCALE(i) VKA_SHARED_WORD(row_scale, i)
// Per row an item has (PA_TILE_ROWS, not 16): with bf16's 16-row tiles the
// bytes this saves are part of what lets 2 workgroups of 4 share an SM's 48
// KiB at GQA 4 and 8 (abi/paged_attention.h counts them).
shared float row_m[(PA_WORKGROUP_SIZE / PA_SUBGROUP_SIZE) * PA_TILE_ROWS];
shared float row_l[(PA_WORKGROUP_SIZE / PA_SUBGROUP_SIZE) * PA_TILE_ROWS];
shared float final_m[PA_TILE_ROWS], final_l[PA_TILE_ROWS];

shared int row_qpos[PA_TILE_ROWS];

// Orders this subgroup's shared-memory accesses across its lanes. Shared
// memory only: a barrier that also covered global memory could make the
// prefetched loads complete first.
void subgroup_sync() {
  controlBarrier(gl_ScopeSubgroup, gl_ScopeSubgroup, gl_StorageSemanticsShared, gl_SemanticsAcquireRelease);
}

// Block-table entries of this subgroup's tiles, SG at a time: lane l holds
// the entry of the subgroup's tile number window * SG + l, so that a tile's
// block is a shuffle away rather than a load that the tile's loads wait for.
int tb_entries = 0;

// Loads the window of entries that starts at the subgroup's n-th tile.
void load_tile_entries(PaItem it, uint n, int a0, int num_tiles, uint warp) {
  const int t = int(warp) + int(n + gl_SubgroupInvocationID) * int(NW);
  tb_entries = ALIGNED && t < num_tiles ? pa_raw_block(it.seq, a0 + 16 * t) : 0;
}

// Entry of the subgroup's n-th tile (tile number warp + n * NW), for ALIGNED.
// Tiles are asked for in order from n = 0, so a new window starts at n % SG ==
// 0; the first window is loaded before the key loop (load_tile_entries), so
// that its latency overlaps the query's.
int tile_entry(PaItem it, uint n, int a0, int num_tiles, uint warp) {
  if (!ALIGNED) return 0;
  if (n % SG == 0u && n > 0u) load_tile_entries(it, n, a0, num_tiles, warp);
  return subgroupShuffle(tb_entries, n % SG);
}

#if PA_SPLIT_MODULE
// The key j (of a 16-key tile) and first head dim d of PIECE-element piece c
// of a K or V tile (not V with VT): a key's pieces in turn, or with KT for K,
// the keys of each 16-byte group of dims in turn (pieces per group g: 1 for
// 16-bit caches, 2 for fp8).
void piece_key_dim(bool is_value, uint c, out uint j, out uint d) {
  if (KT && !is_value) {
    const uint g = 2u / PA_ESIZE;
    j = (c / g) % 16u;
    d = (c / (16u * g)) * (8u * g) + (c % g) * 8u;
    return;
  }
  j = c / (D / PIECE);
  d = (c % (D / PIECE)) * PIECE;
}

// Where 8-element piece c of this subgroup's K or V tile (not WIDE) lies in
// `stage`: [key][head_size], or V^T [head_size][16] with VT.
uint staged_piece_at(bool is_value, uint c, uint warp) {
  const uint at = TILES_AT + warp * TILE_VEC4;
  if (VT && is_value) return at + c;   // (c / 2) * VT_ROW_VEC4 + c % 2
  if (!KT || is_value) return at + (c / (D / 8u)) * ROW_VEC4 + c % (D / 8u);
  uint j, d;
  piece_key_dim(false, c, j, d);   // (KT: PIECE is 8)
  return at + j * ROW_VEC4 + d / 8u;
}
#define STAGED_PIECE_AT(is_value, c, warp) staged_piece_at(is_value, c, warp)
#else
#define STAGED_PIECE_AT(is_value, c, warp) (TILES_AT + (warp) * TILE_VEC4 + ((c) / (D / 8u)) * ROW_VEC4 + (c) % (D / 8u))
#endif

// Loads pieces first + i (i < 8) of this lane of the K or V tile of keys
// [k0, k0 + 16), raw: piece number p of a lane is PIECE-element piece
// lane + p * SG of the row-major [16][head_size] tile (in the split module,
// piece_key_dim's, or for V with VT of the [head_size][16] V^T tile). Zero
// outside the item's keys.
// entry: the tile's block-table entry (ALIGNED; tile_entry). src
// (pa_key_source) is a constant where this is called (load_pieces).
void load_pieces_from(uint src, PaItem it, int k0, int entry, bool is_value, uint first, out uvec4 raw[8]) {
  uint64_t base = 0;
  if (ALIGNED && k0 < it.kv_end && src == PA_SRC_CACHE) base = pa_block_address(is_value, pa_checked_block(entry, it.seq, k0));
  [[unroll]] for (uint i = 0; i < 8u; ++i) {
    raw[i] = uvec4(0);
    const uint c = gl_SubgroupInvocationID + (first + i) * SG;
#if PA_SPLIT_MODULE
    if (VT && is_value) {   // keys k0 + 8 * (c % 2) .. + 7 of head dim c / 2 (some outside: zero_staged_outside)
      const int kp = k0 + 8 * int(c % 2u);
      if (first + i >= PPL || c >= TILE_PIECES || kp >= it.kv_end || kp + 8 <= it.kv_begin) continue;
      raw[i] = pa_load_split_v8(base, uint(kp) % PA_BLOCK_SIZE, it.kv_head, c / 2u);
      continue;
    }
    uint j, d;
    piece_key_dim(is_value, c, j, d);
#else
    uint j = c / (D / PIECE), d = (c % (D / PIECE)) * PIECE;
    if (HEAD_HALVES) {   // first = 8 h: piece i of half h, a [16 keys][D / 2] tile
      const uint ch = gl_SubgroupInvocationID + i * SG;
      j = ch / (D / 16u);
      d = (first / 8u) * (D / 2u) + (ch % (D / 16u)) * 8u;
    }
    if (REGISTER_MATRICES) {   // piece q of lane 4 g + t: 16 values of key j from dim d
      const uint g = gl_SubgroupInvocationID / 4u, t = gl_SubgroupInvocationID % 4u, q = first + i;
      j = is_value ? 2u * t + q % 2u + 8u * (q / 2u) : g + 8u * (q / 2u);
      d = is_value ? 16u * g : 32u * t + 16u * (q % 2u);
    }
#endif
    const int k_pos = k0 + int(j);
    if (first + i >= PPL || c >= TILE_PIECES || k_pos >= it.kv_end || k_pos < it.kv_begin) continue;
    if (src != PA_SRC_CACHE) {   // prefix prefill's new tokens: no block
      raw[i] = pa_suffix_raw8(src == PA_SRC_SUFFIX_NARROW, is_value, pa_suffix_row(it, is_value, k_pos) + d);
      continue;
    }
    if (!ALIGNED) base = pa_block_address(is_value, pa_checked_block(pa_raw_block(it.seq, k_pos), it.seq, k_pos));
    raw[i] = WIDE ? pa_load_raw16_fp8(base, is_value, uint(k_pos) % PA_BLOCK_SIZE, it.kv_head, d)
                  : pa_load_raw8(base, is_value, uint(k_pos) % PA_BLOCK_SIZE, it.kv_head, d);
  }
}
void load_pieces(PaItem it, int k0, int entry, bool is_value, uint first, out uvec4 raw[8]) {
  const uint src = pa_key_source(it);
  if (src == PA_SRC_CACHE) load_pieces_from(PA_SRC_CACHE, it, k0, entry, is_value, first, raw);
  else if (src == PA_SRC_SUFFIX) load_pieces_from(PA_SRC_SUFFIX, it, k0, entry, is_value, first, raw);
  else load_pieces_from(PA_SRC_SUFFIX_NARROW, it, k0, entry, is_value, first, raw);
}

// Writes loaded pieces as ELEMs into this subgroup's part of `stage`.
#if PA_SPLIT_MODULE
void store_pieces(bool suffix, bool is_value, uvec4 raw[8], uint first, uint warp) {
#define STORE_PIECES(suffix, is_value, raw, first, warp) store_pieces(suffix, is_value, raw, first, warp)
#else
void store_pieces(bool suffix, uvec4 raw[8], uint first, uint warp) {
#define STORE_PIECES(suffix, is_value, raw, first, warp) store_pieces(suffix, raw, first, warp)
#endif
  [[unroll]] for (uint i = 0; i < 8u; ++i) {
    const uint c = gl_SubgroupInvocationID + (first + i) * SG;
    if (first + i >= PPL || c >= TILE_PIECES) continue;
    if (WIDE) {   // 16 fp8 values: two staged pieces (HALVES: apart)
      const uint row = TILES_AT + warp * TILE_VEC4 + (c / (D / 16u)) * ROW_VEC4, k = c % (D / 16u);
      stage[row + (HALVES ? k : 2u * k)] = elem8_from_fp8_swapped(raw[i].x, raw[i].y);
      stage[row + (HALVES ? k + D / 16u : 2u * k + 1u)] = elem8_from_fp8_swapped(raw[i].z, raw[i].w);
    } else {
      stage[STAGED_PIECE_AT(is_value, c, warp)] = elem8_from_key(suffix, raw[i]);
    }
  }
}

// Replaces the non-finite values this lane staged by 0; returns whether there
// were any. A pass of its own over shared memory, run for partly seen tiles
// only: the same test in store_pieces slowed every tile's loop.
bool zero_staged_nonfinite(uint warp) {
  bool any_replaced = false;
  for (uint i = 0; i < STAGED_PPL; ++i) {
    const uint c = gl_SubgroupInvocationID + i * SG;
    if (c >= 2u * D) continue;
    const uint at = STAGED_PIECE_AT(true, c, warp);
    const uvec4 h = stage[at], f = elem8_finite_or_zero(h);
    if (f != h) {
      stage[at] = f;
      any_replaced = true;
    }
  }
  return any_replaced;
}

// STAGE_HALVES: half h of this lane's WIDE pieces (h = 0: raw's x and y,
// the staged row's first half) into this subgroup's half tile.
void store_half(uvec4 raw[8], uint h, uint warp) {
  [[unroll]] for (uint i = 0; i < 8u; ++i) {
    const uint c = gl_SubgroupInvocationID + i * SG;
    if (i >= PPL || c >= TILE_PIECES) continue;
    const uint at = TILES_AT + warp * TILE_VEC4 + (c / (D / 16u)) * SROW + c % (D / 16u);
    stage[at] = h == 0u ? elem8_from_fp8_swapped(raw[i].x, raw[i].y) : elem8_from_fp8_swapped(raw[i].z, raw[i].w);
  }
}
// HEAD_HALVES: this lane's pieces of a half tile (load_pieces' first = 8 h)
// into this subgroup's half tile.
void store_head_half(bool suffix, uvec4 raw[8], uint warp) {
  [[unroll]] for (uint i = 0; i < 8u; ++i) {
    const uint c = gl_SubgroupInvocationID + i * SG;
    stage[TILES_AT + warp * TILE_VEC4 + (c / (D / 16u)) * SROW + c % (D / 16u)] = elem8_from_key(suffix, raw[i]);
  }
}
// zero_staged_nonfinite for a staged half tile (STAGE_HALVES, HEAD_HALVES).
bool zero_staged_half(uint warp) {
  bool any_replaced = false;
  for (uint i = 0; i < (D + SG - 1u) / SG; ++i) {
    const uint c = gl_SubgroupInvocationID + i * SG;   // 8-element piece c of [16 keys][D / 2]
    if (c >= D) continue;
    const uint at = TILES_AT + warp * TILE_VEC4 + (c / (D / 16u)) * SROW + c % (D / 16u);
    const uvec4 h = stage[at], f = elem8_finite_or_zero(h);
    if (f != h) {
      stage[at] = f;
      any_replaced = true;
    }
  }
  return any_replaced;
}

#if PA_SPLIT_MODULE
// The keys of a staged V^T tile (VT) outside the item's range as 0: a piece
// of 8 keys may reach past the sequence, whose slots may hold NaN bits that
// P = 0 would not cancel. A pass of its own, for the tiles at the range's
// ends only: the same masking in the loads, inside every tile's loop, made
// the split layout's decode twice as slow.
void zero_staged_outside(PaItem it, int k0, uint warp) {
  for (uint i = 0; i < STAGED_PPL; ++i) {
    const uint c = gl_SubgroupInvocationID + i * SG;
    if (c >= 2u * D) continue;
    const int kp = k0 + 8 * int(c % 2u);
    uvec4 keep;
    [[unroll]] for (uint w = 0; w < 4u; ++w) {
      const int a = kp + 2 * int(w);
      keep[w] = (a >= it.kv_begin && a < it.kv_end ? 0xFFFFu : 0u) |
                (a + 1 >= it.kv_begin && a + 1 < it.kv_end ? 0xFFFF0000u : 0u);
    }
    stage[staged_piece_at(true, c, warp)] &= keep;
  }
}
#endif

// A tile into `stage`: from pieces loaded a phase before (PREFETCH), or
// loaded now, 8 pieces at a time. The matrix slices are then read from
// `stage` one at a time, where used, so that few registers hold them.
void stage_tile(PaItem it, int k0, int entry, bool is_value, uvec4 raw[8], uint warp) {
  subgroup_sync();   // every lane is done reading the previous tile
  if (PREFETCH) {
    STORE_PIECES(pa_suffix_item(it), is_value, raw, 0u, warp);
  } else {
    for (uint g = 0; g < PPL; g += 8u) {
      uvec4 now[8];
      load_pieces(it, k0, entry, is_value, g, now);
      STORE_PIECES(pa_suffix_item(it), is_value, now, g, warp);
    }
  }
  subgroup_sync();
}

#if PA_MATRIX_BF16
// Element e of O[TR][head_size] (staged dims) summed over the merge's slots.
float merged_output(uint e) {
  uint f = e;   // its float in a slot
  if (PACK) {
    const uint j = (e % D) / 16u;
    f = (j / GO) * 16u * BM + ((j % GO) * TR + e / D) * 16u + e % 16u;
  }
  float o = 0.0;
  for (uint w = 0; w < MSLOTS; ++w) o += uintBitsToFloat(stage[(w * MSLOT * 4u + f) / 4u][f % 4u]);
  return o;
}

// Element d (a head dim) of local row r of the item's output before
// pa_write_result, relative to the rows' max mm, as an unpacked kernel gives
// it: one key at a time from the cache (or the suffix), K and V as staged
// (ELEMs) and P rounded to ELEM as the kernel's is (from the final max, not
// a running one); the non-finite V values the row sees combined as IEEE sums
// combine them. For outputs that packing made non-finite only.
float packed_exact_element(uint item, uint r, uint d, float mm) {
  PaItem it = pa_load_item(item);
  it.row_count = min(it.row_count, TR);
  const int q_pos = pa_row_position(it, r);
  const bool suffix = pa_suffix_item(it);
  const float staged = 1.0 / PA_STAGED_FP8_FACTOR;   // fp8 values as the kernel stages them
  float sum = 0.0, nonfinite = 0.0;
  // (Loops kept rolled: rarely run, and unrolled they would only add code.)
  [[dont_unroll]] for (int k = it.kv_begin; k < it.kv_end && q_pos >= 0; ++k) {
    const int entry = suffix ? 0 : pa_raw_block(it.seq, k);
    const uint64_t at = pa_key_at(it, false, k, entry);
    float dot = 0.0;
    [[dont_unroll]] for (uint d8 = 0; d8 < D; d8 += 8u) {
      float x[8];
      pa_decode_key8(suffix, pa_key_raw8(pa_key_source(it), at, false, k, it.kv_head, d8), staged, x);
      for (uint i = 0; i < 8u; ++i) dot += float(ELEM(x[i])) * float(elem_from_bits(uint16_t(pa_q_bits(it, r, d8 + i))));
    }
    const float logit = pa_logit(it, dot * pa_score_scale(it), r, q_pos, k);
    if (logit == VKA_NEG_INF) continue;   // masked for this row
    float v[8];
    pa_decode_key8(suffix, pa_key_raw8(pa_key_source(it), pa_key_at(it, true, k, entry), true, k, it.kv_head, d & ~7u), staged, v);
    const float vd = float(ELEM(v[d % 8u]));
    if (isinf(vd) || isnan(vd)) nonfinite = elem_nonfinite_sum(nonfinite, vd);
    else sum += float(ELEM(vka_exp_diff(logit, mm))) * vd;
  }
  return isinf(nonfinite) || isnan(nonfinite) ? nonfinite : sum * pa_value_scale(it);
}
#endif

void main() {
  const uint item = vka_linear_workgroup(pc.grid_x);
  if (item >= pc.num_workgroups) return;
  if (gl_SubgroupSize != SG) {   // the row/lane mapping below assumes SG
    if (gl_LocalInvocationIndex == 0u) vka_report(STATUS_SUBGROUP_SIZE, gl_SubgroupSize, SG, 0u);
    return;
  }
  const uint tid = gl_LocalInvocationIndex;
  const uint warp = gl_SubgroupID, lane = gl_SubgroupInvocationID;
  // The chunk table's loads first: they depend on nothing, and the K/V loads
  // wait on them (through the barrier below) as on the item's lengths.
  const uint64_t chunk_base = pa_fetch_chunk_base();
  PaItem it = pa_load_item(item);
  if (!it.valid) return;   // the same for the whole workgroup
  // Only a replay plan's batch beyond its limits has more (the check reports
  // it): those rows are left out.
  it.row_count = min(it.row_count, TR);
  // Tiles start at multiples of 16 (a tile is then inside one block); keys
  // before kv_begin belong to another segment or lie outside the window.
  const int a0 = it.kv_begin & ~15;
  const int num_tiles = it.kv_end > a0 ? (it.kv_end - a0 + 15) / 16 : 0;
  load_tile_entries(it, 0u, a0, num_tiles, warp);

  if (tid < TR) row_qpos[tid] = pa_row_position(it, tid);
  int seen_lo, seen_hi;
  seen_by_every_row(it, seen_lo, seen_hi);

  for (uint i = tid; i < TR * D / 8u; i += PA_WORKGROUP_SIZE) {
    const uint r = i / (D / 8u), d = (i % (D / 8u)) * 8u;
    uvec4 h;   // q's dtype is the element type: its bits go in unchanged
    [[unroll]] for (uint e = 0; e < 4u; ++e)
      h[e] = pa_q_bits(it, r, staged_dim(d + 2u * e)) | (pa_q_bits(it, r, staged_dim(d + 2u * e + 1u)) << 16);
    stage[r * ROW_VEC4 + d / 8u] = h;
  }
  pa_store_chunk_bases(chunk_base);
  barrier();

  // This lane's part of the softmax: row `my_row`, columns [my_c0, my_c0 + CPL).
  const uint my_row = lane / LPR, my_c0 = (lane % LPR) * CPL;
  float m = VKA_NEG_INF, l = 0.0;

  MatC o0 = MatC(0.0), o1 = o0, o2 = o0, o3 = o0, o4 = o0, o5 = o0, o6 = o0, o7 = o0, o8 = o0, o9 = o0,
       o10 = o0, o11 = o0, o12 = o0, o13 = o0, o14 = o0, o15 = o0;

#if PA_MATRIX_BF16
  if (PACK)   // P^T's zero columns past S^T, which no store overwrites (ordered by stage_tile's sync)
    for (uint w = 16u * BM + lane; w < SP; w += SG) SP_WORD(warp * SP + w) = 0u;
#endif
  bool staged_nonfinite = false;   // a non-finite V value was staged as 0 (rows of several tokens)
  uvec4 kraw[8], vraw[8];   // HEAD_HALVES: the next two half tiles, in turn
  if (PREFETCH || HEAD_HALVES) {   // (all zeros past the end: no load)
    const int entry = tile_entry(it, 0u, a0, num_tiles, warp);
    load_pieces(it, a0 + 16 * int(warp), entry, false, 0u, kraw);
    load_pieces(it, a0 + 16 * int(warp), entry, !HEAD_HALVES, HEAD_HALVES ? 8u : 0u, vraw);
  }
  int next_entry = 0;   // HEAD_HALVES: the subgroup's next tile's block-table entry
  for (int t = int(warp), n = 0; t < num_tiles; t += int(NW), ++n) {
    const int k0 = a0 + 16 * t;
    const int entry = PREFETCH ? 0 : tile_entry(it, uint(n), a0, num_tiles, warp);
    MatC s = MatC(0.0);   // S^T: keys x rows
    // REGISTER_MATRICES: this tile's pieces (K: keys g, g + 8; V: keys 2t,
    // 2t + 1, 2t + 8, 2t + 9), kept while the next tile's are loaded.
    const uvec4 kc0 = kraw[0], kc1 = kraw[1], kc2 = kraw[2], kc3 = kraw[3];
    const uvec4 vc0 = vraw[0], vc1 = vraw[1], vc2 = vraw[2], vc3 = vraw[3];
    if (REGISTER_MATRICES) {
      const int next = tile_entry(it, uint(n + 1), a0, num_tiles, warp);
      load_pieces(it, k0 + 16 * int(NW), next, false, 0u, kraw);
      load_pieces(it, k0 + 16 * int(NW), next, true, 0u, vraw);
      // Slice j: word j of keys g and g + 8, as ELEM pairs of dims (h = 0, 1).
      [[unroll]] for (uint j = 0; j < 8u; ++j) {
        const uvec4 h = elem8_from_fp8_swapped(j < 4u ? kc0[j % 4u] : kc1[j % 4u], j < 4u ? kc2[j % 4u] : kc3[j % 4u]);
        MatA ka;
        set_elements(ka, h.x, h.y, h.z, h.w);
        MatB qb;
        coopMatLoad(qb, stage, 2u * j, ROW_VEC4, gl_CooperativeMatrixLayoutColumnMajor);
        s = coopMatMulAdd(ka, qb, s);
      }
    }
    // K staged whole, or in halves (STAGE_HALVES), each followed by its slices' products.
    const uint K_PARTS = REGISTER_MATRICES ? 0u : STAGE_HALVES || HEAD_HALVES ? 2u : 1u;
    [[unroll]] for (uint h = 0; h < K_PARTS; ++h) {
      if (STAGE_HALVES) {
        subgroup_sync();   // every lane is done reading what the half tile held
        store_half(kraw, h, warp);
        subgroup_sync();
      } else if (HEAD_HALVES) {   // K's half h, then V's half h loaded into its registers
        subgroup_sync();
        if (h == 0u) {
          store_head_half(pa_suffix_item(it), kraw, warp);
          load_pieces(it, k0, entry, true, 0u, kraw);
        } else {
          store_head_half(pa_suffix_item(it), vraw, warp);
          load_pieces(it, k0, entry, true, 8u, vraw);
        }
        subgroup_sync();
      } else {
        stage_tile(it, k0, entry, false, kraw, warp);
      }
      [[unroll]] for (uint j = 0; j < 16u; ++j) {
        if (j >= DT / K_PARTS) continue;
        MatA ka;   // K, head slice h * DT / K_PARTS + j: keys x 16
        MatB qb;   // Q^T, the same slice: 16 x rows
        coopMatLoad(ka, stage, TILES_AT + warp * TILE_VEC4 + 2u * j, SROW, gl_CooperativeMatrixLayoutRowMajor);
        coopMatLoad(qb, stage, 2u * (h * (DT / K_PARTS) + j), ROW_VEC4, gl_CooperativeMatrixLayoutColumnMajor);
        s = coopMatMulAdd(ka, qb, s);
      }
    }
    coopMatStore(s, sp_tile, warp * SP / 4u, 4u, gl_CooperativeMatrixLayoutColumnMajor);   // [row][key]
    uvec4 vhold[8];   // STAGE_HALVES: this tile's V pieces, whose high halves are staged after P V's first half
    if (REGISTER_MATRICES) {
      // (V's matrices are built from vc0..vc3 at P V.)
    } else if (STAGE_HALVES) {
      subgroup_sync();
      store_half(vraw, 0u, warp);
      vhold = vraw;
      if (partly_seen(k0, 16, seen_lo, seen_hi)) {
        subgroup_sync();
        staged_nonfinite = zero_staged_half(warp) || staged_nonfinite;
      }
    } else if (HEAD_HALVES) {   // V's low half, then the next tile's K low half loaded into its registers
      subgroup_sync();
      store_head_half(pa_suffix_item(it), kraw, warp);
      next_entry = tile_entry(it, uint(n + 1), a0, num_tiles, warp);
      load_pieces(it, k0 + 16 * int(NW), next_entry, false, 0u, kraw);
      if (partly_seen(k0, 16, seen_lo, seen_hi)) {
        subgroup_sync();
        staged_nonfinite = zero_staged_half(warp) || staged_nonfinite;
      }
    } else {
      stage_tile(it, k0, entry, true, vraw, warp);
    }
    // (Their writes are ordered before P V's loads by the sync after the softmax.)
#if PA_SPLIT_MODULE
    if (VT && (k0 < it.kv_begin || k0 + 16 > it.kv_end)) zero_staged_outside(it, k0, warp);
#endif
    if (!REGISTER_MATRICES && !STAGE_HALVES && !HEAD_HALVES && partly_seen(k0, 16, seen_lo, seen_hi))
      staged_nonfinite = zero_staged_nonfinite(warp) || staged_nonfinite;
    if (!REGISTER_MATRICES && PREFETCH) {   // the next tile's loads (none past the end), in flight while this one computes
      const int next = tile_entry(it, uint(n + 1), a0, num_tiles, warp);
      load_pieces(it, k0 + 16 * int(NW), next, false, 0u, kraw);
      load_pieces(it, k0 + 16 * int(NW), next, true, 0u, vraw);
    }

    // Logits, the tile's row max, alpha and P for this lane's columns.
    float x[CPL_MAX];
    float tile_max = VKA_NEG_INF;
    uvec4 s4;   // S_VEC4: the element holding keys c .. c + 3
    [[unroll]] for (uint c = 0; c < CPL_MAX; ++c) {
      if (c >= CPL) break;
      const int k_pos = k0 + int(my_c0 + c);
      const uint s_at = warp * SP + my_row * 16u + my_c0 + c;
      if (S_VEC4 && c % 4u == 0u) s4 = sp_tile[s_at / 4u];
      // The scale and the row's position are read here, not held through the
      // loop: 2 registers fewer (168 on an H200, which fits 12 subgroups per SM).
      const float sc = uintBitsToFloat(S_VEC4 ? s4[c % 4u] : SP_WORD(s_at)) * pa_score_scale(it);
      const int q_pos = row_qpos[my_row];
      x[c] = q_pos >= 0 && k_pos >= it.kv_begin ? pa_logit(it, sc, my_row, q_pos, k_pos) : VKA_NEG_INF;
      tile_max = max(tile_max, x[c]);
    }
    for (uint off = 1u; off < LPR; off <<= 1) tile_max = max(tile_max, subgroupShuffleXor(tile_max, off));
    const float alpha = vka_softmax_rescale(m, l, tile_max);
    float sum = 0.0;
    uvec4 p4;   // P_VEC4: the pairs of keys c - c % 8 .. c - c % 8 + 7
    [[unroll]] for (uint c = 0; c < CPL_MAX; c += 2u) {
      if (c >= CPL) break;
      const float p0 = float(ELEM(vka_exp_diff(x[c], m))), p1 = float(ELEM(vka_exp_diff(x[c + 1u], m)));
      const uint p_at = warp * SP + P_AT + (my_row * 16u + my_c0 + c) / 2u;
      if (P_VEC4) {
        p4[(c / 2u) % 4u] = elem_pair_bits(p0, p1);
        if (c % 8u == 6u) sp_tile[p_at / 4u] = p4;
      } else {
        SP_WORD(p_at) = elem_pair_bits(p0, p1);
      }
      sum += p0 + p1;   // the rounded P that P V uses
    }
    for (uint off = 1u; off < LPR; off <<= 1) sum += subgroupShuffleXor(sum, off);
    l += sum;
#if PA_MATRIX_BF16
    if (PACK) {   // P^T's zero columns that this tile's S^T store overwrote
      [[unroll]] for (uint i = 0; i < 16u; ++i) {
        const uint w = lane + i * SG;
        if (w >= ZEROS_BEFORE + ZEROS_AFTER) break;
        SP_WORD(warp * SP + (w < ZEROS_BEFORE ? P_PAD_AT + w : P_AT + 8u * TR + (w - ZEROS_BEFORE))) = 0u;
      }
    }
    // alpha for every column of row my_row: one per slice group
    if (lane % LPR < GO) ROW_SCALE(warp * 16u + (lane % LPR) * TR + my_row) = alpha;
#else
    if (lane % LPR == 0u) ROW_SCALE(warp * 16u + my_row) = alpha;
#endif
    // Rows that saw no key yet (m = -inf, alpha 0) have nothing to rescale.
    const bool rescale = !subgroupAll(alpha == 1.0 || m == VKA_NEG_INF);
    subgroup_sync();
#if PA_MATRIX_BF16
    if (rescale) {
      MatC am;   // element (d, c) = alpha of column c's row
      coopMatLoad(am, row_scale, warp * 4u, 0u, gl_CooperativeMatrixLayoutRowMajor);
#define RESCALE(j) o##j = o##j * am;
      EACH_ACC(RESCALE)
    }
#else
    MatB pb;   // P^T: keys x rows
    coopMatLoad(pb, sp_tile, (warp * SP + P_AT) / 4u, 2u, gl_CooperativeMatrixLayoutColumnMajor);
    if (rescale) {
      MatC am;   // element (d, r) = alpha of row r
      coopMatLoad(am, row_scale, warp * 4u, 0u, gl_CooperativeMatrixLayoutRowMajor);
#define RESCALE(j) o##j = o##j * am;
      EACH_SLICE(RESCALE)
    }
#endif
#if PA_SPLIT_MODULE
#define LOAD_VT(j)                                                                                   \
    if (VT) coopMatLoad(va, stage, TILES_AT + warp * TILE_VEC4 + 16u * VT_ROW_VEC4 * j, VT_ROW_VEC4, gl_CooperativeMatrixLayoutRowMajor); \
    else coopMatLoad(va, stage, TILES_AT + warp * TILE_VEC4 + 2u * j, ROW_VEC4, gl_CooperativeMatrixLayoutColumnMajor);
#else
#define LOAD_VT(j) coopMatLoad(va, stage, TILES_AT + warp * TILE_VEC4 + 2u * j, ROW_VEC4, gl_CooperativeMatrixLayoutColumnMajor);
#endif
// STAGE_HALVES: slice j of the half tile that holds it, into accumulator j
// (one slice each: in the bf16 modules STAGE_HALVES excludes PACK). P V over
// the low halves, then the high halves staged and P V over them.
#define ADD_PV_HALF(j, first)                                                                        \
    if ((j < DT / 2u) == first) {                                                                    \
      MatA va;                                                                                       \
      coopMatLoad(va, stage, TILES_AT + warp * TILE_VEC4 + 2u * (j - (first ? 0u : DT / 2u)), SROW, gl_CooperativeMatrixLayoutColumnMajor); \
      o##j = coopMatMulAdd(va, pb, o##j);                                                            \
    }
#define ADD_PV_LOW(j) ADD_PV_HALF(j, true)
#define ADD_PV_HIGH(j) ADD_PV_HALF(j, false)
// V's high half: from vhold (STAGE_HALVES), or from vraw, which then takes
// the next tile's K high half (HEAD_HALVES).
#define STAGE_V_HIGH                                                                                 \
    if (HEAD_HALVES) {                                                                               \
      store_head_half(pa_suffix_item(it), vraw, warp);                                               \
      load_pieces(it, k0 + 16 * int(NW), next_entry, false, 8u, vraw);                               \
    } else {                                                                                         \
      store_half(vhold, 1u, warp);                                                                   \
    }
#define PV_IN_HALVES(EACH)                                                                           \
    EACH(ADD_PV_LOW)                                                                                 \
    subgroup_sync();   /* every lane is done reading the low halves */                               \
    STAGE_V_HIGH                                                                                     \
    subgroup_sync();                                                                                 \
    if (partly_seen(k0, 16, seen_lo, seen_hi)) {                                                     \
      staged_nonfinite = zero_staged_half(warp) || staged_nonfinite;                                 \
      subgroup_sync();                                                                               \
    }                                                                                                \
    EACH(ADD_PV_HIGH)
// REGISTER_MATRICES' V^T slices. Word w of keys 2t, 2t + 1 (vk01) and 2t + 8,
// 2t + 9 (vk89) as ELEM pairs (x: the words' bytes 0 and 2, y: 1 and 3, of
// the first key; z, w: the second's): slices 2 w (bytes 0, 1: V^T rows g,
// g + 8) and 2 w + 1 (bytes 2, 3) pair them across the keys. Non-finite
// values of partly seen tiles as 0 (attention_nonfinite.glsl), as staging
// does.
#define V_WORD(w)                                                                                    \
      uvec4 vk01_##w = elem8_from_fp8_swapped(vc0[w], vc1[w]), vk89_##w = elem8_from_fp8_swapped(vc2[w], vc3[w]); \
      if (zero_nonfinite) {                                                                          \
        const uvec4 f01 = elem8_finite_or_zero(vk01_##w), f89 = elem8_finite_or_zero(vk89_##w);      \
        staged_nonfinite = staged_nonfinite || f01 != vk01_##w || f89 != vk89_##w;                   \
        vk01_##w = f01;                                                                              \
        vk89_##w = f89;                                                                              \
      }
#define V_WORDS                                                                                      \
      const bool zero_nonfinite = partly_seen(k0, 16, seen_lo, seen_hi);                             \
      V_WORD(0) V_WORD(1) V_WORD(2) V_WORD(3)
// Slice j = 2 w + high: of each pair word, the low (high 0) or high ELEM of
// the first key's and of the second key's, as one pair.
#define KEY_PAIR(a, b, high) (high == 0u ? ((a) & 0xFFFFu) | ((b) << 16) : ((a) >> 16) | ((b) & 0xFFFF0000u))
#define REGISTER_VT(va, j)                                                                           \
      {                                                                                              \
        const uint high = (j) % 2u;                                                                  \
        const uvec4 p01 = (j) / 2u == 0u ? vk01_0 : (j) / 2u == 1u ? vk01_1 : (j) / 2u == 2u ? vk01_2 : vk01_3; \
        const uvec4 p89 = (j) / 2u == 0u ? vk89_0 : (j) / 2u == 1u ? vk89_1 : (j) / 2u == 2u ? vk89_2 : vk89_3; \
        set_elements(va, KEY_PAIR(p01.x, p01.z, high), KEY_PAIR(p89.x, p89.z, high),                 \
                     KEY_PAIR(p01.y, p01.w, high), KEY_PAIR(p89.y, p89.w, high));                    \
      }
#if PA_MATRIX_BF16
    if (REGISTER_MATRICES) {
      V_WORDS
      [[unroll]] for (uint g = 0; g < 16u; ++g) {   // as below, V^T from registers
        if (g >= GO) break;
        MatB pb;
        coopMatLoad(pb, sp_tile, (warp * SP + P_AT - g * TR * 8u) / 4u, 2u, gl_CooperativeMatrixLayoutColumnMajor);
#define ADD_PV_GROUP_REGISTERS(a)                                                                    \
        if (a * GO + g < DT) {                                                                       \
          MatA va;                                                                                   \
          REGISTER_VT(va, a * GO + g)                                                                \
          o##a = coopMatMulAdd(va, pb, o##a);                                                        \
        }
        EACH_ACC(ADD_PV_GROUP_REGISTERS)
      }
    } else if (STAGE_HALVES || HEAD_HALVES) {
      MatB pb;   // P^T in its own columns (GO is 1)
      coopMatLoad(pb, sp_tile, (warp * SP + P_AT) / 4u, 2u, gl_CooperativeMatrixLayoutColumnMajor);
      PV_IN_HALVES(EACH_ACC)
    } else {
      // Slice group g: P^T in its columns (a load g * TR columns before P^T's),
      // added to slices g, GO + g, ... of the accumulators.
      [[unroll]] for (uint g = 0; g < 16u; ++g) {
        if (g >= GO) break;
        MatB pb;
        coopMatLoad(pb, sp_tile, (warp * SP + P_AT - g * TR * 8u) / 4u, 2u, gl_CooperativeMatrixLayoutColumnMajor);
#define ADD_PV_GROUP(a)                                                                              \
        const uint j = a * GO + g;                                                                   \
        if (j < DT) {                                                                                \
          MatA va;   /* V^T, head slice j: 16 x keys */                                              \
          LOAD_VT(j)                                                                                 \
          o##a = coopMatMulAdd(va, pb, o##a);                                                        \
        }
        EACH_ACC(ADD_PV_GROUP)
      }
    }
#else
#define ADD_PV(j)                                                                                    \
    MatA va;   /* V^T, head slice j: 16 x keys */                                                    \
    LOAD_VT(j)                                                                                       \
    o##j = coopMatMulAdd(va, pb, o##j);
    if (REGISTER_MATRICES) {
      V_WORDS
#define ADD_PV_REGISTERS(j)                                                                          \
      {                                                                                              \
        MatA va;                                                                                     \
        REGISTER_VT(va, j)                                                                           \
        o##j = coopMatMulAdd(va, pb, o##j);                                                          \
      }
      EACH_SLICE(ADD_PV_REGISTERS)
    } else if (STAGE_HALVES || HEAD_HALVES) {
      PV_IN_HALVES(EACH_SLICE)
    } else {
      EACH_SLICE(ADD_PV)
    }
#endif
    subgroup_sync();   // S, P and row_scale are read before the next tile writes them
  }

  // Merge the subgroups: rescale each O to the rows' common max, sum in `stage`.
  if (lane % LPR == 0u) {
    row_m[warp * TR + my_row] = m;
    row_l[warp * TR + my_row] = l;
  }
  // Whether the subgroup staged a non-finite V value as 0, in its own S tile
  // (no longer used; no shared variable of its own: see DEVELOPERS.md).
  const bool any_nonfinite = PA_SINGLE_TOKEN_ROWS == 0u && subgroupAny(staged_nonfinite);
  if (PA_SINGLE_TOKEN_ROWS == 0u && lane == 0u) SP_WORD(warp * SP) = any_nonfinite ? 1u : 0u;
  barrier();
  bool fix = false;   // the rare path: some subgroup staged one
  if (PA_SINGLE_TOKEN_ROWS == 0u)
    for (uint w = 0; w < NW; ++w) fix = fix || SP_WORD(w * SP) != 0u;
  PaItem again;   // the whole item, for the rare path only
  if (fix) again = pa_load_item(item);
  float mm = VKA_NEG_INF, ll = 0.0;
  for (uint w = 0; w < NW; ++w) mm = max(mm, row_m[w * TR + my_row]);
  for (uint w = 0; w < NW; ++w) ll += row_l[w * TR + my_row] * vka_exp_diff(row_m[w * TR + my_row], mm);
#if PA_MATRIX_BF16
  if (lane % LPR < GO) ROW_SCALE(warp * 16u + (lane % LPR) * TR + my_row) = vka_exp_diff(m, mm) * pa_value_scale(it);
#else
  if (lane % LPR == 0u) ROW_SCALE(warp * 16u + my_row) = vka_exp_diff(m, mm) * pa_value_scale(it);
#endif
  if (warp == 0u && lane % LPR == 0u) {
    final_m[my_row] = mm;
    final_l[my_row] = ll;
  }
  subgroup_sync();
  MatC fm;   // element (d, r) = this subgroup's factor of row r
  coopMatLoad(fm, row_scale, warp * 4u, 0u, gl_CooperativeMatrixLayoutRowMajor);
  PaItem done = pa_output_item(item);   // loaded again: fewer registers live through the key loop
  done.row_count = min(done.row_count, TR);
  pa_report_bad_block(done.seq);   // (every lookup of the loop is done; `done`: `it` is not kept past the loop)
  // Round r: subgroups [r * SLOTS, (r + 1) * SLOTS) store their scaled O in
  // slot warp % SLOTS, or add it to what the slot holds; then each
  // invocation sums its elements over the slots.
#define MERGE(j)                                                                    \
      MatC acc = o##j * fm;                                                         \
      if (r > 0u) {                                                                 \
        MatC prev;                                                                  \
        coopMatLoad(prev, stage, at + 4u * j, D / 4u, gl_CooperativeMatrixLayoutColumnMajor); \
        acc = acc + prev;                                                           \
      }                                                                             \
      coopMatStore(acc, stage, at + 4u * j, D / 4u, gl_CooperativeMatrixLayoutColumnMajor);   /* O[r][d] */
// The bf16 modules' loop below has COMPACT; the f16 modules keep theirs as
// it was (#else), because code that folds away can still slow this kernel
// (DEVELOPERS.md) and f16 decode was not re-measured with a shared loop.
#if PA_MATRIX_BF16
  for (uint r = 0; r * MSLOTS < NW; ++r) {
    if (warp / MSLOTS == r) {
      const uint at = (warp % MSLOTS) * MSLOT;
      if (PACK) {   // accumulator a at at + a * ACC_VEC4: element (d, c) at float c * 16 + d
#define MERGE_PACKED(a)                                                               \
        MatC acc = o##a * fm;                                                         \
        if (r > 0u) {                                                                 \
          MatC prev;                                                                  \
          coopMatLoad(prev, stage, at + ACC_VEC4 * a, 4u, gl_CooperativeMatrixLayoutColumnMajor); \
          acc = acc + prev;                                                           \
        }                                                                             \
        coopMatStore(acc, stage, at + ACC_VEC4 * a, 4u, gl_CooperativeMatrixLayoutColumnMajor);
        EACH_ACC(MERGE_PACKED)
      } else if (COMPACT) {
#if VKATTN_PATH == 2
        // coopmat2: each slice's TR columns go straight into the slot's
        // O[r][d], where a tensor store discards the columns past the
        // layout's TR rows; no scratch pass. (Adding to a slot, r > 0, still
        // takes the scratch.)
        if (r == 0u) {
          tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> slot_rows =
              createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
          slot_rows = setTensorLayoutDimensionNV(slot_rows, TR, D);
          tensorViewNV<2, false, 1, 0> transposed = createTensorViewNV(2, false, 1, 0);
#define MERGE_CLIPPED(j) coopMatStoreTensorNV(o##j * fm, stage, at, sliceTensorLayoutNV(slot_rows, 0, 16, 16u * j, 16), transposed);
          EACH_SLICE(MERGE_CLIPPED)
        } else
#endif
        {
        const uint scratch = MSLOTS * MSLOT + warp * SCRATCH_VEC4;
        // Slice j as [row][16 dims] in scratch j % 2, then its TR rows (4
        // uvec4s each) into the slot's O[r][d]. The sync after slice j + 1's
        // store orders slice j's reads before slice j + 2 overwrites them.
#define MERGE_COMPACT(j)                                                            \
        coopMatStore(o##j * fm, stage, scratch + 64u * (j % 2u), 4u, gl_CooperativeMatrixLayoutColumnMajor); \
        subgroup_sync();                                                            \
        for (uint q = lane; q < TR * 4u; q += SG) {                                 \
          const uint to = at + (q / 4u) * (D / 4u) + 4u * j + q % 4u;               \
          vec4 v = uintBitsToFloat(stage[scratch + 64u * (j % 2u) + q]);            \
          if (r > 0u) v += uintBitsToFloat(stage[to]);                              \
          stage[to] = floatBitsToUint(v);                                           \
        }
        EACH_SLICE(MERGE_COMPACT)
        }
      } else {
        EACH_SLICE(MERGE)
      }
    }
    barrier();
  }
  uint redo = 0u;   // bit i: this invocation's i-th output is non-finite, as packing may have made it
  for (uint e = tid, i = 0u; e < TR * D; e += PA_WORKGROUP_SIZE, ++i) {
    float o = merged_output(e);
#else
  for (uint r = 0; r * SLOTS < NW; ++r) {
    if (warp / SLOTS == r) {
      const uint at = (warp % SLOTS) * SLOT;
      EACH_SLICE(MERGE)
    }
    barrier();
  }
  for (uint e = tid; e < TR * D; e += PA_WORKGROUP_SIZE) {   // rows past TR are no item's
    float o = 0.0;
    for (uint w = 0; w < SLOTS; ++w) o += uintBitsToFloat(stage[(w * BM * D + e) / 4u][e % 4u]);
#endif
    if (fix) o += nonfinite_term(again, e / D, out_dim(e % D), again.kv_begin & ~15, 16);
#if PA_MATRIX_BF16
    if (PACK && (isinf(o) || isnan(o)) && i < 32u) redo |= 1u << i;   // (i < 32: TR * D <= 8 * 256 over >= 64 invocations)
#endif
    pa_write_result(done, e / D, out_dim(e % D), o, final_m[e / D], final_l[e / D]);
  }
#if PA_MATRIX_BF16
  // Packed slices: this invocation's non-finite outputs again, exactly, in a
  // loop of its own, so that the output loop carries only the test. Same
  // elements, so this invocation writes them last.
  if (PACK && redo != 0u)
    [[dont_unroll]] for (uint e = tid, i = 0u; e < TR * D; e += PA_WORKGROUP_SIZE, ++i)
      if ((redo & (1u << i)) != 0u)
        pa_write_result(done, e / D, out_dim(e % D), packed_exact_element(item, e / D, out_dim(e % D), final_m[e / D]),
                        final_m[e / D], final_l[e / D]);
#endif
  pa_merge_when_last(done, item);
}
