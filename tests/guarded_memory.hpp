// Guarded memory: buffers whose bytes lie flush against an unmapped page, so
// that a kernel reading even one byte past them (or before them) faults at
// once, every run, instead of reading whatever happens to lie there.
//
// Only where kernels run on the host's own memory: a CPU device (lavapipe)
// with VK_EXT_external_memory_host, which vkattn's Context enables when the
// device has it. The memory is mmap'ed with a PROT_NONE page on each side and
// imported as VkDeviceMemory; on lavapipe device addresses are host pointers,
// so loads through buffer device addresses (the KV cache) hit the guard pages
// too. Storage-buffer bindings on lavapipe are bounds-checked against the
// binding's range by the driver (an access outside reads 0 and writes
// nothing), so they never reach a guard page: views such as q, out and lse
// are guarded all the same, for drivers that do not check.
//
// install_guard_fault_reporter() makes a fault in a guard page print which
// buffer it belongs to and how far past its end (or before its start) the
// access was, before the process dies of the SIGSEGV as usual.
#pragma once
#include <vkattn/vkattn.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace vkattn::test {

// Whether `ctx` can make guarded buffers: a CPU device that imports host
// memory (a GPU could too, but a guard page would then be a device fault, not
// a report).
bool guarded_memory_available(const Context& ctx);

// Which side of the caller's bytes is flush against a guard page.
enum class GuardAt {
  end,     // bytes [offset(), offset() + size()) end where the trailing guard page begins
  start,   // bytes begin at the VkBuffer's start, right after the leading guard page
};

// One VkBuffer over imported host memory: [guard page][data pages][guard page].
// The VkBuffer spans exactly the data pages (so both of its ends touch a guard
// page); the caller's size() bytes sit at its end or its start. Usage:
// storage, transfer src/dst and device address (the memory is allocated with
// VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT), so it can back views and
// PagedKvCache chunks. The host reads and writes data() directly (no
// submission needed); the caller must not free it while a submission uses it.
class GuardedBuffer {
 public:
  // `name` is what a fault report calls it. Throws vkattn::Error when the
  // device cannot import host memory.
  GuardedBuffer(Context& ctx, VkDeviceSize size, GuardAt at, std::string name);
  ~GuardedBuffer();
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;

  // The whole VkBuffer (its size is the data pages'); place views at offset().
  BufferRef ref() const { return {buffer_, buffer_bytes_, 0}; }
  VkDeviceSize offset() const { return offset_; }
  VkDeviceSize size() const { return size_; }
  VkDeviceAddress address() const { return address_; }   // of the first of size() bytes
  uint8_t* data() const { return data_; }                  // host pointer to the same byte
  // First byte of the guard page the caller's bytes touch: data() + size()
  // for GuardAt::end, data() - page for GuardAt::start.
  const volatile uint8_t* guard() const;
  // Unmaps the data pages too (PROT_NONE), keeping the address range
  // reserved: any later access faults and is reported as "(revoked)". For
  // finding reads through stale addresses of memory the caller has freed.
  void revoke();

 private:
  void free_memory() noexcept;
  std::shared_ptr<detail::ContextImpl> impl_;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  void* mapping_ = nullptr;
  std::size_t mapping_bytes_ = 0, page_ = 0;
  VkDeviceSize buffer_bytes_ = 0, offset_ = 0, size_ = 0;
  VkDeviceAddress address_ = 0;
  uint8_t* data_ = nullptr;
  GuardAt at_;
  int registration_ = -1;
};

// A PagedKvCache whose every chunk of K and of V is its own GuardedBuffer of
// `blocks_per_chunk` blocks, all flush against the guard on the same side.
// One block per chunk (at most 64 blocks) puts a guard page after (or before)
// every block. The cache's chunk table is the library's own memory.
struct GuardedKvCache {
  std::vector<std::unique_ptr<GuardedBuffer>> k, v;
  std::unique_ptr<PagedKvCache> cache;
};
GuardedKvCache make_guarded_kv_cache(Context& ctx, const KvCacheConfig& config, GuardAt at, uint32_t blocks_per_chunk = 1);

// Installs (once per process) a SIGSEGV/SIGBUS handler that, for a fault in
// a guard page, writes to stderr
//   "guarded memory: fault at 0x...: byte I of 'NAME' (S bytes)"
// (plus ", revoked" after revoke()) with I relative to data() (I >= S: past the end; I < 0: before the start;
// the faulting byte, which for a wide load is where it crosses into the
// guard page), then lets the signal kill the process as it would have.
void install_guard_fault_reporter();

}  // namespace vkattn::test
