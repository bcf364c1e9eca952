// The serving loop (tools/serve/serving_loop.cpp) as an engine drives vkattn:
// replayed command buffers stay right step after step, and the steady state
// allocates, submits and waits for nothing of vkattn's own.
#include <atomic>
#include <cstring>

#include "context_impl.hpp"
#include "serve/serving_loop.hpp"
#include "vk_test.hpp"

namespace vkattn::test {
namespace {

// A small model: 2 layers, 4/2 heads of 64, 3 decoding sequences over 40
// tokens of context, a 5-token prefill chunk every 10th step; after 8 such
// steps the prefilled sequence replaces the oldest decoder.
tool::ServeConfig small_model(bool replay) {
  tool::ServeConfig c;
  c.layers = 2;
  c.num_q_heads = 4;
  c.num_kv_heads = 2;
  c.head_size = 64;
  c.block_size = 16;
  c.batch = 3;
  c.context = 40;
  c.prefill_chunk = 5;
  c.mixed_every = 10;
  c.steps = 100;
  c.replay = replay;
  c.random_values = true;
  return c;
}

class ServingLoop : public VkTest {};

// Replay mode: two command buffers (decode, mixed) recorded once and submitted
// 100 times while the sequences grow, take new blocks, a chunked prefill runs
// among the decodes and a sequence retires; every step checked against the
// float64 reference.
TEST_F(ServingLoop, ReplayedStepsMatchTheReferenceEveryStep) {
  tool::ServingLoop loop(ctx(), small_model(true));
  int mixed = 0;
  for (uint32_t step = 0; step < 100; ++step) {
    auto t = loop.step();
    mixed += t.mixed;
    loop.finish();
    auto r = loop.verify(step % 2);
    ASSERT_TRUE(r.pass) << "step " << step << (t.mixed ? " (mixed)" : "") << ": " << r.failure;
  }
  EXPECT_EQ(mixed, 10);
}

TEST_F(ServingLoop, PlannedStepsMatchTheReference) {
  tool::ServingLoop loop(ctx(), small_model(false));
  for (uint32_t step = 0; step < 20; ++step) {
    auto t = loop.step();
    loop.finish();
    auto r = loop.verify(1);
    ASSERT_TRUE(r.pass) << "step " << step << (t.mixed ? " (mixed)" : "") << ": " << r.failure;
  }
}

// ---- what vkattn itself calls during the steps ----

struct Counts {
  std::atomic<int> allocate_memory{0}, queue_submit{0}, wait_for_fences{0}, create_pipelines{0}, create_buffer{0},
      create_descriptor_pool{0}, allocate_descriptor_sets{0};
};
Counts counts;
PFN_vkGetInstanceProcAddr real_gipa = nullptr;
PFN_vkGetDeviceProcAddr real_gdpa = nullptr;
PFN_vkAllocateMemory real_allocate_memory = nullptr;
PFN_vkQueueSubmit real_queue_submit = nullptr;
PFN_vkWaitForFences real_wait_for_fences = nullptr;
PFN_vkCreateComputePipelines real_create_pipelines = nullptr;
PFN_vkCreateBuffer real_create_buffer = nullptr;
PFN_vkCreateDescriptorPool real_create_descriptor_pool = nullptr;
PFN_vkAllocateDescriptorSets real_allocate_descriptor_sets = nullptr;

VKAPI_ATTR VkResult VKAPI_CALL allocate_memory(VkDevice d, const VkMemoryAllocateInfo* i, const VkAllocationCallbacks* a,
                                               VkDeviceMemory* m) {
  ++counts.allocate_memory;
  return real_allocate_memory(d, i, a, m);
}
VKAPI_ATTR VkResult VKAPI_CALL queue_submit(VkQueue q, uint32_t n, const VkSubmitInfo* s, VkFence f) {
  ++counts.queue_submit;
  return real_queue_submit(q, n, s, f);
}
VKAPI_ATTR VkResult VKAPI_CALL wait_for_fences(VkDevice d, uint32_t n, const VkFence* f, VkBool32 all, uint64_t t) {
  ++counts.wait_for_fences;
  return real_wait_for_fences(d, n, f, all, t);
}
VKAPI_ATTR VkResult VKAPI_CALL create_pipelines(VkDevice d, VkPipelineCache c, uint32_t n, const VkComputePipelineCreateInfo* i,
                                                const VkAllocationCallbacks* a, VkPipeline* p) {
  ++counts.create_pipelines;
  return real_create_pipelines(d, c, n, i, a, p);
}
VKAPI_ATTR VkResult VKAPI_CALL create_buffer(VkDevice d, const VkBufferCreateInfo* i, const VkAllocationCallbacks* a, VkBuffer* b) {
  ++counts.create_buffer;
  return real_create_buffer(d, i, a, b);
}
VKAPI_ATTR VkResult VKAPI_CALL create_descriptor_pool(VkDevice d, const VkDescriptorPoolCreateInfo* i,
                                                      const VkAllocationCallbacks* a, VkDescriptorPool* p) {
  ++counts.create_descriptor_pool;
  return real_create_descriptor_pool(d, i, a, p);
}
VKAPI_ATTR VkResult VKAPI_CALL allocate_descriptor_sets(VkDevice d, const VkDescriptorSetAllocateInfo* i, VkDescriptorSet* s) {
  ++counts.allocate_descriptor_sets;
  return real_allocate_descriptor_sets(d, i, s);
}

template <class F>
PFN_vkVoidFunction wrap(const char* name, const char* want, F* real, F wrapper, PFN_vkVoidFunction got) {
  if (std::strcmp(name, want)) return nullptr;
  *real = reinterpret_cast<F>(got);
  return got ? reinterpret_cast<PFN_vkVoidFunction>(wrapper) : nullptr;
}

VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL counting_gdpa(VkDevice device, const char* name) {
  PFN_vkVoidFunction got = real_gdpa(device, name);
  for (PFN_vkVoidFunction w : {wrap(name, "vkAllocateMemory", &real_allocate_memory, &allocate_memory, got),
                               wrap(name, "vkQueueSubmit", &real_queue_submit, &queue_submit, got),
                               wrap(name, "vkWaitForFences", &real_wait_for_fences, &wait_for_fences, got),
                               wrap(name, "vkCreateComputePipelines", &real_create_pipelines, &create_pipelines, got),
                               wrap(name, "vkCreateBuffer", &real_create_buffer, &create_buffer, got),
                               wrap(name, "vkCreateDescriptorPool", &real_create_descriptor_pool, &create_descriptor_pool, got),
                               wrap(name, "vkAllocateDescriptorSets", &real_allocate_descriptor_sets, &allocate_descriptor_sets, got)})
    if (w) return w;
  return got;
}

// The application's loader, with vkGetDeviceProcAddr handing out counting
// versions of the calls that would mean an allocation, a submission or a wait.
VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL counting_gipa(VkInstance instance, const char* name) {
  PFN_vkVoidFunction got = real_gipa(instance, name);
  if (!std::strcmp(name, "vkGetDeviceProcAddr")) {
    real_gdpa = reinterpret_cast<PFN_vkGetDeviceProcAddr>(got);
    return reinterpret_cast<PFN_vkVoidFunction>(&counting_gdpa);
  }
  return got;
}

class ServingLoopCalls : public VkTest, public ::testing::WithParamInterface<std::pair<bool, bool>> {};

TEST_P(ServingLoopCalls, StepsAfterWarmUpAllocateSubmitAndWaitForNothing) {
  const auto [replay, push_descriptors] = GetParam();
  // The application's device (the fixture's), adopted by a Context whose
  // entry points come through the counting loader.
  detail::VkFunctions loader;
  loader.load_global(nullptr);
  real_gipa = loader.vkGetInstanceProcAddr;
  ContextOptions o = test_options();
  o.disable_push_descriptors = !push_descriptors;
  // The fixture's Context enabled every feature its device supports: the
  // adopted one may use the same (a forced matrix path needs them).
  const auto& impl = ctx().impl();
  detail::DeviceFeatureChain enabled;
  enabled.link(impl.has_extension(VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME),
               impl.has_extension(VK_NV_COOPERATIVE_MATRIX_2_EXTENSION_NAME),
               impl.has_extension(VK_KHR_SHADER_BFLOAT16_EXTENSION_NAME), false);
  impl.vk.vkGetPhysicalDeviceFeatures2(ctx().physical_device(), &enabled.core);
  AdoptInfo info{.instance = ctx().instance(), .physical_device = ctx().physical_device(), .device = ctx().device(),
                 .queue = ctx().queue(), .queue_family = ctx().queue_family(),
                 .enabled_device_extensions = impl.device_extensions, .enabled_features = &enabled.core,
                 .get_instance_proc_addr = &counting_gipa};
  Context adopted = Context::adopt(info, o);
  auto model = small_model(replay);
  model.random_values = false;
  model.steps = 20;
  tool::ServingLoop loop(adopted, model);
  auto reset = [] {
    counts.allocate_memory = counts.queue_submit = counts.wait_for_fences = counts.create_pipelines = 0;
    counts.create_buffer = counts.create_descriptor_pool = counts.allocate_descriptor_sets = 0;
  };
  // The loop's constructor warmed every pipeline up: the first step creates none.
  reset();
  loop.step();
  loop.finish();
  EXPECT_EQ(counts.create_pipelines, 0) << "a pipeline was created during the first step";
  if (!push_descriptors) adopted.release_recorded_descriptor_sets();
  reset();
  for (int i = 0; i < 15; ++i) {
    loop.step();
    loop.finish();
    // Without push descriptors, sets recorded into the engine's command
    // buffers are released once they completed; they come from the pools
    // made during warm-up.
    if (!push_descriptors) adopted.release_recorded_descriptor_sets();
  }
  EXPECT_EQ(counts.allocate_memory, 0);
  EXPECT_EQ(counts.create_buffer, 0);
  EXPECT_EQ(counts.queue_submit, 0);
  EXPECT_EQ(counts.wait_for_fences, 0);
  EXPECT_EQ(counts.create_pipelines, 0);
  EXPECT_EQ(counts.create_descriptor_pool, 0);
  if (push_descriptors || replay) EXPECT_EQ(counts.allocate_descriptor_sets, 0);
  for (const auto& m : adopted.validation_messages()) ADD_FAILURE() << "validation error: " << m;
}

INSTANTIATE_TEST_SUITE_P(Modes, ServingLoopCalls,
                         ::testing::Values(std::pair{false, true}, std::pair{true, true}, std::pair{false, false}),
                         [](const auto& info) {
                           return std::string(info.param.first ? "replay" : "planned") +
                                  (info.param.second ? "_push_descriptors" : "_descriptor_sets");
                         });

}  // namespace
}  // namespace vkattn::test
