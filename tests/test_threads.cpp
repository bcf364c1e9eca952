// One Context, several threads, as include/vkattn/context.hpp allows: device
// errors reach the synchronous call that caused them, and recording into a
// caller's command buffer goes on while other threads run synchronous ops
// (with descriptor sets as well as push descriptors).
#include <atomic>
#include <barrier>
#include <thread>
#include <vector>

#include "abi/common.h"
#include "context_impl.hpp"
#include "own_commands.hpp"
#include "vk_test.hpp"

namespace vkattn::test {
namespace {

struct Tokens {
  Buffer k, v, good_slots, bad_slots;
  Tokens(Context& ctx) : k(ctx, 64 * 2), v(ctx, 64 * 2), good_slots(ctx, 8), bad_slots(ctx, 8) {
    k.fill(0x3C003C00u);
    v.fill(0x3C003C00u);
    const int64_t good = 5, bad = 1000;
    good_slots.upload(&good, 8);
    bad_slots.upload(&bad, 8);
  }
  TensorView kv(Buffer& b) { return TensorView::contiguous(b, DType::f16, {1, 1, 64}); }
  TensorView slots(Buffer& b) { return TensorView::contiguous(b, DType::i64, {1}); }
};

TEST(Threads, DeviceErrorsReachTheSynchronousCallThatCausedThem) {
  Context ctx(test_options());
  PagedKvCache cache(ctx, KvCacheConfig{.num_blocks = 4, .block_size = 16, .num_kv_heads = 1, .head_size = 64});
  Tokens t(ctx);
  std::atomic<int> good_errors{0}, bad_errors{0}, bad_wrong_message{0};
  std::thread good([&] {
    for (int i = 0; i < 40; ++i) {
      try {
        write_kv_cache(ctx, cache, t.kv(t.k), t.kv(t.v), t.slots(t.good_slots));
      } catch (const Error&) {
        ++good_errors;
      }
    }
  });
  std::thread bad([&] {
    for (int i = 0; i < 40; ++i) {
      try {
        write_kv_cache(ctx, cache, t.kv(t.k), t.kv(t.v), t.slots(t.bad_slots));
      } catch (const Error& e) {
        ++bad_errors;
        if (std::string(e.what()).find("slot_mapping[0] = 1000") == std::string::npos) ++bad_wrong_message;
      }
    }
  });
  good.join();
  bad.join();
  EXPECT_EQ(good_errors, 0) << "the thread writing good slots received errors";
  EXPECT_EQ(bad_errors, 40) << "the thread writing a bad slot missed its errors";
  EXPECT_EQ(bad_wrong_message, 0);
  EXPECT_NO_THROW(ctx.check_device_status());   // nothing recorded went wrong
  for (const auto& m : ctx.validation_messages()) ADD_FAILURE() << "validation error: " << m;
}

class ThreadsRecording : public ::testing::TestWithParam<bool> {};

// One thread records ops into its own command buffers (never submitted)
// while another runs synchronous ops on the same Context.
TEST_P(ThreadsRecording, RecordingWhileAnotherThreadRunsSynchronousOps) {
  ContextOptions o = test_options();
  o.disable_push_descriptors = !GetParam();
  Context ctx(o);
  PagedKvCache cache(ctx, KvCacheConfig{.num_blocks = 4, .block_size = 16, .num_kv_heads = 1, .head_size = 64});
  Tokens t(ctx);
  const auto& vk = ctx.impl().vk;
  OwnCommands own(ctx);
  const VkCommandBuffer cmd = own.cmd();
  std::atomic<int> failures{0};
  std::thread recorder([&] {
    for (int i = 0; i < 200; ++i) {
      VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
      vk.vkBeginCommandBuffer(cmd, &bi);
      try {
        for (int j = 0; j < 4; ++j) write_kv_cache(ctx, cache, t.kv(t.k), t.kv(t.v), t.slots(t.good_slots), cmd);
      } catch (const Error&) {
        ++failures;
      }
      vk.vkEndCommandBuffer(cmd);
      vk.vkResetCommandBuffer(cmd, 0);
    }
  });
  std::thread runner([&] {
    for (int i = 0; i < 40; ++i) {
      try {
        write_kv_cache(ctx, cache, t.kv(t.k), t.kv(t.v), t.slots(t.good_slots));
      } catch (const Error&) {
        ++failures;
      }
    }
  });
  recorder.join();
  runner.join();
  EXPECT_EQ(failures, 0);
  ctx.release_recorded_descriptor_sets();   // the recorded buffers were never submitted
  for (const auto& m : ctx.validation_messages()) ADD_FAILURE() << "validation error: " << m;
}

// A report of recorded work reaches exactly one of several threads that call
// check_device_status at once: the read and the clearing of a slot were two
// steps, and two callers could both read a report before either cleared it.
// Reports are written into two ops' mapped status slots here, as kernels
// would, so that a round takes microseconds and the race has many chances.
TEST(Threads, EachRecordedReportReachesOneCheckingThread) {
  Context ctx(test_options());
  auto& impl = ctx.impl();
  uint32_t* slots[] = {impl.status_words(detail::recorded_slot(detail::ReportingOp::paged_attention)),
                       impl.status_words(detail::recorded_slot(detail::ReportingOp::block_sparse_attention))};
  constexpr int kThreads = 4, kRounds = 5000;
  int wrong_rounds = 0;
  for (int r = 0; r < kRounds; ++r) {
    for (uint32_t* words : slots) {   // block_table[0, 2] = 9, as the kernels report it
      words[abi::STATUS_CLAIM] = 1;
      words[1] = 0;
      words[2] = 2;
      words[3] = 9;
      std::atomic_ref<uint32_t>(words[0]).store(abi::STATUS_BLOCK_OUT_OF_RANGE, std::memory_order_release);
    }
    std::atomic<int> reports{0};
    std::barrier go(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&] {
        go.arrive_and_wait();
        for (int k = 0; k < 3; ++k) {
          try {
            ctx.check_device_status();
          } catch (const Error&) {
            ++reports;
          }
        }
      });
    for (auto& t : threads) t.join();
    if (reports.load() != 2) ++wrong_rounds;
  }
  EXPECT_EQ(wrong_rounds, 0) << "rounds of " << kRounds << " that did not deliver each of 2 reports once";
}

// A kernel claims a slot, writes the details, then publishes the code
// (status.glsl). A slot read between the claim and the code holds no report
// yet: it is neither reported nor cleared, so the kernel's details are not
// lost under it; once published, the report comes whole and the claim is
// released for the next one. Written into the mapped slot here, as a kernel
// would mid-run.
TEST(Threads, ReportIsTakenOnlyOncePublished) {
  Context ctx(test_options());
  uint32_t* words = ctx.impl().status_words(detail::recorded_slot(detail::ReportingOp::write_kv_cache));
  words[abi::STATUS_CLAIM] = 1;   // claimed, details being written
  words[1] = 7;
  EXPECT_NO_THROW(ctx.check_device_status());
  EXPECT_EQ(words[abi::STATUS_CLAIM], 1u) << "the claim of a report not yet published was released";
  EXPECT_EQ(words[1], 7u) << "the details of a report not yet published were cleared";
  words[2] = 5;   // slot_mapping[7] = 5 + 2^32 * 1
  words[3] = 1;
  std::atomic_ref<uint32_t>(words[0]).store(abi::STATUS_SLOT_OUT_OF_RANGE, std::memory_order_release);
  EXPECT_VKATTN_ERROR(ctx.check_device_status(), "write_kv_cache", "slot_mapping[7] = 4294967301");
  for (uint32_t w = 0; w < abi::STATUS_WORDS; ++w) EXPECT_EQ(words[w], 0u) << "status word " << w << " after the report";
  EXPECT_NO_THROW(ctx.check_device_status());
}

INSTANTIATE_TEST_SUITE_P(Binding, ThreadsRecording, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "push_descriptors" : "descriptor_sets"; });

}  // namespace
}  // namespace vkattn::test
