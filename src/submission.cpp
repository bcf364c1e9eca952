// Synchronous submissions and the kernels' device status.
#include <vkattn/context.hpp>
#include <vkattn/error.hpp>

#include <atomic>
#include <cstring>
#include <string>

#include "abi/common.h"
#include "abi/paged_attention.h"
#include "context_impl.hpp"
#include "op_support.hpp"

namespace vkattn {
namespace detail {

void submit_and_wait(ContextImpl& impl, const std::function<void(VkCommandBuffer)>& record,
                     const std::function<void()>& check) {
  if (!record) throw Error("Context::submit_and_wait: the record function is empty");
  // A synchronous call made from inside a record function would wait on the
  // lock its own thread holds (it hung): refused, as the recorded form is
  // what belongs there.
  if (impl.submit_owner.load() == std::this_thread::get_id())
    throw Error("a synchronous call (Buffer::upload/download/fill, a cache's read/write_blocks, an op's synchronous "
                "form, submit_and_wait) was made inside a Context::submit_and_wait record function: record ops "
                "into the command buffer it gives (their recorded forms) instead");
  std::lock_guard lock(impl.submit_mutex);
  impl.submit_owner.store(std::this_thread::get_id());
  struct Owner {
    ContextImpl& impl;
    ~Owner() { impl.submit_owner.store(std::thread::id{}); }
  } owner{impl};
  impl.check_usable("a synchronous call");
  if (!impl.queue)
    throw Error("a synchronous call needs a queue, but this Context was adopted without one (AdoptInfo::queue): "
                "record the op into your own command buffer instead");
  const auto& vk = impl.vk;
  VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ai.commandPool = impl.command_pool;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  VkCommandBuffer cmd;
  vk_check(vk.vkAllocateCommandBuffers(impl.device, &ai, &cmd), "vkAllocateCommandBuffers");
  // Until it is submitted, or once it has completed, the command buffer and
  // its descriptor sets are ours to free. A submission that timed out keeps
  // both (pending_cmd): the GPU may still read them.
  bool in_flight = false;
  struct Cleanup {
    ContextImpl& impl;
    VkCommandBuffer cmd;
    const bool& in_flight;
    ~Cleanup() {
      impl.sync_cmd.store(VK_NULL_HANDLE);
      if (in_flight) return;
      impl.vk.vkFreeCommandBuffers(impl.device, impl.command_pool, 1, &cmd);
      impl.sync_sets.reset(impl.vk, impl.device);
    }
  } cleanup{impl, cmd, in_flight};
  impl.sync_cmd.store(cmd);
  impl.sync_ops = 0;
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  vk_check(vk.vkBeginCommandBuffer(cmd, &bi), "vkBeginCommandBuffer");
  // Earlier submissions' writes were made available by their fences; make them
  // visible here, and make this submission's writes visible to the host after.
  auto barrier = [&](VkPipelineStageFlags dst_stage, VkAccessFlags dst_access) {
    VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb.srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT;
    mb.dstAccessMask = dst_access;
    vk.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, dst_stage, 0, 1, &mb, 0, nullptr, 0, nullptr);
  };
  barrier(VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT);
  record(cmd);
  barrier(VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
  vk_check(vk.vkEndCommandBuffer(cmd), "vkEndCommandBuffer");
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1;
  si.pCommandBuffers = &cmd;
  vk_check(vk.vkResetFences(impl.device, 1, &impl.fence), "vkResetFences");
  vk_check(vk.vkQueueSubmit(impl.queue, 1, &si, impl.fence), "vkQueueSubmit");
  in_flight = true;
  impl.pending_cmd = cmd;
  const uint64_t deadline = impl.options.submit_timeout_ns ? impl.options.submit_timeout_ns : UINT64_MAX;
  const VkResult r = vk.vkWaitForFences(impl.device, 1, &impl.fence, VK_TRUE, deadline);
  if (r == VK_TIMEOUT) {
    impl.lost_reason = "a submission did not complete within " + std::to_string(impl.options.submit_timeout_ns) +
                       " ns (ContextOptions::submit_timeout_ns)";
    impl.lost.store(true, std::memory_order_release);
    throw Error(impl.lost_reason + "; the Context is now unusable, and what the submission uses stays allocated "
                "until the Context is destroyed (which waits for it)", r);
  }
  if (r != VK_SUCCESS) {
    // Device lost (or out of memory while waiting): the GPU no longer runs
    // the submission, so its objects may be freed.
    in_flight = false;
    impl.pending_cmd = VK_NULL_HANDLE;
    vk_check(r, "vkWaitForFences");
  }
  in_flight = false;
  impl.pending_cmd = VK_NULL_HANDLE;
  if (check) check();
}

std::string_view reporting_op_name(ReportingOp op) {
  switch (op) {
    case ReportingOp::paged_attention: return "paged_attention";
    case ReportingOp::prefix_prefill: return "prefix_prefill";
    case ReportingOp::block_sparse_attention: return "block_sparse_attention";
    case ReportingOp::build_block_mask: return "build_block_mask";
    case ReportingOp::write_kv_cache: return "write_kv_cache";
    case ReportingOp::bench: return "a benchmark kernel";
  }
  return "?";
}

void throw_status(ContextImpl& impl, StatusSlot slot) {
  // The order of abi/common.h's status words: the code, then its details;
  // words 0..3 cleared while the claim still keeps kernels out, the claim
  // released last. A slot claimed but not yet published is left alone.
  std::atomic_ref<uint32_t> code_word(impl.status_words(slot)[0]);
  const uint32_t code = code_word.load(std::memory_order_acquire);
  if (code == abi::STATUS_OK) return;
  uint32_t* words = impl.status_words(slot);
  const uint32_t a = words[1], b = words[2], c = words[3];
  for (uint32_t w = 1; w < abi::STATUS_CLAIM; ++w) words[w] = 0;
  code_word.store(abi::STATUS_OK, std::memory_order_relaxed);
  std::atomic_ref<uint32_t>(words[abi::STATUS_CLAIM]).store(0, std::memory_order_release);
  // The op that reported: the slot's, or for the synchronous slot the ops
  // the submission recorded (several only when a Context::submit_and_wait
  // lambda recorded several ops: then the report names them all).
  const uint32_t ops = slot == StatusSlot::synchronous ? impl.sync_ops : 1u << (static_cast<uint32_t>(slot) - 1);
  std::string who;
  for (uint32_t op = 0; op < kReportingOps; ++op)
    if (ops & (1u << op)) who += (who.empty() ? "" : " or ") + std::string(reporting_op_name(static_cast<ReportingOp>(op)));
  who = (who.empty() ? std::string("a kernel") : who) + ": ";
  switch (code) {
    case abi::STATUS_BLOCK_OUT_OF_RANGE:
      throw Error(who + "block_table[" + std::to_string(a) + ", " + std::to_string(b) + "] = " +
                  std::to_string(static_cast<int32_t>(c)) +
                  " on the device is not a block of the cache (expected 0 <= entry < num_blocks); block 0 was read instead");
    case abi::STATUS_SLOT_OUT_OF_RANGE: {
      int64_t slot_value = static_cast<int64_t>((uint64_t(c) << 32) | b);
      throw Error(who + "slot_mapping[" + std::to_string(a) + "] = " + std::to_string(slot_value) +
                  " is beyond the cache: expected a negative slot (padding, not written) or 0 <= slot < num_blocks * block_size; that token was not written");
    }
    case abi::STATUS_QUERY_START_LOC:
      throw Error(who + "query_start_loc on the device is unusable at sequence " + std::to_string(a) + ": [" +
                  std::to_string(static_cast<int32_t>(b)) + ", " + std::to_string(static_cast<int32_t>(c)) +
                  "] (expected query_start_loc[0] = 0 and query_start_loc[s] <= query_start_loc[s + 1] <= the plan's num_tokens); the sequence was skipped");
    case abi::STATUS_SEQ_LEN:
      throw Error(who + "seq_lens[" + std::to_string(a) + "] = " + std::to_string(static_cast<int32_t>(b)) +
                  " on the device is below its query_len " + std::to_string(c) +
                  " (expected 0, or >= query_len: seq_len counts the new tokens too); the sequence was skipped");
    case abi::STATUS_SEQ_LEN_TABLE:
      throw Error(who + "seq_lens[" + std::to_string(a) + "] = " + std::to_string(b) +
                  " on the device exceeds what its block-table row holds (" + std::to_string(c) +
                  " keys: max_blocks_per_seq * block_size, plus the new tokens for prefix_prefill); the sequence was skipped");
    case abi::STATUS_QUERY_LEN_PLAN:
      throw Error(who + "sequence " + std::to_string(a) + " has query_len " + std::to_string(b) +
                  " on the device, more than the plan's tiles hold (" + std::to_string(c) +
                  " tokens); the sequence was skipped: plan with a larger max_query_len");
    case abi::STATUS_PARAMETER: {
      float v;
      std::memcpy(&v, &c, 4);
      throw Error(who + (a == 0 ? "alibi_slopes[" : "sinks[") + std::to_string(b) + "] = " +
                  std::to_string(v) + (a == 0 ? " is not finite" : " is NaN or +inf") + "; that head's output is meaningless");
    }
    case abi::STATUS_BLOCK_MASK_INDEX:
      throw Error(who + std::string("the block mask's ") + (b >> 31 ? "full_kv_indices" : "kv_indices") +
                  " row " + std::to_string(a) + " entry " + std::to_string(b & 0x7FFFFFFFu) + " = " + std::to_string(static_cast<int32_t>(c)) +
                  " on the device is not a kv block (expected 0 <= index < ceil(Lkv / kv_block_size)); that block was skipped");
    case abi::STATUS_BLOCK_MASK_COUNT:
      throw Error(who + "the block mask's " + (a >> 31 ? "full_kv_num_blocks" : "kv_num_blocks") + " row " +
                  std::to_string(a & 0x7FFFFFFFu) + " = " + std::to_string(static_cast<int32_t>(c)) +
                  " on the device (expected 0 to kv_blocks = " + std::to_string(b) + "); the count was clamped");
    case abi::STATUS_SPLIT_COUNTER:
      throw Error(who + "the split workspace's arrival counter of work item " + std::to_string(a) + " held " +
                  std::to_string(b) + " when a segment arrived (expected fewer than the " + std::to_string(c) +
                  " segments: the workspace's first " + std::to_string(4 * PA_SPLIT_COUNTER_WORDS) +
                  " bytes must be zero before its first split run, and only split runs may write them); that item's rows were not written");
    case abi::STATUS_SUBGROUP_SIZE:
      throw Error(who + "the driver ran a kernel with subgroups of " + std::to_string(a) +
                  " invocations, but it was built for " + std::to_string(b) + "; nothing was computed (force VKATTN_PATH=scalar)");
    default:
      throw Error(who + "a kernel reported status code " + std::to_string(code) + " (" + std::to_string(a) + ", " +
                  std::to_string(b) + ", " + std::to_string(c) + ")");
  }
}

}  // namespace detail

void Context::submit_and_wait(const std::function<void(VkCommandBuffer)>& record) {
  auto& i = impl();
  detail::submit_and_wait(i, record, [&] { detail::throw_status(i, detail::StatusSlot::synchronous); });
}

void Context::check_device_status() {
  auto& i = impl();
  std::lock_guard lock(i.recorded_status_mutex);   // (a report's read and its clearing are one step)
  for (uint32_t op = 0; op < detail::kReportingOps; ++op)
    detail::throw_status(i, detail::recorded_slot(static_cast<detail::ReportingOp>(op)));
}

void Context::release_recorded_descriptor_sets() {
  auto& i = impl();
  std::lock_guard lock(i.recorded_sets_mutex);
  i.recorded_sets.reset(i.vk, i.device);
}

}  // namespace vkattn
