// Moving a Context, and destroying Buffers and caches after their Context
// (context.hpp "Lifetime"): whichever object goes last frees the device; a
// moved-from Context throws vkattn::Error instead of crashing.
#include <optional>
#include <vector>

#include "runners/write_kv_cache_runner.hpp"
#include "vk_test.hpp"

namespace vkattn::test {
namespace {

// Fails the test on any validation error the Context saw.
void expect_no_validation_errors(const Context& ctx) {
  for (const auto& m : ctx.validation_messages()) ADD_FAILURE() << "validation error: " << m;
}

// A synchronous round trip through device-local memory (staging copies submitted on the Context's queue).
void expect_round_trip(Context& ctx) {
  Buffer b(ctx, 16);
  const std::vector<uint32_t> words = {1, 2, 3, 4};
  b.upload(std::span<const uint32_t>(words));
  EXPECT_EQ(b.download_as<uint32_t>(4), words);
}

KvCacheConfig small_cache() { return {.num_blocks = 2, .block_size = 16, .num_kv_heads = 1, .head_size = 16}; }

TEST(ContextMove, MoveConstructedContextWorksAndBothDestroyInEitherOrder) {
  for (bool moved_to_first : {true, false}) {
    SCOPED_TRACE(moved_to_first ? "moved-to Context destroyed first" : "moved-from Context destroyed first");
    std::optional<Context> a(std::in_place, test_options());
    const uint64_t id = a->id();
    Buffer made_before(*a, 16);
    std::optional<Context> b(std::in_place, std::move(*a));
    EXPECT_EQ(b->id(), id);
    expect_round_trip(*b);
    made_before.fill(7u);   // a Buffer made before the move uses the same device
    EXPECT_EQ(made_before.download_as<uint32_t>(1)[0], 7u);
    expect_no_validation_errors(*b);
    if (moved_to_first) { b.reset(); a.reset(); }
    else { a.reset(); b.reset(); }
  }
}

TEST(ContextMove, MoveAssignedContextReplacesTheTargetsDevice) {
  Context a(test_options());
  Context b(test_options());
  const uint64_t id_a = a.id();
  Buffer of_b(b, 16);   // keeps b's old device alive after the assignment
  b = std::move(a);
  EXPECT_EQ(b.id(), id_a);
  expect_round_trip(b);
  of_b.fill(9u);
  EXPECT_EQ(of_b.download_as<uint32_t>(1)[0], 9u);
  // Self-assignment through a reference (hidden from the compiler's warning) keeps the Context.
  Context& same = b;
  b = std::move(same);
  expect_round_trip(b);
  expect_no_validation_errors(b);
}

TEST(ContextMove, AnOpRunsOnTheMovedToContext) {
  Context a(test_options());
  Context b(std::move(a));
  tool::WriteKvCacheCase c;
  c.timing_repetitions = 0;
  c.num_tokens = 5;
  c.cache = small_cache();
  auto r = tool::run_write_kv_cache(b, c);
  EXPECT_TRUE(r.pass) << r.failure;
  expect_no_validation_errors(b);
}

TEST(ContextMove, UsingAMovedFromContextThrows) {
  Context a(test_options());
  Context b(std::move(a));
  const char* moved = "moved from";
  EXPECT_VKATTN_ERROR(a.capabilities(), moved);
  EXPECT_VKATTN_ERROR(a.device(), moved);
  EXPECT_VKATTN_ERROR(a.id(), moved);
  EXPECT_VKATTN_ERROR(a.usable(), moved);
  EXPECT_VKATTN_ERROR(a.path_for("write_kv_cache"), moved);
  EXPECT_VKATTN_ERROR(a.validation_messages(), moved);
  EXPECT_VKATTN_ERROR(a.save_pipeline_cache(), moved);
  EXPECT_VKATTN_ERROR(a.check_device_status(), moved);
  EXPECT_VKATTN_ERROR(a.release_recorded_descriptor_sets(), moved);
  EXPECT_VKATTN_ERROR(a.submit_and_wait([](VkCommandBuffer) {}), moved);
  EXPECT_VKATTN_ERROR(Buffer(a, 16), moved);
  EXPECT_VKATTN_ERROR(PagedKvCache(a, small_cache()), moved);
  // Assigning a live Context to the moved-from one makes it usable again.
  a = std::move(b);
  expect_round_trip(a);
  EXPECT_VKATTN_ERROR(b.capabilities(), moved);
}

TEST(ContextLifetime, BufferOutlivesItsContext) {
  std::optional<Context> ctx(std::in_place, test_options());
  Buffer device_local(*ctx, 16);
  Buffer mapped(*ctx, 16, MemoryKind::host_visible);
  const std::vector<uint32_t> words = {5, 6, 7, 8};
  device_local.upload(std::span<const uint32_t>(words));
  mapped.upload(std::span<const uint32_t>(words));
  ctx.reset();
  // Downloads after the Context object is gone submit on its (still live) device.
  EXPECT_EQ(device_local.download_as<uint32_t>(4), words);
  EXPECT_EQ(mapped.download_as<uint32_t>(4), words);
  device_local.fill(3u);
  EXPECT_EQ(device_local.download_as<uint32_t>(1)[0], 3u);
  // Destroyed in either order after the Context.
  Buffer moved = std::move(device_local);
  mapped = Buffer();
  EXPECT_EQ(moved.download_as<uint32_t>(1)[0], 3u);
}

TEST(ContextLifetime, CacheOutlivesItsContext) {
  std::optional<Context> ctx(std::in_place, test_options());
  std::optional<PagedKvCache> cache(std::in_place, *ctx, small_cache());
  std::vector<uint8_t> block(cache->block_bytes(), 0x5A);
  cache->write_blocks(KvPart::value, 1, block);
  ctx.reset();
  EXPECT_EQ(cache->read_blocks(KvPart::value, 1, 1), block);
  cache->fill(0x01020304u);
  EXPECT_EQ(cache->read_blocks(KvPart::key, 0, 1)[0], 0x04);
  cache.reset();
}

TEST(ContextLifetime, BuffersAndCacheDestroyedInAnyOrderAroundTheContext) {
  // Every order of destroying the Context, a Buffer and a cache.
  const int orders[][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
  for (const auto& order : orders) {
    SCOPED_TRACE(::testing::Message() << "order " << order[0] << order[1] << order[2]);
    std::optional<Context> ctx(std::in_place, test_options());
    std::optional<Buffer> buf(std::in_place, *ctx, 64);
    std::optional<PagedKvCache> cache(std::in_place, *ctx, small_cache());
    for (int which : order) {
      if (which == 0) ctx.reset();
      if (which == 1) buf.reset();
      if (which == 2) cache.reset();
    }
  }
}

}  // namespace
}  // namespace vkattn::test
