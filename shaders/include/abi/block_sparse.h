// block_sparse_attention (FlexAttention's block-sparse contract, reference
// kernel 004): the paged-attention kernels' core (paged_prefill.comp on the
// matrix paths, paged_attention.comp on the scalar path) built with
// VKA_OP_BLOCK_SPARSE, whose work items, K/V source, tile walk, mods and
// results come from block_sparse_io.glsl instead of paged_attention_io.glsl.
//
// One work item: PA_BM rows (query positions) of one (batch, q head), inside
// one q block of the mask; its K/V tiles are the kv blocks its mask row lists
// (partial ones first, then full ones), PA_BN keys at a time.
#ifndef VKATTN_ABI_BLOCK_SPARSE_H
#define VKATTN_ABI_BLOCK_SPARSE_H
#include "paged_attention.h"

#ifdef __cplusplus
namespace vkattn::abi {
#endif

// Bindings (0 is the status buffer). Absent optional views are bound to a
// placeholder and never read. View v is binding v + 1.
VKA_CONST(BS_BINDING_Q, 1)                 // [B, Hq, Lq, Dqk], q's dtype (f16 or bf16)
VKA_CONST(BS_BINDING_OUT, 2)               // [B, Hq, Lq, Dv]
VKA_CONST(BS_BINDING_LSE, 3)               // [B, Hq, Lq] f32, natural log
VKA_CONST(BS_BINDING_ROW_MAX, 4)           // [B, Hq, Lq] f32
VKA_CONST(BS_BINDING_K, 5)                 // [Bkv, Hkv, Lkv, Dqk], q's dtype; with BS_PAGED_KV the block table [B, columns] i32
VKA_CONST(BS_BINDING_V, 6)                 // [Bkv, Hkv, Lkv, Dv]; with BS_PAGED_KV unused
VKA_CONST(BS_BINDING_KV_NUM_BLOCKS, 7)     // [Sz, Sh, q_blocks] i32
VKA_CONST(BS_BINDING_KV_INDICES, 8)        // [Sz, Sh, q_blocks, kv_blocks] i32
VKA_CONST(BS_BINDING_FULL_NUM_BLOCKS, 9)
VKA_CONST(BS_BINDING_FULL_INDICES, 10)
VKA_CONST(BS_BINDING_ALIBI, 11)            // [Hq] f32 slopes
VKA_CONST(BS_BINDING_DOCUMENT, 12)         // [Lkv] i32 document id of each kv position
VKA_CONST(BS_BINDING_REL_BIAS, 13)         // [Hq, Lq + Lkv - 1] f32, by kv_idx - q_idx + Lq - 1
VKA_CONST(BS_BINDING_BIAS, 14)             // [Hq, Lq, Lkv] f32
VKA_CONST(BS_BINDING_MOD0, 15)            // a variant's buffers (VKA_MOD_BUFFER), slots 0 to 3
VKA_CONST(BS_MOD_BUFFERS, 4)
VKA_CONST(BS_BINDINGS, 19)
VKA_CONST(BS_VIEWS, 14)                    // views with an element offset (bindings 1 to 14); a variant's buffers start on a binding

// Built-in mask mods (bits of BS_MASK_ALL and BS_MASK_ANY). A pair counts
// when every mod of BS_MASK_ALL admits it (none listed: no pair by that
// part) or some mod of BS_MASK_ANY does; with both empty, every pair of a
// partial block counts. q_pos = q_idx + q_offset is the query's position
// among the keys (Lkv - Lq when q is the sequence's end).
VKA_CONST(BS_MASK_CAUSAL, 1)               // kv_idx <= q_pos
VKA_CONST(BS_MASK_WINDOW, 2)               // q_pos - kv_idx < window (one-sided; with causal: the window before q)
VKA_CONST(BS_MASK_PREFIX, 4)               // kv_idx < prefix_len (prefix-LM: any = causal | prefix)
VKA_CONST(BS_MASK_DOCUMENT, 8)             // document[q_pos] == document[kv_idx]

// Built-in score mods (bits of BS_SCORE_MODS), applied in this order to the
// score (scale * q.k) of partial and full blocks alike.
VKA_CONST(BS_SCORE_SOFTCAP, 1)             // softcap * tanh(score / softcap)
VKA_CONST(BS_SCORE_ALIBI, 2)               // + slope[h] * (kv_idx - q_pos)
VKA_CONST(BS_SCORE_REL_BIAS, 4)            // + rel_bias[h][kv_idx - q_idx + Lq - 1]
VKA_CONST(BS_SCORE_BIAS, 8)                // + bias[h][q_idx][kv_idx]

// Bits of `flags`.
VKA_CONST(BS_FLAG_FULL_BLOCKS, 1)          // the full-block lists are given
VKA_CONST(BS_FLAG_NARROW_KV, 2)            // K/V offsets or strides are not multiples of 8 elements: 2-byte loads
VKA_CONST(BS_FLAG_Q_WIDE, 4)               // q's offset and strides are multiples of 8 elements: the prefill kernel loads Q 16 bytes at a time
VKA_CONST(BS_FLAG_OUT_WIDE, 8)             // out's offset and strides are multiples of 8 elements: the prefill kernel stores 8 dims at a time

// How the prefill kernel loads its views (BS_VIEWS_FORM): one form per
// pipeline, which the host chooses per dispatch from Lkv and the views'
// alignment, so that the key loop holds one form of K/V loads rather than a
// branch between three, and Q's loads and the results' stores one form each
// (DEVELOPERS.md, "The views' load form as a specialization constant").
// Views whose offsets or strides are not multiples of 8 elements are rare:
// they take the form that chooses by the flags. The scalar kernel's is that.
VKA_CONST(BS_VIEWS_AT_RUN_TIME, 0)         // by BS_FLAG_NARROW_KV, _Q_WIDE, _OUT_WIDE and kv_len, per item
VKA_CONST(BS_VIEWS_WIDE_WHOLE_TILES, 1)    // q, k, v and out wide (16-byte loads and stores); Lkv a nonzero multiple of the kernel's tile of keys (PA_BN): no test of the keys
VKA_CONST(BS_VIEWS_WIDE, 2)                // q, k, v (or the paged cache) and out wide; keys past Lkv read as 0

// The core's constants (ids 0..25, as paged attention: head size, tile,
// dtypes, LSE; the paged cache's are unused) and the op's own.
#define BLOCK_SPARSE_SPEC(X)  \
  PAGED_ATTENTION_SPEC(X)     \
  X(26, BS_MASK_ALL, 0)       \
  X(27, BS_MASK_ANY, 0)       \
  X(28, BS_SCORE_MODS, 0)     \
  X(29, BS_WRITE_ROW_MAX, 0)  \
  X(30, BS_V_HEAD_SIZE, 0)    /* V's head size when it differs from q.k's (PA_HEAD_SIZE); scalar kernel only */ \
  X(31, BS_KV_BLOCK, 128)     /* the mask's kv block size (the variant's kv_block_size; push block_sizes' high half) */ \
  X(32, BS_PAGED_KV, 0)       /* K/V from the paged cache (PA_BLOCK_SIZE, PA_LAYOUT, PA_CACHE_DTYPE), through a block table */ \
  X(33, BS_VIEWS_FORM, 0)     /* the prefill kernel's loads and stores of its views (BS_VIEWS_*) */

// Strides in elements. The mask's extents and block sizes are 16 bits each
// (lo | hi << 16).
#define BLOCK_SPARSE_PUSH(X)          \
  X(uint32_t, num_workgroups)         \
  X(uint32_t, grid_x)                 \
  X(uint32_t, flags)                  \
  X(uint32_t, batch)                  \
  X(uint32_t, q_len)                  \
  X(uint32_t, kv_len)                 \
  X(uint32_t, q_batch_stride)         \
  X(uint32_t, q_head_stride)          \
  X(uint32_t, q_token_stride)         \
  X(uint32_t, k_batch_stride)  /* 0 when K/V broadcast over the batch (Bkv = 1) */ \
  X(uint32_t, k_head_stride)          \
  X(uint32_t, k_token_stride)         \
  X(uint32_t, v_batch_stride)         \
  X(uint32_t, v_head_stride)          \
  X(uint32_t, v_token_stride)         \
  X(uint32_t, out_batch_stride)       \
  X(uint32_t, out_head_stride)        \
  X(uint32_t, out_token_stride)       \
  X(uint32_t, mask_extents)   /* Sz | Sh << 16 */ \
  X(uint32_t, q_blocks)       /* the mask's q blocks per (z, h) */ \
  X(uint32_t, kv_blocks)      /* the index lists' capacity per row */ \
  X(uint32_t, block_sizes)    /* q_block | kv_block << 16 */ \
  X(int32_t, window)                  \
  X(int32_t, prefix_len)              \
  X(int32_t, q_offset)                \
  X(float, scale)                     \
  X(float, softcap)                   \
  X(uint32_t, view_offsets0)          \
  X(uint32_t, view_offsets1)          \
  X(uint32_t, view_offsets2)          \
  X(uint32_t, view_offsets3)         \
  X(uint32_t, chunk_magic)    /* BS_PAGED_KV: vka_kv_chunk_magic(blocks per chunk) (abi/kv_chunk_division.h) */

// With BS_PAGED_KV, K's and V's stride words carry the paged cache instead
// (with chunk_magic, the last word the push constants have): its chunk
// table's device address (kv_addressing.glsl), K chunks, blocks per chunk
// and blocks, and the block table's row stride (batch b's keys are the
// first Lkv tokens of row b's blocks).
#define BS_PUSH_CHUNK_TABLE_LO k_batch_stride
#define BS_PUSH_CHUNK_TABLE_HI k_head_stride
#define BS_PUSH_NUM_K_CHUNKS k_token_stride
#define BS_PUSH_BLOCKS_PER_CHUNK v_batch_stride
#define BS_PUSH_NUM_BLOCKS v_head_stride
#define BS_PUSH_BLOCK_TABLE_STRIDE v_token_stride

VKA_PUSH_STRUCT(BlockSparsePush, BLOCK_SPARSE_PUSH)
#if defined(__cplusplus) || defined(VKA_OP_BLOCK_SPARSE)
VKA_SPEC_STRUCT(BlockSparseSpec, BLOCK_SPARSE_SPEC)
#endif
#ifdef __cplusplus
}
#endif
#endif
