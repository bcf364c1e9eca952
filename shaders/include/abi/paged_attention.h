// paged_attention (one workgroup per work item: a tile of query rows of one
// sequence and kv head, over one segment of its KV range) and
// paged_attention_reduce (combines the segments of split-KV runs). Both take
// the same bindings and push constants.
#ifndef VKATTN_ABI_PAGED_ATTENTION_H
#define VKATTN_ABI_PAGED_ATTENTION_H
#include "common.h"

#ifdef __cplusplus
namespace vkattn::abi {
#endif

// Bindings (0 is the status buffer). Absent optional views are bound to a
// placeholder and never read.
VKA_CONST(PA_BINDING_Q, 1)
VKA_CONST(PA_BINDING_OUT, 2)
VKA_CONST(PA_BINDING_LSE, 3)
VKA_CONST(PA_BINDING_QUERY_START_LOC, 4)
VKA_CONST(PA_BINDING_SEQ_LENS, 5)
VKA_CONST(PA_BINDING_BLOCK_TABLE, 6)
VKA_CONST(PA_BINDING_ALIBI, 7)
VKA_CONST(PA_BINDING_SINKS, 8)
VKA_CONST(PA_BINDING_QQ_BIAS, 9)
VKA_CONST(PA_BINDING_WORKSPACE, 10)
VKA_CONST(PA_BINDING_NEW_K, 11)          // prefix prefill: the new tokens' K [num_tokens, num_kv_heads, head_size]
VKA_CONST(PA_BINDING_NEW_V, 12)          // and V, in q's dtype
VKA_CONST(PA_BINDINGS, 13)

// Each view's element offset inside its binding, one byte each in
// view_offsets0..2 (view v: byte v % 4 of word v / 4). A binding starts at
// most minStorageBufferOffsetAlignment (<= 256) bytes before its view.
VKA_CONST(PA_VIEW_Q, 0)
VKA_CONST(PA_VIEW_OUT, 1)
VKA_CONST(PA_VIEW_LSE, 2)
VKA_CONST(PA_VIEW_QUERY_START_LOC, 3)
VKA_CONST(PA_VIEW_SEQ_LENS, 4)
VKA_CONST(PA_VIEW_BLOCK_TABLE, 5)
VKA_CONST(PA_VIEW_ALIBI, 6)
VKA_CONST(PA_VIEW_SINKS, 7)
VKA_CONST(PA_VIEW_QQ_BIAS, 8)
VKA_CONST(PA_VIEW_WORKSPACE, 9)
VKA_CONST(PA_VIEW_NEW_K, 10)
VKA_CONST(PA_VIEW_NEW_V, 11)

// Bits of `flags`.
VKA_CONST(PA_FLAG_SPLIT, 1)              // write partial results to the workspace for the reduce
VKA_CONST(PA_FLAG_SUFFIX, 2)             // prefix prefill (PA_KV_SUFFIX): the new tokens' K/V are not in the cache
VKA_CONST(PA_FLAG_SKIP_DECODE, 4)        // prefix prefill: sequences of query_len 1 are not computed (out untouched)
VKA_CONST(PA_FLAG_SUFFIX_NARROW, 8)      // prefix prefill: new K/V offsets or strides are not multiples of 8 elements
VKA_CONST(PA_FLAG_SUFFIX_PASSES, 16)     // prefix prefill: the prefill kernel's items run in two passes and write their outputs (below)
VKA_CONST(PA_FLAG_MERGE_LAST, 32)        // with PA_FLAG_SPLIT: the last of an item's segments to finish merges them (below)
VKA_CONST(PA_FLAG_Q_WIDE, 64)           // q's offset and strides are multiples of 8 elements: the prefill kernel loads Q 16 bytes at a time
VKA_CONST(PA_FLAG_OUT_WIDE, 128)        // out's offset and strides are multiples of 8 elements: the prefill kernel stores 8 dims at a time

// Split runs: the workspace starts with PA_SPLIT_COUNTER_WORDS arrival
// counters, one per work item, and the partial results follow them (in every
// split run, merged or not, so that no op's partial results land on the
// counters). With PA_FLAG_MERGE_LAST (decode-kernel items only, at most
// PA_SPLIT_COUNTER_WORDS of them) each segment adds 1 to its item's counter
// after writing its partial results; the one that makes it num_segments
// merges the item's segments and sets it back to 0, and no reduce is
// dispatched: a dependent dispatch cost as much as the attention of a short
// decode (DEVELOPERS.md, "Merging split-KV segments in the attention
// kernel"). So the counters are 0 between runs: the engine's workspace must
// hold zeros there before its first split run (paged_attention.hpp), and a
// segment that finds num_segments or more reports it (STATUS_SPLIT_COUNTER)
// rather than merge.
#define PA_SPLIT_COUNTER_WORDS 4096u
// The partial results start at the first multiple of PA_PARTIALS_ALIGN_WORDS
// words of the binding at or after the counters' end, so that a merge reads a
// segment's 4 dims, and its (m, l) pair, as one load each; the workspace's
// size counts the gap (at most PA_PARTIALS_ALIGN_WORDS - 1 words) that the
// view's offset inside its binding may leave.
#define PA_PARTIALS_ALIGN_WORDS 4u

// Prefix prefill (reference kernel 000): with PA_KV_SUFFIX, a sequence's keys
// [0, ctx) come from the cache and [ctx, seq_len) from the new K/V views
// (token query_start + k - ctx), and the plan always splits into 2
// segments: segment 0 is the cache part, segment 1 the new tokens, combined
// by paged_attention_reduce (FlashInfer's merge of a prefix's and a suffix's
// states). So the decode kernel and the scalar kernel run it. Prefix
// prefill has no qq_bias, so the new K/V strides take those push words:
// token strides in elements, head strides 16 bits each (k | v << 16).
//
// On the prefill kernel prefix prefill runs in two passes instead
// (PA_PREFIX_PASS), each an item per q tile and kv head, a pipeline barrier
// between them: PA_PASS_CONTEXT, the paged op's module with the item's keys
// cut at the context's end, writes each row's segment 0 (the context's keys,
// from the cache) as partial results; PA_PASS_NEW_TOKENS, prefix prefill's
// module, walks the new tokens' keys (segment 1, from their views), merges
// the row's state with segment 0's where the context pass had keys for the
// item, and writes the output. A pass-2 item has the context's partial
// results exactly where its pass-1 item had keys (pa_load_item gives both
// the same cut). So the context's tiles run the paged op's code, with no
// second source in their loop, and no reduce runs for these rows: with
// PA_FLAG_SUFFIX_PASSES the reduce leaves the prefill kernel's sequences
// (rows >= route_rows) alone. (One item walking both sources, each tile from
// its own, ran prefix prefill about 20% longer than the paged op on the same
// shape: DEVELOPERS.md, "Prefix prefill in two passes".)
VKA_CONST(PA_PASS_CONTEXT, 1)
VKA_CONST(PA_PASS_NEW_TOKENS, 2)
#define PA_PUSH_NEW_K_TOKEN_STRIDE qq_bias_stride
#define PA_PUSH_NEW_V_TOKEN_STRIDE qq_bias_rows
#define PA_PUSH_NEW_KV_HEAD_STRIDES qq_bias_columns

#define PAGED_ATTENTION_SPEC(X)   \
  X(0, PA_HEAD_SIZE, 128)         \
  X(1, PA_BLOCK_SIZE, 16)         \
  X(2, PA_NUM_KV_HEADS, 8)        \
  X(3, PA_GQA, 4)                 \
  X(4, PA_BM, 16)                 \
  X(5, PA_BN, 32)                 \
  X(6, PA_WORKGROUP_SIZE, 128)    \
  X(7, PA_CACHE_DTYPE, 0)         \
  X(8, PA_LAYOUT, 0)              \
  X(9, PA_Q_DTYPE, 0)             \
  X(10, PA_OUT_DTYPE, 0)          \
  X(11, PA_HAS_ALIBI, 0)          \
  X(12, PA_HAS_SINKS, 0)          \
  X(13, PA_HAS_QQ_BIAS, 0)        \
  X(14, PA_HAS_SOFTCAP, 0)        \
  X(15, PA_HAS_WINDOW, 0)         \
  X(16, PA_WRITE_LSE, 0)          \
  X(17, PA_SUBGROUP_SIZE, 32)    /* paged_attention_subgroup.comp */ \
  X(18, PA_ONE_TILE_PER_SEQ, 0)  /* every sequence's rows fit one q tile: tile index = sequence, no search */ \
  X(19, PA_SINGLE_TOKEN_ROWS, 0) /* every tile's rows belong to one token (query_len <= 1): they see the same keys */ \
  X(20, PA_KV_SUFFIX, 0)         /* prefix prefill: segment 1's keys are the new tokens' K/V views (PA_FLAG_SUFFIX) */ \
  X(21, PA_TILE_ROWS, 16)        /* paged_attention_subgroup.comp: rows an item has at most (subgroup_tile_rows below) */ \
  X(22, PA_PACK_O, 0)            /* paged_attention_subgroup.comp, bf16 modules: O's head slices packed (PA_SUBGROUP_O_GROUPS) */ \
  X(23, PA_STAGE_HALVES, 0)      /* paged_attention_subgroup.comp: K/V tiles staged half a head at a time (PA_SUBGROUP_HALF_ROW_VEC4) */ \
  X(24, PA_REGISTER_MATRICES, 0) /* paged_attention_subgroup.comp: fp8 K/V matrices built in registers (abi/matrix_element_order.h) */ \
  X(25, PA_PREFIX_PASS, 0)       /* paged_prefill.comp, prefix prefill's two passes (PA_PASS_*, below) */

// Per-run values: the grid, the plan's shape, the layer's values, and where
// the views are. Work items are numbered (q tile, kv head, segment), segment
// fastest; a q tile holds BM packed rows (token_in_sequence * GQA +
// head_in_group) of one sequence.
#define PAGED_ATTENTION_PUSH(X)    \
  X(uint64_t, chunk_table_address) \
  X(uint32_t, num_workgroups)      \
  X(uint32_t, grid_x)              \
  X(uint32_t, flags)               \
  X(uint32_t, num_seqs)            \
  X(uint32_t, num_tokens)          \
  X(uint32_t, num_segments)        \
  X(uint32_t, q_token_stride)      \
  X(uint32_t, q_head_stride)       \
  X(uint32_t, out_token_stride)    \
  X(uint32_t, out_head_stride)     \
  X(uint32_t, lse_token_stride)    \
  X(uint32_t, block_table_stride)  \
  X(uint32_t, max_blocks_per_seq)  \
  X(uint32_t, num_blocks)          \
  X(uint32_t, blocks_per_chunk)    \
  X(uint32_t, chunk_magic)          /* vka_kv_chunk_magic(blocks_per_chunk) */ \
  X(uint32_t, num_k_chunks)        \
  X(uint32_t, qq_bias_stride)      \
  X(uint32_t, qq_bias_rows)        \
  X(uint32_t, qq_bias_columns)     \
  X(int32_t, sliding_window)       \
  X(float, scale)                  \
  X(float, softcap)                \
  X(float, k_scale)                \
  X(float, v_scale)                \
  X(float, out_inv_scale)          \
  X(uint32_t, view_offsets0)       \
  X(uint32_t, view_offsets1)       \
  X(uint32_t, view_offsets2)       \
  X(uint32_t, route_rows)   /* sequences of at least this many packed rows are the prefill kernel's, the others the decode kernel's (0: all the decode kernel's) */

// paged_prefill.comp (matrix paths, rows of many tokens) takes the same spec
// constants: PA_BM = 16 rows per subgroup of 32 invocations (per pair of
// subgroups above head size 128: PP_HEAD_PARTS), PA_BN keys per K/V tile.
// Its shared arrays, sized here for the shader and for the host's tile choice
// (detail::prefill_tile). SM: 1 where S and P go through shared memory (the
// KHR module on a device without the element order, abi/matrix_element_order.h);
// elsewhere they stay in registers, but for the pairs' partial S. Q's rows (before the key loop, 2 * BC rows at a time) and the
// results (after it) go through the K/V tiles' space, which must hold the
// latter: 2 * BC * PP_ROW_VEC4(D) >= PP_EPILOGUE_VEC4(NW).
// The epilogue's part of the K/V tiles' space, in uvec4s: per subgroup a
// 16 x 16 slice of O (64), then the second prefix-prefill pass's two weights
// for each of its 16 rows (8).
#define PP_EPILOGUE_O_VEC4(NW) (64u * (NW))
#define PP_EPILOGUE_VEC4(NW) (72u * (NW))
#define PP_ROW_VEC4(D) ((D) / 8u + 1u)                      /* uvec4s per staged row: 16 bytes of padding */
// Subgroups that share each 16 rows, each holding Q and O for 1 / parts of
// the head: above head size 128, 16 rows' Q and O (head_size / 4 + head_size
// / 2 registers per invocation) would not fit beside S and the next tile's loads.
#define PP_HEAD_PARTS(D) ((D) > 128u ? 2u : 1u)
#define PP_S_FLOATS(D, NW, BC, SM) ((SM) + PP_HEAD_PARTS(D) > 1u ? (NW) * 16u * (BC) : 4u)   /* per subgroup: S (KHR path) or its partial S (pairs); + not ||: glslang 16 emits an undefined id for || of spec constants */
#define PP_P_ELEMS(NW, BC, SM) ((SM) != 0u ? (NW) * 16u * (BC) : 8u)
// The tiles whose K and V addresses key_at holds: 3 with the softmax in
// registers (on coopmat2 each tile's V may be staged a tile after its K:
// paged_prefill.comp's V_LAG, up to head size 128), 2 with it through shared
// memory (a third took that module's head size 256 past two workgroups per
// SM). By the softmax's form only, so that the coopmat2 kernel's count is a
// literal: derived from the head size, a specialization constant, it ran the
// coopmat2 modules slower, fp8 caches most (DEVELOPERS.md, "key_at's tiles
// as a literal").
#define PP_KEY_TILES(SM) ((SM) != 0u ? 2u : 3u)
#define PP_SHARED_BYTES(D, NW, BC, SM)                                                                    \
  (16u * 2u * (BC) * PP_ROW_VEC4(D) /* K and V tiles */ + 4u * PP_S_FLOATS(D, NW, BC, SM) + \
   2u * PP_P_ELEMS(NW, BC, SM) + 3u * 4u * 16u * (NW) /* row_scale, row_m, row_l */ + 16u * PP_KEY_TILES(SM) * (BC) /* key_at */ + \
   16u /* flags */ + 4u /* pa_first_bad_block_key */ +                                                        \
   PA_CHUNK_BASE_BYTES)

// The chunk bases the paged kernels hold in shared memory (paged_attention_io.glsl):
// 8 of K and 8 of V, 32 GiB of each at 4 GiB per chunk. Further chunks'
// bases are read from memory where used.
#define PA_SHARED_CHUNKS 8u
#define PA_CHUNK_BASE_BYTES (2u * 8u * PA_SHARED_CHUNKS)

// block_sparse_io.glsl's document ids in the prefill kernel's document
// modules (BS_STAGED_DOCUMENTS): the item's rows' (BM, the workgroup's
// rows) and three tiles' keys'. The host counts them for every block-sparse
// tile (detail::block_sparse_prefill_tile), as it picks the tile before the
// module.
#define PP_BS_DOCUMENT_BYTES(BM, BC) (4u * (BM) + 4u * 3u * (BC))

// paged_attention.comp (the scalar kernel, any device): its shared arrays,
// sized here for the shader's declarations and for the host's tile choice
// (detail::choose_tile). D: q.k's head size, DV: V's (block-sparse
// attention's may differ), BM rows and BN keys per tile. Q's and the K/V
// tile's rows are padded by one float, so that rows fall in different banks.
#define PA_SCALAR_KV_DIMS(D, DV) ((D) > (DV) ? (D) : (DV))
#define PA_SCALAR_Q_FLOATS(BM, D) ((BM) * ((D) + 1u))
#define PA_SCALAR_KV_FLOATS(BN, D, DV) ((BN) * (PA_SCALAR_KV_DIMS(D, DV) + 1u))
#define PA_SCALAR_S_FLOATS(BM, BN) ((BM) * (BN))
#define PA_SCALAR_O_FLOATS(BM, DV) ((BM) * (DV))
#define PA_SCALAR_SHARED_BYTES(D, DV, BM, BN)                                                             \
  (4u * (PA_SCALAR_Q_FLOATS(BM, D) + PA_SCALAR_KV_FLOATS(BN, D, DV) + PA_SCALAR_S_FLOATS(BM, BN) +         \
         PA_SCALAR_O_FLOATS(BM, DV) + 3u * (BM) /* row_alpha, row_m, row_l */) +                          \
   16u * (BN) /* key_block, value_block */ + PA_CHUNK_BASE_BYTES + 4u /* split_kv_merge.glsl's flag */)

// paged_attention_subgroup.comp (the decode kernel, matrix paths). Its tiles
// have BM rows, the matrices' N (8 or 16), but an item of a plan whose
// sequences have at most max_rows packed rows has at most TR of them: the
// power of two >= max_rows, at least 4 and SG / 8 (so that each lane owns an
// even number of a 16-key tile's keys in the softmax), at most BM. Decode with
// GQA 4 has 4. The softmax covers those TR rows only; the tile's other rows
// hold whatever shared memory held, which reaches only their own columns of
// S^T and O^T, rows that are never written. So Q keeps TR rows and, where TR
// <= BM / 2, P lies in S^T's unused rows.
#ifdef __cplusplus
constexpr uint32_t subgroup_tile_rows(uint32_t bm, uint32_t max_rows, uint32_t sg) {
  uint32_t tr = 4;
  while (tr < max_rows || tr < sg / 8) tr *= 2;
  return tr < bm ? tr : bm;
}
#endif
#define PA_SUBGROUP_P_IN_S(BM, TR) ((TR) <= (BM) / 2u)
// O^T's head slices per accumulator (GO) in the bf16 modules, where the plan
// asks (PK: PA_PACK_O, for batches of at most one work item per SM): where TR
// <= BM / 2, a 16 x BM accumulator holds BM / TR slices side by side (column
// g * TR + r: row r of slice a * GO + g of accumulator a), each added by P^T
// placed in its TR columns with zeros in the others. The bf16 tiles have 16
// columns (the only bf16 shape an H200 has) for 4 rows in decode with GQA 4:
// unpacked, 3/4 of O's registers and of the merge's stores hold nothing.
// Packed, a workgroup of 4 subgroups took 1.45x as long per tile (DEVELOPERS.md),
// so larger batches do not pack; nor do the f16 modules (8-row tiles). 1: one
// slice per accumulator. (Nested selections: glslang emits no spec-constant &&.)
#define PA_SUBGROUP_O_GROUPS(BM, TR, PK) ((PK) != 0u ? ((TR) <= (BM) / 2u ? (BM) / (TR) : 1u) : 1u)
// With GO > 1, P^T lies in a column-major [columns][16 keys] ELEM region of
// (GO * TR + BM - TR) columns of 8 words: (GO - 1) * TR zero columns, P^T's
// TR, BM - TR zero columns: a BM-column load that starts g * TR columns
// before P^T's gives slice group g P^T in its columns and zeros in the others'. It
// ends 64 words past S^T, which the region overlaps from word 64 + 8 * TR
// (past the TR columns of S^T the softmax reads): the overlapped zeros are
// written again after every S^T store.
#define PA_SUBGROUP_P_PAD_WORDS(BM, TR, GO) (((GO) * (TR) + (BM) - (TR)) * 8u)
// 32-bit words of a subgroup's S^T (f32, 16 keys x BM) and P^T (ELEM pairs);
// the f16 modules, which never pack, size theirs with the second form.
#define PA_SUBGROUP_SP_WORDS(BM, TR, GO) ((GO) > 1u ? 16u * (BM) + 64u : PA_SUBGROUP_SP_WORDS_UNPACKED(BM, TR))
#define PA_SUBGROUP_SP_WORDS_UNPACKED(BM, TR) (16u * (BM) + (PA_SUBGROUP_P_IN_S(BM, TR) ? 0u : 8u * (BM)))
// uvec4s of the shared `stage`: Q's TR rows (16 bytes of padding each), then
// each subgroup's 16-key K or V tile, or at the end the subgroups' O.
#define PA_SUBGROUP_ROW_VEC4(D) ((D) / 8u + 1u)
// With PA_STAGE_HALVES where the module takes it (the kernel's
// STAGE_HALVES: fp8 caches in 16-value pieces at head size 128, not
// the split layout, O not packed), each subgroup stages half the head's dims
// of its 16-key tile at a time (rows of D / 16 + 1 uvec4s), half the shared
// memory: an SM gives all its workgroups together 48 KiB (DEVELOPERS.md,
// "What holds decode workgroups per SM"), which held 4-subgroup workgroups
// to 2 per SM and now holds 3.
#define PA_SUBGROUP_HALF_ROW_VEC4(D) ((D) / 16u + 1u)
#define PA_SUBGROUP_STAGE_VEC4_H(D, NW, TR, H)                                                          \
  ((TR) * PA_SUBGROUP_ROW_VEC4(D) +                                                                     \
   ((NW) >= 2u ? (NW) * 16u * ((H) != 0u ? PA_SUBGROUP_HALF_ROW_VEC4(D) : PA_SUBGROUP_ROW_VEC4(D)) : 4u * (D)))
#define PA_SUBGROUP_STAGE_VEC4(D, NW, TR) PA_SUBGROUP_STAGE_VEC4_H(D, NW, TR, 0u)
#define PA_SUBGROUP_SHARED_BYTES(D, NW, BM, TR, GO) PA_SUBGROUP_SHARED_BYTES_H(D, NW, BM, TR, GO, 0u)
// H: half tiles staged (PA_STAGE_HALVES where the module takes it).
#define PA_SUBGROUP_SHARED_BYTES_H(D, NW, BM, TR, GO, H)                                                \
  (16u * PA_SUBGROUP_STAGE_VEC4_H(D, NW, TR, H) + 4u * (NW) * PA_SUBGROUP_SP_WORDS(BM, TR, GO) +        \
   4u * 16u * (NW) /* row_scale */ + 2u * 4u * (TR) * ((NW) + 1u) /* row_m, row_l, final_m, final_l */ +         \
   4u * (TR) /* row_qpos */ + PA_CHUNK_BASE_BYTES + 16u /* split_kv_merge.glsl's flag */)

#define PAGED_ATTENTION_REDUCE_SPEC(X) \
  X(0, PR_HEAD_SIZE, 128)              \
  X(1, PR_OUT_DTYPE, 0)                \
  X(2, PR_HAS_SINKS, 0)                \
  X(3, PR_WRITE_LSE, 0)                \
  X(4, PR_WORKGROUP_SIZE, 64)          \
  X(5, PR_NUM_Q_HEADS, 32)             \
  X(6, PR_ROW_PARALLEL, 0)  /* few segments: each invocation merges its row's for 4 dims, PR_ROWS_PER_WORKGROUP rows per workgroup */ \
  X(7, PR_GQA, 4)           /* PA_FLAG_SUFFIX_PASSES: a sequence's packed rows are query_len x PR_GQA */

// The row-parallel reduce's rows per workgroup (invocations past them idle),
// and the most segments it merges: up to this many, each invocation reads
// all of its row's segments for its 4 dims, which costs less than a
// workgroup's merge tree.
#define PR_ROWS_PER_WORKGROUP(WG, D) ((WG) / ((D) / 4u))
#define PR_ROW_PARALLEL_MAX_SEGMENTS 8u

// paged_attention_check: one invocation per sequence checks the lengths the
// device holds (the attention kernels only keep them in bounds).
#define PAGED_ATTENTION_CHECK_SPEC(X) \
  X(0, PC_GQA, 4)                     \
  X(1, PC_BM, 16)                     \
  X(2, PC_BLOCK_SIZE, 16)             \
  X(3, PC_ONE_TILE_PER_SEQ, 0)        \
  X(4, PC_WORKGROUP_SIZE, 64)

// Block-sparse attention builds the same kernels with its own push constants
// and a superset of these spec constants (abi/block_sparse.h).
#if defined(__cplusplus) || !defined(VKA_OP_BLOCK_SPARSE)
VKA_PUSH_STRUCT(PagedAttentionPush, PAGED_ATTENTION_PUSH)
#endif
// C++ sees every kernel's constants; a shader declares only its own (their ids overlap).
#if defined(__cplusplus) || defined(VKATTN_PAGED_ATTENTION_REDUCE)
VKA_SPEC_STRUCT(PagedAttentionReduceSpec, PAGED_ATTENTION_REDUCE_SPEC)
#endif
#if defined(__cplusplus) || defined(VKATTN_PAGED_ATTENTION_CHECK)
VKA_SPEC_STRUCT(PagedAttentionCheckSpec, PAGED_ATTENTION_CHECK_SPEC)
#endif
#if defined(__cplusplus) || (!defined(VKATTN_PAGED_ATTENTION_REDUCE) && !defined(VKATTN_PAGED_ATTENTION_CHECK) && !defined(VKA_OP_BLOCK_SPARSE))
VKA_SPEC_STRUCT(PagedAttentionSpec, PAGED_ATTENTION_SPEC)
#endif
#ifdef __cplusplus
}
#endif
#endif
