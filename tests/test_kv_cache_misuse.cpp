// PagedKvCache used wrongly, as an adversarial pass found it: a cache moved
// from, lookups outside a block or the cache, and a cache too large for the
// host's bookkeeping. Each is a vkattn::Error, before anything is allocated
// or recorded.
#include <vkattn/vkattn.hpp>

#include "vk_test.hpp"

namespace vkattn::test {
namespace {

class KvCacheMisuse : public VkTest {
 protected:
  KvCacheConfig cfg_{.num_blocks = 4, .block_size = 16, .num_kv_heads = 2, .head_size = 64};
};

TEST_F(KvCacheMisuse, ACacheMovedFromThrows) {
  PagedKvCache a(ctx(), cfg_);
  PagedKvCache b(std::move(a));
  EXPECT_VKATTN_ERROR(a.read_blocks(KvPart::key, 0, 1), "read_blocks", "moved from");
  std::vector<uint8_t> block(b.block_bytes());
  EXPECT_VKATTN_ERROR(a.write_blocks(KvPart::key, 0, block), "write_blocks", "moved from");
  EXPECT_VKATTN_ERROR(a.fill(0), "fill", "moved from");
  EXPECT_VKATTN_ERROR(a.chunk(0), "chunk", "moved from");
  EXPECT_VKATTN_ERROR(a.allocator(), "allocator", "moved from");
  EXPECT_VKATTN_ERROR(a.chunk_table_address(), "moved from");
  Buffer kv(ctx(), 2 * 64 * 2 * 2), slots(ctx(), 16);
  const auto key = TensorView::contiguous(kv, DType::f16, {1, 2, 64});
  const auto value = TensorView::contiguous(kv, DType::f16, {1, 2, 64}, 2 * 64 * 2);
  const auto slot = TensorView::contiguous(slots, DType::i32, {1});
  EXPECT_VKATTN_ERROR(write_kv_cache(ctx(), a, key, value, slot), "write_kv_cache: the cache was moved from");
  {
    Buffer meta(ctx(), 64), q(ctx(), 4 * 64 * 2), out(ctx(), 4 * 64 * 2);
    const int32_t words[] = {0, 1, 1, 0};   // query_start_loc {0, 1}, seq_lens {1}, block_table {0}
    meta.upload(words, sizeof words);
    const PagedAttentionPlan plan(ctx(), cfg_, 4, DType::f16, PagedAttentionLimits{1, 1, 1, 16});
    PagedAttentionArgs pa;
    pa.q = TensorView::contiguous(q, DType::f16, {1, 4, 64});
    pa.out = TensorView::contiguous(out, DType::f16, {1, 4, 64});
    pa.batch.query_start_loc = TensorView::contiguous(meta, DType::i32, {2});
    pa.batch.seq_lens = TensorView::contiguous(meta, DType::i32, {1}, 8);
    pa.batch.block_table = TensorView::contiguous(meta, DType::i32, {1, 1}, 12);
    pa.params.scale = 0.125f;
    EXPECT_VKATTN_ERROR(paged_attention(ctx(), plan, a, pa), "paged_attention: the cache was moved from");
    EXPECT_NO_THROW(paged_attention(ctx(), plan, b, pa));
  }
  EXPECT_NO_THROW(write_kv_cache(ctx(), b, key, value, slot));
  a = std::move(b);   // assigned again: usable; b is now the one moved from
  EXPECT_NO_THROW(a.read_blocks(KvPart::key, 0, 1));
  EXPECT_VKATTN_ERROR(b.read_blocks(KvPart::key, 0, 1), "moved from");
}

TEST_F(KvCacheMisuse, LookupsOutsideTheBlockOrTheCacheAreErrors) {
  PagedKvCache c(ctx(), cfg_);
  EXPECT_EQ(c.element_in_block(KvPart::key, 15, 1, 63), (15u * 2 + 1) * 64 + 63);
  EXPECT_VKATTN_ERROR(c.element_in_block(KvPart::key, 16, 0, 0), "token_in_block = 16", "below 16");
  EXPECT_VKATTN_ERROR(c.element_in_block(KvPart::key, 0, 2, 0), "head = 2", "below 2");
  EXPECT_VKATTN_ERROR(c.element_in_block(KvPart::key, 0, 0, 0xFFFFFFFFu), "dim = 4294967295", "below 64");
  EXPECT_VKATTN_ERROR(c.element_in_block(static_cast<KvPart>(7), 0, 0, 0), "KvPart(7)");
  EXPECT_VKATTN_ERROR(c.read_blocks(static_cast<KvPart>(7), 0, 1), "read_blocks", "KvPart(7)");
  std::vector<uint8_t> block(c.block_bytes());
  EXPECT_VKATTN_ERROR(c.write_blocks(static_cast<KvPart>(7), 0, block), "write_blocks", "KvPart(7)");
  // The range is checked before the host copy of 2^32 - 1 blocks would be made.
  EXPECT_VKATTN_ERROR(c.read_blocks(KvPart::key, 0, 0xFFFFFFFFu), "blocks [0, 4294967295) are outside the cache of 4 blocks");
  EXPECT_VKATTN_ERROR(c.chunk(c.num_chunks()), "chunk 1 is outside the cache's 1 chunks");
}

// Refused before the block allocator's host lists (8 bytes per block) exist:
// 2^30 blocks would take 8 GiB of host memory first. Small chunks make the
// chunk count the limit on every device.
TEST_F(KvCacheMisuse, AHugeCacheIsRefusedBeforeHostMemoryIsTaken) {
  ContextOptions o;
  o.max_chunk_bytes = 1 << 20;
  Context small(o);
  const KvCacheConfig huge{.num_blocks = 1u << 30, .block_size = 1, .num_kv_heads = 1, .head_size = 16};
  EXPECT_VKATTN_ERROR(PagedKvCache(small, huge), "PagedKvCache:", "use fewer blocks");
}

// A cache over the application's memory: chunks that do not add up to the
// config are refused before the host lists exist, and bare addresses may not
// wrap past the end of the address space (the overlap check compares ranges).
TEST_F(KvCacheMisuse, ChunksOfApplicationMemoryAreCheckedFirst) {
  KvCacheChunk c;
  c.num_blocks = 4;
  c.k_address = UINT64_MAX - 15;
  c.v_address = 1 << 20;
  EXPECT_VKATTN_ERROR(PagedKvCache(ctx(), cfg_, std::span<const KvCacheChunk>(&c, 1)), "chunk 0's K blocks",
                      "run past the end of the address space");
  c.k_address = 1 << 24;
  const KvCacheConfig huge{.num_blocks = 1u << 30, .block_size = 1, .num_kv_heads = 1, .head_size = 16};
  EXPECT_VKATTN_ERROR(PagedKvCache(ctx(), huge, std::span<const KvCacheChunk>(&c, 1)), "the chunks hold 4 blocks",
                      "expected config.num_blocks = 1073741824");
}

}  // namespace
}  // namespace vkattn::test
