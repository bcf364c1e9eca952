// Random valid batches, generated from a fixed seed rather than picked: tiny
// shapes of every kind the API allows (head sizes 16 to 64, GQA 1 to 8, block
// sizes 1 to 32 with and without powers of two, every layout and cache dtype,
// q f16/bf16, every output dtype, windows, softcap, sinks, ALiBi, qq_bias,
// LSE, split on/off/automatic, replay plans with spare tokens, strided q,
// padding sequences and sequences without new tokens), each run through
// tool::run_paged_attention: NaN-poisoned outputs, a guard region after out
// and lse that must stay untouched, NaN in every cache slot no sequence uses,
// and every output checked against the float64 reference.
//
// Every case is a distinct pipeline specialisation (compiling them is most of
// the time on lavapipe), so the cases are split over several tests.
#include <sstream>

#include "hostile_generator.hpp"
#include "runners/paged_attention_runner.hpp"
#include "vk_test.hpp"

namespace vkattn::test {
namespace {

using ref::Rng;

// Two cases per test: each compiles its own pipelines on lavapipe, slowly
// with a cold shader cache and more so on a loaded machine, and no test may
// take a minute there (four per test came close beside a CPU hog).
constexpr uint32_t kCasesPerGroup = 2, kGroups = 16;

tool::PagedAttentionCase random_case(Rng& r) {
  tool::PagedAttentionCase c;
  c.head_size = pick<uint32_t>(r, {16, 32, 64});
  c.num_kv_heads = 1 + r.below(3);
  c.num_q_heads = c.num_kv_heads * pick<uint32_t>(r, {1, 2, 3, 4, 5, 8});
  c.block_size = pick<uint32_t>(r, {1, 2, 3, 5, 7, 8, 13, 16, 17, 32});
  c.cache_dtype = pick(r, {DType::f16, DType::bf16, DType::fp8_e4m3, DType::fp8_e5m2});
  c.layout = pick(r, {KvLayout::nhd, KvLayout::hnd, KvLayout::split});
  c.q_dtype = pick(r, {DType::f16, DType::bf16});
  c.out_dtype = pick(r, {DType::f16, DType::bf16, DType::f32, DType::fp8_e4m3, DType::fp8_e5m2});
  const Lengths b = random_lengths(r, 1, 4, 8, 48);
  c.seqs.clear();
  for (uint32_t s = 0; s < b.num_seqs(); ++s) c.seqs.emplace_back(uint32_t(b.qsl[s + 1] - b.qsl[s]), uint32_t(b.lens[s]));
  if (r.below(3) == 0) c.sliding_window = 1 + int32_t(r.below(40));
  if (r.below(4) == 0) c.softcap = static_cast<float>(r.uniform(2, 30));
  c.alibi = r.below(4) == 0;
  c.sinks = r.below(4) == 0;
  c.qq_bias = r.below(4) == 0;
  if (c.qq_bias && r.below(2)) c.qq_bias_masked_rows = {r.below(4)};
  c.with_lse = r.below(2);
  c.split = pick(r, {SplitKv::automatic, SplitKv::off, SplitKv::on});
  if (c.split == SplitKv::on) c.num_segments = r.below(4);
  c.replay = r.below(3) == 0;
  if (c.replay) c.spare_tokens = r.below(4);
  if (r.below(4) == 0) c.q_token_padding = 1 + r.below(8);
  if (is_fp8(c.out_dtype)) c.out_scale = static_cast<float>(r.uniform(0.25, 4));
  c.runs = 1 + r.below(2);   // a second run of the same plan (split-KV reuses its workspace)
  c.seed = r.next();
  c.timing_repetitions = 0;
  return c;
}

std::string describe(const tool::PagedAttentionCase& c) {
  std::ostringstream o;
  o << "--seqs ";
  for (std::size_t i = 0; i < c.seqs.size(); ++i) o << (i ? "," : "") << c.seqs[i].first << ":" << c.seqs[i].second;
  o << " --q-heads " << c.num_q_heads << " --kv-heads " << c.num_kv_heads << " --head-size " << c.head_size << " --block-size "
    << c.block_size << " --cache-dtype " << dtype_name(c.cache_dtype) << " --layout " << layout_name(c.layout) << " --dtype "
    << dtype_name(c.q_dtype) << " --out-dtype " << dtype_name(c.out_dtype) << " --window " << c.sliding_window << " --softcap "
    << c.softcap << (c.alibi ? " --alibi" : "") << (c.sinks ? " --sinks" : "") << (c.qq_bias ? " --qq-bias" : "")
    << (c.with_lse ? " --lse" : "") << " --split "
    << (c.split == SplitKv::on ? "on" : c.split == SplitKv::off ? "off" : "auto") << " --segments " << c.num_segments
    << (c.replay ? " (replay, " + std::to_string(c.spare_tokens) + " spare tokens)" : "") << " q padding " << c.q_token_padding
    << " runs " << c.runs;
  return o.str();
}

// Parameter: which group of kCasesPerGroup consecutive cases (a value-
// parameterised sweep, so the sanitizer stage leaves it out: tests/sanitize_tests.cmake).
class HostileValidBatches : public VkTest, public ::testing::WithParamInterface<uint32_t> {};

TEST_P(HostileValidBatches, MatchTheReference) {
  const uint64_t first = 8'000'000 + uint64_t(GetParam()) * kCasesPerGroup;
  for (uint64_t seed = first; seed < first + kCasesPerGroup; ++seed) {
    Rng r = case_rng(seed);
    const tool::PagedAttentionCase c = random_case(r);
    try {
      const tool::RunResult res = tool::run_paged_attention(ctx(), c);
      EXPECT_TRUE(res.pass) << "case seed " << seed << ": " << describe(c) << "\n" << res.summary << "\n" << res.failure;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "case seed " << seed << ": " << describe(c) << "\nthrew: " << e.what();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Generated, HostileValidBatches, ::testing::Range(0u, kGroups),
                         [](const auto& info) { return "cases_" + std::to_string(info.param * kCasesPerGroup) + "_to_" +
                                                       std::to_string((info.param + 1) * kCasesPerGroup - 1); });

}  // namespace
}  // namespace vkattn::test
