// paged_attention (one workgroup per work item: a tile of query rows of one
// sequence and kv head, over one segment of its KV range) and
// paged_attention_reduce (combines the segments of split-KV runs).
#ifndef VKATTN_ABI_PAGED_ATTENTION_H
#define VKATTN_ABI_PAGED_ATTENTION_H
#include "common.h"

#ifdef __cplusplus
namespace vkattn::abi {
#endif

// Words per work item in the plan's metadata.
VKA_CONST(PA_ITEM_WORDS, 8)
VKA_CONST(PA_ITEM_SEQ, 0)
VKA_CONST(PA_ITEM_KV_HEAD, 1)
VKA_CONST(PA_ITEM_ROW_START, 2)    // first packed row (token_in_seq * GQA + head_in_group)
VKA_CONST(PA_ITEM_ROW_COUNT, 3)
VKA_CONST(PA_ITEM_KV_BEGIN, 4)     // key positions [begin, end) this item covers
VKA_CONST(PA_ITEM_KV_END, 5)
VKA_CONST(PA_ITEM_SEGMENT, 6)

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
  X(17, PA_SPLIT, 0)              \
  X(18, PA_SUBGROUP_SIZE, 32)    /* paged_attention_subgroup.comp */

// Per-run values: where the views are and the grid.
#define PAGED_ATTENTION_PUSH(X)   \
  X(uint64_t, chunk_table_address) \
  X(uint32_t, num_items)          \
  X(uint32_t, grid_x)             \
  X(uint32_t, q_offset)           \
  X(uint32_t, q_token_stride)     \
  X(uint32_t, q_head_stride)      \
  X(uint32_t, out_offset)         \
  X(uint32_t, out_token_stride)   \
  X(uint32_t, out_head_stride)    \
  X(uint32_t, lse_offset)         \
  X(uint32_t, lse_token_stride)   \
  X(uint32_t, num_blocks)         \
  X(uint32_t, blocks_per_chunk)   \
  X(uint32_t, num_k_chunks)

// Per-plan values, at the start of the metadata buffer; array offsets count
// 32-bit words from the end of this header.
#define PAGED_ATTENTION_META(X)   \
  X(uint32_t, num_seqs)           \
  X(uint32_t, num_tokens)         \
  X(uint32_t, num_q_heads)        \
  X(uint32_t, max_blocks_per_seq) \
  X(uint32_t, num_segments)       \
  X(uint32_t, query_start_loc_at) \
  X(uint32_t, seq_lens_at)        \
  X(uint32_t, block_table_at)     \
  X(uint32_t, items_at)           \
  X(uint32_t, alibi_at)           \
  X(uint32_t, sinks_at)           \
  X(uint32_t, qq_bias_at)         \
  X(uint32_t, qq_bias_stride)     \
  X(uint32_t, qq_bias_rows)       \
  X(int32_t, sliding_window)      \
  X(float, scale)                 \
  X(float, softcap)               \
  X(float, k_scale)               \
  X(float, v_scale)               \
  X(float, out_inv_scale)

#define PAGED_ATTENTION_REDUCE_SPEC(X) \
  X(0, PR_HEAD_SIZE, 128)              \
  X(1, PR_OUT_DTYPE, 0)                \
  X(2, PR_HAS_SINKS, 0)                \
  X(3, PR_WRITE_LSE, 0)                \
  X(4, PR_WORKGROUP_SIZE, 64)

#define VKA_STRUCT_ONLY(NAME, LIST) struct NAME { LIST(VKA_PUSH_FIELD) };
VKA_STRUCT_ONLY(PagedAttentionMeta, PAGED_ATTENTION_META)
VKA_PUSH_STRUCT(PagedAttentionPush, PAGED_ATTENTION_PUSH)
// C++ sees both kernels' constants; a shader declares only its own (their ids overlap).
#if defined(__cplusplus) || defined(VKATTN_PAGED_ATTENTION_REDUCE)
VKA_SPEC_STRUCT(PagedAttentionReduceSpec, PAGED_ATTENTION_REDUCE_SPEC)
#endif
#if defined(__cplusplus) || !defined(VKATTN_PAGED_ATTENTION_REDUCE)
VKA_SPEC_STRUCT(PagedAttentionSpec, PAGED_ATTENTION_SPEC)
#endif
#ifdef __cplusplus
}
#endif
#endif
