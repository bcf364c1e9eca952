// Device-local allocations of 1 MiB or more are dedicated to their buffer
// (VkMemoryDedicatedAllocateInfo): on an H200, random reads over 16 GiB or
// more of plain allocations ran at a quarter of the speed (bench gather,
// README). The test watches the Context's own vkAllocateMemory.
#include <vkattn/vkattn.hpp>

#include <vector>

#include "allocation.hpp"
#include "context_impl.hpp"
#include "vk_test.hpp"

namespace vkattn::test {
namespace {

struct SeenAllocation {
  VkDeviceSize size = 0;
  VkBuffer dedicated_to = VK_NULL_HANDLE;   // VK_NULL_HANDLE: not dedicated
};
std::vector<SeenAllocation> seen;
PFN_vkAllocateMemory real_allocate = nullptr;

VKAPI_ATTR VkResult VKAPI_CALL watching_allocate(VkDevice d, const VkMemoryAllocateInfo* info, const VkAllocationCallbacks* a,
                                                 VkDeviceMemory* m) {
  SeenAllocation s{info->allocationSize};
  for (auto* p = static_cast<const VkBaseInStructure*>(info->pNext); p; p = p->pNext)
    if (p->sType == VK_STRUCTURE_TYPE_MEMORY_DEDICATED_ALLOCATE_INFO)
      s.dedicated_to = reinterpret_cast<const VkMemoryDedicatedAllocateInfo*>(p)->buffer;
  seen.push_back(s);
  return real_allocate(d, info, a, m);
}

class DedicatedAllocations : public VkTest {
 protected:
  void SetUp() override {
    VkTest::SetUp();
    auto& vk = ctx().impl().vk;
    real_allocate = vk.vkAllocateMemory;
    vk.vkAllocateMemory = &watching_allocate;
    seen.clear();
  }
  void TearDown() override {
    if (ctx_) ctx().impl().vk.vkAllocateMemory = real_allocate;
    VkTest::TearDown();
  }
  // The one allocation made while `f` ran.
  template <class F>
  SeenAllocation one(F&& f) {
    seen.clear();
    f();
    EXPECT_EQ(seen.size(), 1u);
    return seen.empty() ? SeenAllocation{} : seen.back();
  }
};

TEST_F(DedicatedAllocations, LargeDeviceLocalBuffersAreDedicatedToThemselves) {
  Buffer big;
  const SeenAllocation b = one([&] { big = Buffer(ctx(), 1u << 20); });
  EXPECT_EQ(b.dedicated_to, big.ref().buffer);
  Buffer small;
  EXPECT_EQ(one([&] { small = Buffer(ctx(), (1u << 20) - 16); }).dedicated_to, VK_NULL_HANDLE);
  Buffer mapped;
  EXPECT_EQ(one([&] { mapped = Buffer(ctx(), 4u << 20, MemoryKind::device_local_mapped); }).dedicated_to, VK_NULL_HANDLE);
  // Asked for either way (bench gather compares both).
  auto& impl = ctx().impl();
  detail::Allocation a;
  EXPECT_EQ(one([&] { a = detail::allocate(impl, 4u << 20, MemoryKind::device_local, "test", detail::Dedicated::no); }).dedicated_to,
            VK_NULL_HANDLE);
  detail::release(impl, a);
  const SeenAllocation y = one([&] { a = detail::allocate(impl, 4096, MemoryKind::device_local, "test", detail::Dedicated::yes); });
  EXPECT_EQ(y.dedicated_to, a.buffer);
  detail::release(impl, a);
}

TEST_F(DedicatedAllocations, TheCachesChunksAreDedicated) {
  // 512 blocks of 16 tokens x 2 heads x 64 f16 (4 KiB): one chunk of 2 MiB for K and one for V.
  seen.clear();
  PagedKvCache cache(ctx(), KvCacheConfig{.num_blocks = 512, .block_size = 16, .num_kv_heads = 2, .head_size = 64});
  int dedicated = 0;
  for (const auto& s : seen) dedicated += s.size >= (2u << 20) && s.dedicated_to != VK_NULL_HANDLE;
  EXPECT_EQ(dedicated, 2) << "K's and V's chunk";
  for (uint32_t i = 0; i < cache.num_chunks(); ++i) EXPECT_NE(cache.chunk(i).k_buffer.buffer, VK_NULL_HANDLE);
}

}  // namespace
}  // namespace vkattn::test
