// The guarded-memory utility itself: its guard pages really are unmapped (a
// host read one byte outside the buffer dies, and the report names the
// buffer and the byte; so does a read of revoked bytes), and a kernel that
// stays inside guarded buffers runs over them without a fault
// (write_kv_cache filling every slot of a cache whose every block touches a
// guard page).
#include <cstring>

#include "guarded_memory.hpp"
#include "vk_test.hpp"

namespace vkattn::test {
namespace {

class GuardedMemory : public VkTest {
 protected:
  void SetUp() override {
    VkTest::SetUp();
    if (!guarded_memory_available(ctx())) GTEST_SKIP() << "the device cannot import host memory";
    // The death tests re-run the test in a new process: forking one that
    // holds the driver's threads is not safe.
    GTEST_FLAG_SET(death_test_style, "threadsafe");
  }
};

uint8_t read_byte(const volatile uint8_t* p) { return *p; }

TEST_F(GuardedMemory, ReadOneBytePastTheEndDies) {
  GuardedBuffer b(ctx(), 100, GuardAt::end, "tail probe");
  b.data()[0] = 1;
  b.data()[99] = 2;   // the last byte is usable
  EXPECT_EQ(b.data() + 100, b.guard());
  install_guard_fault_reporter();
  EXPECT_DEATH(read_byte(b.guard()), "byte 100 of 'tail probe' \\(100 bytes\\)");
}

TEST_F(GuardedMemory, ReadOneByteBeforeTheStartDies) {
  GuardedBuffer b(ctx(), 100, GuardAt::start, "head probe");
  EXPECT_EQ(b.offset(), 0u);
  b.data()[0] = 1;
  install_guard_fault_reporter();
  EXPECT_DEATH(read_byte(b.data() - 1), "byte -1 of 'head probe' \\(100 bytes\\)");
}

TEST_F(GuardedMemory, ReadOfRevokedBytesDies) {
  GuardedBuffer b(ctx(), 100, GuardAt::end, "freed");
  b.data()[5] = 1;
  b.revoke();
  install_guard_fault_reporter();
  EXPECT_DEATH(read_byte(b.data() + 5), "byte 5 of 'freed' \\(100 bytes, revoked\\)");
}

TEST_F(GuardedMemory, AFaultElsewhereIsReportedAsSuch) {
  install_guard_fault_reporter();
  EXPECT_DEATH(read_byte(reinterpret_cast<const volatile uint8_t*>(uintptr_t(16))), "not in a guard page");
}

// Every slot of a cache of one block per chunk written by the kernel: each
// write ends (or starts) at a guard page, and none faults.
TEST_F(GuardedMemory, WriteKvCacheFillsGuardedCacheWithoutFault) {
  for (GuardAt at : {GuardAt::end, GuardAt::start}) {
    SCOPED_TRACE(at == GuardAt::end ? "guard after each block" : "guard before each block");
    KvCacheConfig cfg{.num_blocks = 3, .block_size = 16, .num_kv_heads = 2, .head_size = 64, .layout = KvLayout::split};
    GuardedKvCache g = make_guarded_kv_cache(ctx(), cfg, at);
    const uint32_t n = cfg.num_blocks * cfg.block_size;
    const uint64_t elems = uint64_t(n) * cfg.num_kv_heads * cfg.head_size;
    GuardedBuffer key(ctx(), elems * 2, at, "key"), value(ctx(), elems * 2, at, "value");
    GuardedBuffer slots(ctx(), n * 4, at, "slot_mapping");
    for (uint64_t i = 0; i < elems; ++i) {
      const uint16_t one = 0x3C00, two = 0x4000;
      std::memcpy(key.data() + 2 * i, &one, 2);
      std::memcpy(value.data() + 2 * i, &two, 2);
    }
    for (uint32_t s = 0; s < n; ++s) std::memcpy(slots.data() + 4 * s, &s, 4);
    install_guard_fault_reporter();
    write_kv_cache(ctx(), *g.cache, TensorView::contiguous(key.ref(), DType::f16, {n, 2, 64}, key.offset()),
                   TensorView::contiguous(value.ref(), DType::f16, {n, 2, 64}, value.offset()),
                   TensorView::contiguous(slots.ref(), DType::i32, {n}, slots.offset()));
    // The cache's bytes are the host's: read them where they lie.
    for (uint32_t b = 0; b < cfg.num_blocks; ++b)
      for (uint64_t i = 0; i < g.cache->block_bytes(); i += 2) {
        uint16_t k, v;
        std::memcpy(&k, g.k[b]->data() + i, 2);
        std::memcpy(&v, g.v[b]->data() + i, 2);
        ASSERT_EQ(k, 0x3C00) << "block " << b << " K byte " << i;
        ASSERT_EQ(v, 0x4000) << "block " << b << " V byte " << i;
      }
  }
}

}  // namespace
}  // namespace vkattn::test
