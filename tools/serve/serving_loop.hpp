// A model-like serving loop that drives vkattn as an engine does, for
// `vkattn bench serve`, `vkattn run serve` and the tests.
//
// `layers` attention layers, each with its own paged KV cache (or, when the
// device's memory is short, a few caches the layers take in turn), and one
// block table for all of them. `batch` sequences decode over long contexts;
// on mixed steps one more sequence prefills a chunk of its prompt among them,
// and when its prompt is in, it replaces the oldest decoder, whose blocks go
// back to the allocator (continuous batching).
//
// Every step rewrites the batch's metadata (query_start_loc, seq_lens, block
// table, slot mapping) in mapped memory and records, for every layer,
// write_kv_cache then paged_attention into the loop's own command buffer,
// which it submits to the queue with its own fence, through its own Vulkan
// entry points (never vkattn's). Normal mode plans each step; replay mode
// records one command buffer per kind of step (decode, mixed) once, from
// plans made for limits, and submits it again every step.
#pragma once
#include <vkattn/vkattn.hpp>

#include <cstdint>
#include <memory>

#include "runners/op_runner.hpp"

namespace vkattn::tool {

struct ServeConfig {
  uint32_t layers = 32, num_q_heads = 32, num_kv_heads = 8, head_size = 128, block_size = 16;
  DType cache_dtype = DType::f16;
  uint32_t batch = 16;           // decoding sequences
  uint32_t context = 4096;       // their context when the loop starts, and the prompt of a new one
  uint32_t prefill_chunk = 0;    // tokens the prefilling sequence adds on a mixed step (0: no mixed steps)
  uint32_t mixed_every = 4;      // every n-th step is mixed, when prefill_chunk > 0
  uint32_t steps = 64;           // steps the sequences have room for
  bool replay = false;
  // Random cache contents and new inputs every step, so that a step can be
  // verified; otherwise constant fills (timing does not depend on values).
  bool random_values = false;
  // Fill the caches at all (host-only timing on a CPU device skips it).
  bool fill_caches = true;
  bool gpu_timing = true;        // timestamps around every step
  // Submit the steps. Without: every step is planned and recorded, then its
  // command buffer reset (host costs alone, e.g. of large batches on a CPU
  // device that would take minutes to run them).
  bool submit = true;
  uint64_t cache_budget_bytes = 0;   // 0: 70% of the device's memory
  uint64_t seed = 1;
};

struct StepTimes {
  double plan_us = 0;     // the step's plan (normal mode)
  double record_us = 0;   // recording every layer (normal mode)
  double host_us = 0;     // all host work of the step: metadata, plan, recording, submission
  uint32_t tokens = 0;
  bool mixed = false;
};

class ServingLoop {
 public:
  // Allocates everything, warms every pipeline the loop may need up
  // (prepare_paged_attention) and, in replay mode, records its command
  // buffers. `own_gipa`: where the loop loads its own Vulkan entry points
  // (null: libvulkan.so.1).
  ServingLoop(Context& ctx, const ServeConfig& config, PFN_vkGetInstanceProcAddr own_gipa = nullptr);
  ~ServingLoop();
  ServingLoop(const ServingLoop&) = delete;
  ServingLoop& operator=(const ServingLoop&) = delete;

  // Runs the next step: waits for the previous one, then updates, (records,)
  // submits. Throws when the sequences have no room left (config.steps).
  StepTimes step();
  // Waits for the last step; returns its GPU microseconds (0 without timestamps).
  double finish();
  // After finish(): checks the last step's attention of `layer` against the
  // float64 reference (reads the cache back; needs random_values and a queue).
  RunResult verify(uint32_t layer);
  // GPU microseconds of one layer's write_kv_cache + paged_attention of the
  // last step, recorded alone (a different layer each repetition, so that no
  // repetition finds another's data in the cache), median of `repetitions`.
  double layer_us(uint32_t repetitions);

  uint32_t num_caches() const;
  uint64_t kv_bytes_per_layer() const;   // K and V the last step's attention of one layer had to read

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace vkattn::tool
