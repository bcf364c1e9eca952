// `vkattn bench prefill`: paged attention (and prefix_prefill) for prefill and chunked prefill,
// where the work per byte is high and the matrix rate is the ceiling. TFLOP/s
// count only the (query, key) pairs that causal masking leaves, 4 * head_size
// FLOP each (Q K^T and P V). Each case is checked first against the float64
// reference on a smaller proxy of the same shape (params "verified_on").
#include <vkattn/vkattn.hpp>

#include <string>

#include "bench/suites.hpp"

namespace vkattn::tool {

std::vector<BenchOp> prefill_cases(Context& ctx, bool quick, const DecodeOptions& o) {
  std::vector<BenchOp> ops;
  auto shape = [&](uint32_t head_size) {
    return o.shape(quick ? AttentionShape{8, 2, head_size, o.block_size} : AttentionShape{32, 8, head_size, o.block_size});
  };
  DecodeOptions named = o;   // (names carry the head size already)
  named.head_size = 0;
  const std::string variant = named.name_suffix();
  const uint32_t n = quick ? 16 : 1;   // sizes divide by this on a CPU device
  // With --head-size every case runs at that size, and the cases that are
  // there for other head sizes are left out.
  auto add = [&](const std::string& name, uint32_t head_size, const SeqList& seqs, const SeqList& proxy, bool prefix = false) {
    if (o.head_size && head_size != 128) return;
    if (o.head_size) head_size = o.head_size;
    uint32_t ctx_max = 0, q_total = 0;
    for (auto [q, s] : seqs) {
      ctx_max = std::max(ctx_max, s - q);
      q_total += q;
    }
    AttentionShape sh = shape(head_size);
    sh.prefix_prefill = prefix;
    sh.says_decode_kernel = true;
    attention_case(ctx, ops, (prefix ? "prefix_prefill " : "") + name + " d" + std::to_string(head_size) + variant, seqs, sh, proxy,
                   {{"batch", std::to_string(seqs.size())}, {"ctx", std::to_string(ctx_max)}, {"query_len", std::to_string(q_total)}},
                   "compute");
  };
  add("B=1 q=" + std::to_string(8192 / n) + " causal", 128, {{8192 / n, 8192 / n}}, {{600 / n, 600 / n}});
  add("B=1 q=" + std::to_string(2048 / n), 128, {{2048 / n, 2048 / n}}, {{300 / n, 300 / n}});
  {
    SeqList seqs(4, {512 / n, (4096 + 512) / n});
    add("B=4 ctx=" + std::to_string(4096 / n) + " q=" + std::to_string(512 / n), 128, seqs, {{128 / n, 1000 / n}, {64 / n, 700 / n}});
  }
  {
    SeqList seqs(8, {1024 / n, 2048 / n});
    for (int i = 0; i < 64 / int(n); ++i) seqs.push_back({1, 2048 / n});
    add("B=8 q=" + std::to_string(1024 / n) + " ctx=" + std::to_string(1024 / n) + " + " + std::to_string(64 / n) + " decode", 128,
        seqs, {{200 / n, 400 / n}, {1, 500 / n}, {1, 300 / n}});
  }
  // Short chunks over a cached context, where the prefill kernel's 128-row
  // tiles are partly empty: where routing by rows pays.
  for (uint32_t q : {128u, 32u, 8u}) {
    const uint32_t B = 2048 / q / n, c = 2048 / n;
    add("B=" + std::to_string(B) + " ctx=" + std::to_string(c) + " q=" + std::to_string(q), 128, SeqList(B, {q, c + q}),
        {{q, 300 / n + q}, {q, 200 / n + q}});
  }
  // One chunk too short to give the prefill kernel a workgroup per SM
  // unsplit: the plan splits it into the few segments that do.
  for (auto [q, c] : {std::pair<uint32_t, uint32_t>{300, 700}, {140, 2000}}) {
    add("B=1 ctx=" + std::to_string(c / n) + " q=" + std::to_string(q / n), 128, {{q / n, (c + q) / n}},
        {{q / n, (c / 4 + q) / n}});
  }
  add("B=1 q=" + std::to_string(4096 / n) + " causal", 64, {{4096 / n, 4096 / n}}, {{400 / n, 400 / n}});
  add("B=1 q=" + std::to_string(4096 / n) + " causal", 256, {{4096 / n, 4096 / n}}, {{400 / n, 400 / n}});
  // prefix_prefill (the new tokens' K/V from their own tensors): the issue's
  // three shapes. Its sequences use the same kernels, in two segments.
  add("B=4 ctx=" + std::to_string(4096 / n) + " q=" + std::to_string(512 / n), 128, SeqList(4, {512 / n, (4096 + 512) / n}),
      {{128 / n, 1000 / n}, {64 / n, 700 / n}, {1, 300 / n}}, true);
  add("B=1 ctx=0 q=" + std::to_string(8192 / n), 128, {{8192 / n, 8192 / n}}, {{600 / n, 600 / n}}, true);
  add("B=" + std::to_string(16 / n) + " ctx=" + std::to_string(2048 / n) + " q=128", 128, SeqList(16 / n, {128, 2048 / n + 128}),
      {{128, 300 / n + 128}, {128, 200 / n + 128}}, true);
  return ops;
}

}  // namespace vkattn::tool
