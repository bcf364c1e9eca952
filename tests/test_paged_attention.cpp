// paged_attention against the float64 reference: varlen batches mixing decode
// and chunked prefill; GQA ratios; head sizes (80, 96, 112, 192: not powers of two); every
// cache layout and dtype (fp8 included); block sizes (48: not a power of two;
// 24: a 16-key tile straddles blocks);
// sliding window, softcap, ALiBi, sinks, qq_bias, LSE; q and out dtypes (fp8
// out included); caches of 32768 blocks with the used ones at the top;
// segmented (split-KV) against unsegmented; rows that see no key; bad input.
//
// The runner (tools/runners/paged_attention_runner.cpp) poisons the outputs and
// every unused cache slot with NaN, permutes the blocks, shares prefixes between
// sequences and fills unused block-table entries with out-of-range junk; its
// tolerance is explained there.
//
// Not here: "the shader never reads outside the cache, even when a table is
// changed after the host checked it" needs a device-side edit of the plan's
// table; test_paged_attention_safety.cpp covers it.
//
// On a CPU device (lavapipe) the cases keep head counts small; the full
// shapes run only on GPUs. Cold (no Mesa shader cache) lavapipe spends most of
// this file's time compiling pipelines: keep the number of distinct
// specialisations (head size, block size, dtypes, layout, features, and the
// row tile, which prefill rows make larger) small.
#include <cmath>
#include <cstring>
#include <limits>

#include "abi/paged_attention.h"
#include "attention_cases.hpp"
#include "device_batch.hpp"
#include "runners/paged_attention_runner.hpp"
#include "schedule/paged_attention_schedule.hpp"
#include "vk_test.hpp"

namespace vkattn::test {
namespace {

using tool::PagedAttentionCase;
using Seqs = std::vector<std::pair<uint32_t, uint32_t>>;

const Seqs kMixed = {{1, 1328}, {5, 18}, {129, 463}};   // decode, short prefill, long chunked prefill
const Seqs kDecode = {{1, 523}, {1, 37}, {1, 2011}};
// Prefill-heavy: causal prompts, chunks over a context, one decode row and a
// short chunk beside them (the prefill kernel on the matrix paths).
const Seqs kPrefill = {{300, 300}, {77, 1000}, {1, 613}, {130, 130}, {17, 40}};

bool on_cpu(Context& ctx) { return ctx.capabilities().device_type == "CPU"; }

PagedAttentionCase make(const Seqs& seqs, uint32_t hq, uint32_t hkv, uint32_t d, uint32_t bs, DType cache,
                        KvLayout layout, uint64_t seed) {
  return attention_case(seqs, hq, hkv, d, bs, cache, layout, seed);
}

// The prefill kernel whatever the batch's size (PrefillKernel::on).
PagedAttentionCase make_prefill(uint32_t hq, uint32_t hkv, uint32_t d, uint32_t bs, DType cache, KvLayout layout, uint64_t seed) {
  auto c = make(kPrefill, hq, hkv, d, bs, cache, layout, seed);
  c.prefill = PrefillKernel::on;
  return c;
}

struct Combo {
  std::string name;
  PagedAttentionCase c;
  bool gpu_only = false;
};

std::vector<Combo> combos() {
  std::vector<Combo> v;
  auto add = [&](std::string name, PagedAttentionCase c, bool gpu_only = false) {
    v.push_back({std::move(name), std::move(c), gpu_only});
  };
  // ---- mixed batches (prefill rows) ----
  {
    auto c = make(kMixed, 4, 4, 64, 16, DType::f16, KvLayout::nhd, 101);
    c.with_lse = true;
    c.qq_bias = true;
    c.softcap = 50;
    add("mixed_h4x4_d64_f16_nhd_bs16_qqbias_softcap_lse", c);
  }
  {
    // A softcap far above the logits: tanh's argument near 0, where its exp
    // form cancels (vka_tanh).
    auto c = make(kMixed, 4, 2, 64, 16, DType::f16, KvLayout::nhd, 107);
    c.softcap = 2e6f;
    add("mixed_h4x2_d64_f16_nhd_bs16_softcap2e6", c);
  }
  {
    auto c = make(kMixed, 8, 2, 80, 48, DType::fp8_e4m3, KvLayout::split, 102);
    c.out_dtype = DType::f32;
    c.alibi = true;
    c.sinks = true;
    c.with_lse = true;
    c.sliding_window = 256;
    c.k_scale = 0.02f;
    c.v_scale = 0.01f;
    add("mixed_h8x2_d80_e4m3_split_bs48_alibi_sinks_window256_outf32_lse", c);
  }
  {
    auto c = make(kMixed, 5, 1, 128, 128, DType::bf16, KvLayout::hnd, 103);
    c.q_dtype = DType::bf16;
    c.out_dtype = DType::bf16;
    c.sliding_window = 64;
    c.sinks = true;
    add("mixed_h5x1_d128_bf16_hnd_bs128_window64_sinks", c);
  }
  // ---- decode batches ----
  {
    auto c = make(kDecode, 32, 8, 128, 64, DType::fp8_e5m2, KvLayout::nhd, 201);
    c.sliding_window = 256;
    c.softcap = 50;
    add("decode_h32x8_d128_e5m2_nhd_bs64_window256_softcap", c);
  }
  {
    auto c = make(kDecode, 8, 2, 64, 32, DType::bf16, KvLayout::hnd, 202);
    c.q_dtype = DType::bf16;
    c.out_dtype = DType::bf16;
    c.sinks = true;
    c.with_lse = true;
    add("decode_h8x2_d64_bf16_hnd_bs32_sinks_lse", c);
  }
  {
    auto c = make(kDecode, 4, 4, 256, 16, DType::fp8_e4m3, KvLayout::nhd, 203);
    c.out_dtype = DType::fp8_e4m3;
    c.out_scale = 0.02f;
    add("decode_h4x4_d256_e4m3_nhd_bs16_out_e4m3", c);
  }
  {
    auto c = make(kDecode, 5, 1, 64, 16, DType::fp8_e4m3, KvLayout::split, 204);
    c.q_dtype = DType::bf16;
    c.out_dtype = DType::fp8_e5m2;
    c.out_scale = 0.05f;
    c.alibi = true;
    c.qq_bias = true;
    c.with_lse = true;
    c.q_token_padding = 24;    // q as a strided view
    c.out_token_padding = 3;   // and out, 3 fp8 bytes between rows (never written)
    add("decode_h5x1_d64_e4m3_split_bs16_qbf16_out_e5m2_alibi_qqbias_lse_outpad3", c);
  }
  {
    // 32768 blocks, the used ones at the top: block * block bytes past 2^26.
    auto c = make(kDecode, 5, 1, 64, 16, DType::f16, KvLayout::nhd, 205);
    c.num_blocks = 32768;
    add("decode_h5x1_d64_f16_nhd_bs16_32768_blocks", c);
  }
  // ---- the full shapes: GPUs only ----
  {
    auto c = make(kMixed, 32, 8, 128, 16, DType::f16, KvLayout::nhd, 301);
    c.with_lse = true;
    add("gpu_mixed_h32x8_d128_f16_nhd_bs16_lse", c, true);
  }
  {
    auto c = make(kMixed, 32, 8, 256, 32, DType::fp8_e4m3, KvLayout::hnd, 302);
    c.out_dtype = DType::bf16;
    c.sinks = true;
    c.alibi = true;
    c.sliding_window = 256;
    add("gpu_mixed_h32x8_d256_e4m3_hnd_bs32_sinks_alibi_window256", c, true);
  }
  {
    auto c = make(kMixed, 32, 8, 128, 16, DType::f16, KvLayout::split, 303);
    c.q_dtype = DType::f16;
    c.out_dtype = DType::fp8_e4m3;
    c.out_scale = 0.01f;
    c.qq_bias = true;
    c.softcap = 50;
    c.with_lse = true;
    add("gpu_mixed_h32x8_d128_f16_split_bs16_out_e4m3_qqbias_softcap_lse", c, true);
  }
  {
    // Head size 256 with a 16-bit cache: the decode kernel stages half the
    // head at a time (HEAD_HALVES); more items than an H200 has SMs (2
    // workgroups of 4 per SM), blocks of 48 (tiles across blocks).
    Seqs seqs;
    for (uint32_t i = 0; i < 20; ++i) seqs.push_back({1, 100 + (i * 397) % 1900});
    auto c = make(seqs, 16, 8, 256, 48, DType::f16, KvLayout::nhd, 306);
    c.sliding_window = 700;
    c.softcap = 30;
    c.sinks = true;
    add("gpu_decode_h16x8_d256_f16_nhd_bs48_window700_softcap_sinks", c, true);
    // The same staging of half the head for bf16 q and cache, and for fp8
    // (STAGE_HALVES, as at head size 128).
    auto b = make(seqs, 16, 8, 256, 16, DType::bf16, KvLayout::hnd, 308);
    b.q_dtype = DType::bf16;
    b.out_dtype = DType::bf16;
    b.with_lse = true;
    add("gpu_decode_h16x8_d256_bf16_hnd_bs16_lse", b, true);
    auto e = make(seqs, 16, 8, 256, 32, DType::fp8_e5m2, KvLayout::nhd, 309);
    e.alibi = true;
    e.sliding_window = 500;
    add("gpu_decode_h16x8_d256_e5m2_nhd_bs32_alibi_window500", e, true);
  }
  {
    // Speculative decoding's rows over more items than an H200 has SMs: 4
    // tokens per sequence at GQA 4 (16-row tiles), and 2 tokens at GQA 8 in
    // bf16.
    Seqs seqs;
    for (uint32_t i = 0; i < 20; ++i) seqs.push_back({4, 90 + (i * 211) % 1500});
    auto c = make(seqs, 32, 8, 128, 16, DType::f16, KvLayout::nhd, 310);
    c.sliding_window = 400;
    c.qq_bias = true;
    add("gpu_spec_decode_h32x8_d128_f16_nhd_bs16_q4_window400_qqbias", c, true);
    for (auto& s : seqs) s.first = 2;
    auto b = make(seqs, 64, 8, 128, 32, DType::bf16, KvLayout::hnd, 311);
    b.q_dtype = DType::bf16;
    b.out_dtype = DType::bf16;
    b.sinks = true;
    b.with_lse = true;
    add("gpu_spec_decode_h64x8_d128_bf16_hnd_bs32_q2_sinks_lse", b, true);
  }
  {
    auto c = make(kDecode, 8, 4, 256, 16, DType::bf16, KvLayout::hnd, 307);
    c.q_dtype = DType::bf16;
    c.out_dtype = DType::bf16;
    c.alibi = true;
    c.with_lse = true;
    add("decode_h8x4_d256_bf16_hnd_bs16_alibi_lse", c);
  }
  {
    // 32768 blocks of 16 x 8 heads x 256 f16: 2 GiB per cache part, byte
    // offsets past 2^31.
    auto c = make(kDecode, 32, 8, 256, 16, DType::f16, KvLayout::nhd, 304);
    c.num_blocks = 32768;
    c.with_lse = true;
    add("gpu_decode_h32x8_d256_f16_nhd_bs16_32768_blocks", c, true);
  }
  {
    auto c = make(kDecode, 32, 8, 128, 16, DType::bf16, KvLayout::hnd, 305);
    c.q_dtype = DType::bf16;
    c.out_dtype = DType::f32;
    c.sinks = true;
    c.alibi = true;
    add("gpu_decode_h32x8_d128_bf16_hnd_bs16_sinks_alibi", c, true);
  }
  // The matrix kernel's other branches (paged_attention_subgroup.comp): head
  // sizes 96/112/192 (192: no register prefetch), block sizes that are not
  // multiples of 16 (a 16-key tile straddles blocks), 8-row decode tiles with
  // split-KV.
  {
    auto c = make(kDecode, 16, 2, 96, 24, DType::f16, KvLayout::nhd, 306);
    c.sliding_window = 64;
    c.split = SplitKv::on;
    c.num_segments = 5;
    add("gpu_decode_h16x2_d96_f16_nhd_bs24_window64_split5", c, true);
  }
  {
    auto c = make(kMixed, 6, 2, 112, 32, DType::fp8_e5m2, KvLayout::hnd, 307);
    c.alibi = true;
    c.qq_bias = true;
    c.with_lse = true;
    add("gpu_mixed_h6x2_d112_e5m2_hnd_bs32_alibi_qqbias_lse", c, true);
  }
  {
    auto c = make(kDecode, 16, 2, 192, 16, DType::fp8_e4m3, KvLayout::split, 308);
    c.sinks = true;
    c.softcap = 50;
    c.out_dtype = DType::f32;
    add("gpu_decode_h16x2_d192_e4m3_split_bs16_sinks_softcap", c, true);
  }
  // fp8 rows whose 16-value pieces the decode kernel stages in halves apart
  // (HALVES, head size >= 128), at head sizes of 10 and 12 pieces per row,
  // not a power of two: Q's and O's dims follow the same order.
  {
    auto c = make(kDecode, 8, 2, 160, 16, DType::fp8_e4m3, KvLayout::nhd, 313);
    c.split = SplitKv::on;
    c.num_segments = 3;
    c.with_lse = true;
    add("gpu_decode_h8x2_d160_e4m3_nhd_bs16_split3_lse", c, true);
  }
  {
    auto c = make(kDecode, 10, 2, 192, 32, DType::fp8_e5m2, KvLayout::hnd, 314);
    c.q_dtype = DType::bf16;
    c.out_dtype = DType::bf16;
    c.sinks = true;
    add("gpu_decode_h10x2_d192_e5m2_hnd_bs32_bf16_sinks", c, true);
  }
  // Batches of more work items than a GPU has SMs, where the decode kernel
  // takes workgroups of 4 subgroups and, for fp8 at head size 128 with f16
  // q, stages half a tile at a time (PA_STAGE_HALVES): decode rows, and rows
  // of a few tokens, whose partly seen tiles stage non-finite V values as 0.
  {
    Seqs many;
    for (uint32_t i = 0; i < 40; ++i) many.push_back({1, 40 + (i * 337) % 1900});
    auto c = make(many, 32, 8, 128, 16, DType::fp8_e4m3, KvLayout::nhd, 315);
    c.sinks = true;
    c.with_lse = true;
    add("gpu_decode_b40_h32x8_d128_e4m3_nhd_bs16_sinks_lse", c, true);
  }
  {
    Seqs many;
    for (uint32_t i = 0; i < 40; ++i) many.push_back({1 + i % 3, 60 + (i * 211) % 1500});
    auto c = make(many, 32, 8, 128, 32, DType::fp8_e5m2, KvLayout::hnd, 316);
    c.sliding_window = 300;
    c.split = SplitKv::on;
    c.num_segments = 2;
    add("gpu_mixed_b40_h32x8_d128_e5m2_hnd_bs32_window300_split2", c, true);
  }
  {
    Seqs many;
    for (uint32_t i = 0; i < 40; ++i) many.push_back({1, 30 + (i * 173) % 1700});
    auto c = make(many, 32, 8, 128, 16, DType::fp8_e5m2, KvLayout::nhd, 317);
    c.q_dtype = DType::bf16;
    c.out_dtype = DType::bf16;
    c.softcap = 30;
    add("gpu_decode_b40_h32x8_d128_e5m2_nhd_bs16_qbf16_softcap", c, true);
  }
  // More sequences than a workgroup has invocations, most of several q tiles:
  // each item finds its sequence among 300 (pa_find_seq), on every kernel
  // (PrefillKernel::on sends the longer chunks to the prefill kernel on the
  // matrix paths).
  {
    Seqs many;
    for (uint32_t i = 0; i < 300; ++i) {
      const uint32_t q = i % 10 == 0 ? 70 : 1 + (i * 7) % 40;
      many.push_back({q, q + (i * 53) % 200});
    }
    auto c = make(many, 4, 2, 64, 16, DType::f16, KvLayout::nhd, 318);
    c.prefill = PrefillKernel::on;
    c.with_lse = true;
    add("mixed_b300_h4x2_d64_f16_nhd_bs16_prefill_on_lse", c);
  }
  // The split layout's V, staged transposed by the decode kernel (8 keys of
  // a head dim per load): keys outside a segment or the window masked inside
  // a load, fp8 bytes and 16-bit elements, 8- and 16-row tiles.
  {
    auto c = make(kDecode, 8, 2, 128, 32, DType::f16, KvLayout::split, 310);
    c.sliding_window = 77;
    c.split = SplitKv::on;
    c.num_segments = 3;
    add("gpu_decode_h8x2_d128_f16_split_bs32_window77_split3", c, true);
  }
  {
    auto c = make(kDecode, 8, 2, 64, 16, DType::fp8_e5m2, KvLayout::split, 311);
    c.sliding_window = 45;
    c.split = SplitKv::on;
    c.num_segments = 4;
    c.with_lse = true;
    add("gpu_decode_h8x2_d64_e5m2_split_bs16_window45_split4_lse", c, true);
  }
  {
    auto c = make(kDecode, 8, 2, 128, 16, DType::bf16, KvLayout::split, 312);
    c.q_dtype = DType::bf16;
    c.split = SplitKv::on;
    c.num_segments = 7;
    add("gpu_decode_h8x2_d128_bf16_split_bs16_split7", c, true);
  }
  {
    // 64 decode sequences of 200..499 keys: 512 work items, which the plan
    // runs unsplit in workgroups of 4 subgroups on a GPU of <= 256 SMs
    // (detail::matrix_subgroups, detail::automatic_segments).
    Seqs many;
    for (uint32_t i = 0; i < 64; ++i) many.push_back({1, 200 + (i * 37) % 300});
    auto c = make(many, 32, 8, 128, 16, DType::f16, KvLayout::nhd, 309);
    c.with_lse = true;
    add("gpu_decode_h32x8_d128_f16_nhd_bs16_64seqs", c, true);
    // bf16: 16-column tiles for 4 rows, unpacked there (more items than SMs),
    // so each O^T slice's rows reach the merge by a clipped tensor store on
    // coopmat2 and through a scratch on KHR coopmat.
    c.cache_dtype = DType::bf16;
    c.q_dtype = DType::bf16;
    add("gpu_decode_h32x8_d128_bf16_nhd_bs16_64seqs", c, true);
  }
  {
    // 6 decode sequences of 2048..2559 keys, 8 kv heads: 48 work items,
    // which a GPU of 96..143 SMs splits automatically into 2 segments of
    // 8-subgroup workgroups (an H200; detail::automatic_segments).
    Seqs many;
    for (uint32_t i = 0; i < 6; ++i) many.push_back({1, 2048 + (i * 101) % 512});
    auto c = make(many, 8, 8, 128, 16, DType::f16, KvLayout::nhd, 310);
    add("gpu_decode_h8x8_d128_f16_nhd_bs16_6seqs_autosplit", c, true);
  }
  // The prefill kernel (paged_prefill.comp): head sizes 64, 80, 128, 256 (pairs
  // of subgroups sharing each 16 rows, PP_HEAD_PARTS); block sizes 16, 48, 128;
  // GQA 1, 4, 5; every option.
  {
    auto c = make_prefill(32, 8, 128, 16, DType::f16, KvLayout::nhd, 401);
    c.with_lse = true;
    add("gpu_prefill_h32x8_d128_f16_nhd_bs16_lse", c, true);
  }
  {
    auto c = make_prefill(8, 8, 64, 48, DType::bf16, KvLayout::hnd, 402);
    c.q_dtype = DType::bf16;
    c.out_dtype = DType::bf16;
    c.sliding_window = 100;
    c.sinks = true;
    c.q_token_padding = 3;     // q's rows not on 16-byte words: Q staged by 2-byte loads
    c.out_token_padding = 5;   // and out's: its results stored an element at a time
    add("gpu_prefill_h8x8_d64_bf16_hnd_bs48_window100_sinks_qpad3_outpad5", c, true);
  }
  {
    auto c = make_prefill(10, 2, 80, 128, DType::fp8_e4m3, KvLayout::nhd, 403);
    c.alibi = true;
    c.softcap = 30;
    c.with_lse = true;
    c.k_scale = 0.02f;
    c.v_scale = 0.01f;
    add("gpu_prefill_h10x2_d80_e4m3_nhd_bs128_alibi_softcap_lse", c, true);
  }
  {
    // Head size 256: each subgroup holds half of Q and O, the pair adds its
    // partial S through shared memory.
    auto c = make_prefill(16, 4, 256, 16, DType::f16, KvLayout::split, 404);
    c.q_token_padding = 8;     // a strided q whose rows are still on 16-byte words
    c.out_token_padding = 8;   // and out (f32: two 16-byte stores per 8 dims)
    c.qq_bias = true;
    c.sinks = true;
    c.sliding_window = 64;
    c.out_dtype = DType::f32;
    add("gpu_prefill_h16x4_d256_f16_split_bs16_qpad8_outpad8_qqbias_sinks_window64", c, true);
  }
  {
    auto c = make_prefill(10, 2, 256, 48, DType::fp8_e4m3, KvLayout::nhd, 407);
    c.q_dtype = DType::bf16;
    c.out_dtype = DType::bf16;
    c.alibi = true;
    c.softcap = 25;
    c.with_lse = true;
    c.k_scale = 0.03f;
    c.v_scale = 0.02f;
    add("gpu_prefill_h10x2_d256_e4m3_nhd_bs48_qbf16_alibi_softcap_lse", c, true);
  }
  {
    auto c = make_prefill(8, 8, 256, 128, DType::bf16, KvLayout::hnd, 408);
    c.q_dtype = DType::bf16;
    c.split = SplitKv::on;
    c.num_segments = 3;
    c.sliding_window = 200;
    c.with_lse = true;
    add("gpu_prefill_h8x8_d256_bf16_hnd_bs128_split3_window200_lse", c, true);
  }
  {
    // Pairs with 5 head slices each (head size 160); head size 240 (15
    // slices, which pairs cannot split evenly) keeps the decode kernel.
    auto c = make_prefill(10, 2, 160, 16, DType::f16, KvLayout::nhd, 409);
    c.sinks = true;
    c.with_lse = true;
    add("gpu_prefill_h10x2_d160_f16_nhd_bs16_sinks_lse", c, true);
    c = make_prefill(4, 2, 240, 32, DType::f16, KvLayout::nhd, 410);
    c.softcap = 20;
    add("gpu_prefill_h4x2_d240_f16_nhd_bs32_softcap", c, true);
  }
  {
    auto c = make_prefill(8, 2, 128, 48, DType::fp8_e5m2, KvLayout::hnd, 405);
    c.split = SplitKv::on;
    c.num_segments = 5;
    c.with_lse = true;
    add("gpu_prefill_h8x2_d128_e5m2_hnd_bs48_split5_lse", c, true);
  }
  {
    auto c = make_prefill(5, 1, 128, 16, DType::fp8_e4m3, KvLayout::nhd, 406);
    c.q_dtype = DType::bf16;
    c.out_dtype = DType::fp8_e4m3;
    c.out_scale = 0.02f;
    add("gpu_prefill_h5x1_d128_e4m3_nhd_bs16_qbf16_out_e4m3", c, true);
  }
  return v;
}

// gtest prints parameters in failure messages: the name, not the bytes.
void PrintTo(const Combo& c, std::ostream* os) { *os << c.name; }

class PagedAttentionCombos : public VkTest, public ::testing::WithParamInterface<Combo> {};

TEST_P(PagedAttentionCombos, MatchesReference) {
  const Combo& p = GetParam();
  if (p.gpu_only && on_cpu(ctx())) GTEST_SKIP() << "full-size shape: GPUs only";
  auto r = tool::run_paged_attention(ctx(), p.c);
  EXPECT_TRUE(r.pass) << r.summary << "\n" << r.failure << "\ntolerance: " << r.tolerance;
}

INSTANTIATE_TEST_SUITE_P(Shapes, PagedAttentionCombos, ::testing::ValuesIn(combos()),
                         [](const auto& info) { return info.param.name; });

// A cache of more chunks than the kernels hold bases of in shared memory
// (PA_SHARED_CHUNKS): keys in the further chunks take their chunk's base from
// the table in memory. Small chunks force it on any device; a decode split
// into segments and a prompt on the prefill kernel (matrix paths) both read
// keys there. Chunks of 3 blocks, not a power of two, so that the kernels'
// chunk division by a multiplier (abi/kv_chunk_division.h) is exercised
// where a shift alone would not do.
TEST(PagedAttentionChunks, KeysPastTheSharedChunkTableReadTheTableInMemory) {
  auto opts = test_options();
  opts.max_chunk_bytes = 3 * 16 * 2 * 64 * 2 + 100;   // 3 blocks of 16 tokens, 2 heads x 64, f16
  Context ctx(opts);
  auto c = make({{1, 1328}, {160, 463}, {1, 37}}, 4, 2, 64, 16, DType::f16, KvLayout::nhd, 431);
  c.prefill = PrefillKernel::on;
  c.split = SplitKv::on;
  c.num_segments = 3;
  {
    const PagedKvCache probe(ctx, KvCacheConfig{.num_blocks = 114, .block_size = 16, .num_kv_heads = 2, .head_size = 64});
    ASSERT_EQ(probe.blocks_per_chunk(), 3u);
    ASSERT_GT(probe.num_chunks(), PA_SHARED_CHUNKS * 2u);
  }
  auto r = tool::run_paged_attention(ctx, c);
  EXPECT_TRUE(r.pass) << r.summary << "\n" << r.failure << "\ntolerance: " << r.tolerance;
  for (const auto& m : ctx.validation_messages()) ADD_FAILURE() << m;
}

// PrefillKernel::automatic (the default) on a batch whose long sequences fill
// a GPU of up to 320 multiprocessors: 20 sequences of 40 tokens (160 rows,
// two 128-row tiles each, 8 kv heads) go to the prefill kernel on a matrix
// path, and where the softmax goes through shared memory (the KHR module
// without the element order: 64-row tiles) the 6 sequences of 20 tokens (80
// rows) with them; elsewhere those stay on the decode kernel (several
// 16-row decode tiles each), as the decode rows do on every path, in the
// same call. The scalar path keeps every sequence on the decode kernel.
class PagedAttentionAutomaticRouting : public VkTest {};
TEST_F(PagedAttentionAutomaticRouting, LongSequencesGoToThePrefillKernelOnAMatrixPath) {
  if (on_cpu(ctx())) GTEST_SKIP() << "full-size batch: GPUs only";
  Seqs seqs;
  for (uint32_t i = 0; i < 20; ++i) seqs.push_back({40, 40 + (i * 53) % 400});
  for (uint32_t i = 0; i < 6; ++i) seqs.push_back({20, 20 + (i * 71) % 300});
  for (uint32_t i = 0; i < 6; ++i) seqs.push_back({1, 100 + i * 97});
  auto c = make(seqs, 32, 8, 128, 16, DType::f16, KvLayout::nhd, 411);
  c.sliding_window = 200;
  c.with_lse = true;
  ASSERT_EQ(c.prefill, PrefillKernel::automatic);
  auto r = tool::run_paged_attention(ctx(), c);
  EXPECT_TRUE(r.pass) << r.summary << "\n" << r.failure << "\ntolerance: " << r.tolerance;
  const bool routes = ctx().path_for("paged_prefill") != Path::scalar;
  const bool routed = r.summary.find("prefill kernel for >= 128 rows") != std::string::npos ||
                      r.summary.find("prefill kernel for >= 64 rows") != std::string::npos;
  EXPECT_EQ(routed, routes) << r.summary;
}

// Pipelines are made before the first step: after prepare_paged_attention
// for the layer's shape and variant, runs of every kind of batch (decode,
// mixed, the prefill kernel asked for, split, and on a GPU a batch that
// automatic routes to the prefill kernel) create none.
TEST_F(PagedAttentionAutomaticRouting, PrepareMakesEveryPipelineARunNeeds) {
  // The GPU takes a serving shape; the CPU device a smaller one of the same
  // kinds of run (its scalar kernel and the float64 reference took most of a
  // minute at 32 x 128 under a loaded CI machine).
  const bool cpu = on_cpu(ctx());
  const uint32_t hq = cpu ? 8 : 32, hkv = cpu ? 2 : 8, d = cpu ? 64 : 128;
  const KvCacheConfig cfg{.num_blocks = 64, .block_size = 16, .num_kv_heads = hkv, .head_size = d};
  PagedAttentionVariant variant;
  variant.sliding_window = true;
  variant.lse = true;
  prepare_paged_attention(ctx(), cfg, hq, DType::f16, std::span<const PagedAttentionVariant>(&variant, 1));
  const size_t prepared = ctx().pipelines_created();
  std::vector<PagedAttentionCase> cases = {make(kDecode, hq, hkv, d, 16, DType::f16, KvLayout::nhd, 421),
                                           make(kMixed, hq, hkv, d, 16, DType::f16, KvLayout::nhd, 422)};
  cases.push_back(cases[1]);
  cases.back().prefill = PrefillKernel::on;
  cases.push_back(cases[0]);
  cases.back().split = SplitKv::on;
  cases.back().num_segments = 3;
  if (!cpu) {
    Seqs seqs;
    for (uint32_t i = 0; i < 20; ++i) seqs.push_back({40, 40 + (i * 53) % 400});
    for (uint32_t i = 0; i < 6; ++i) seqs.push_back({1, 100 + i * 97});
    cases.push_back(make(seqs, hq, hkv, d, 16, DType::f16, KvLayout::nhd, 423));
  }
  for (auto& c : cases) {
    c.sliding_window = 200;
    c.with_lse = true;
    auto r = tool::run_paged_attention(ctx(), c);
    EXPECT_TRUE(r.pass) << r.summary << "\n" << r.failure;
    EXPECT_EQ(ctx().pipelines_created(), prepared) << "a run created a pipeline: " << r.summary;
  }
}

// The same for an fp8 cache, whose batches of more items than SMs may stage
// half a tile at a time (Schedule::stage_halves, PA_STAGE_HALVES): prepare
// makes those pipelines too.
TEST_F(PagedAttentionAutomaticRouting, PrepareMakesTheHalfStagingPipelines) {
  if (on_cpu(ctx())) GTEST_SKIP() << "needs a matrix path and more work items than a GPU has SMs";
  const KvCacheConfig cfg{.num_blocks = 64, .block_size = 16, .num_kv_heads = 8, .head_size = 128, .dtype = DType::fp8_e4m3};
  PagedAttentionVariant variant;
  prepare_paged_attention(ctx(), cfg, 32, DType::f16, std::span<const PagedAttentionVariant>(&variant, 1));
  const size_t prepared = ctx().pipelines_created();
  Seqs many;
  std::vector<int64_t> item_keys;   // 8 work items (kv heads) per sequence
  for (uint32_t i = 0; i < 40; ++i) {
    many.push_back({1, 40 + (i * 337) % 900});
    item_keys.insert(item_keys.end(), 8, many.back().second);
  }
  auto r = tool::run_paged_attention(ctx(), make(many, 32, 8, 128, 16, DType::fp8_e4m3, KvLayout::nhd, 424));
  EXPECT_TRUE(r.pass) << r.summary << "\n" << r.failure;
  EXPECT_EQ(ctx().pipelines_created(), prepared) << "a run created a pipeline: " << r.summary;
  // (On an H200's 132 SMs it does; a GPU of many more SMs may not.)
  const bool halves = detail::half_staging_pays(ctx().path_for("paged_attention"),
                                                ctx().capabilities().scheduling_multiprocessors, item_keys,
                                                detail::half_staging_wave(DType::f16));
  EXPECT_EQ(r.summary.find("staging half tiles") != std::string::npos, halves) << r.summary;
}

// ---- segmented (split-KV) vs unsegmented ----

struct SplitCase {
  std::string name;
  PagedAttentionCase c;
};

void PrintTo(const SplitCase& c, std::ostream* os) { *os << c.name; }

class PagedAttentionSegments : public VkTest, public ::testing::WithParamInterface<SplitCase> {};

TEST_P(PagedAttentionSegments, AgreeWithUnsegmented) {
  PagedAttentionCase c = GetParam().c;
  c.split = SplitKv::off;
  tool::PagedAttentionOutputs base;
  auto r = tool::run_paged_attention(ctx(), c, &base);
  ASSERT_TRUE(r.pass) << r.summary << "\n" << r.failure;
  ASSERT_FALSE(base.split);
  // Both runs round P (and their outputs) independently, so they can differ by
  // about what either differs from the reference in P rounding: allow 2 u_c of
  // the row's size (a third of the reference tolerance) plus two output
  // roundings; LSE only by f32 arithmetic and the combine step.
  const bool bf16 = c.q_dtype == DType::bf16 || c.cache_dtype == DType::bf16;
  const double uc = bf16 ? 0x1p-8 : 0x1p-11;
  const double u_out = c.out_dtype == DType::f16 ? 0x1p-11 : c.out_dtype == DType::bf16 ? 0x1p-8 : 0x1p-24;
  const uint32_t D = c.head_size;
  for (uint32_t segments : {0u, 2u, 3u, 7u, 64u}) {
    c.split = SplitKv::on;
    c.num_segments = segments;
    c.runs = 2;   // a plan runs again: the second run (its partial results reused) must be right too
    tool::PagedAttentionOutputs got;
    auto rs = tool::run_paged_attention(ctx(), c, &got);
    EXPECT_TRUE(rs.pass) << "num_segments " << segments << ": " << rs.summary << "\n" << rs.failure;
    EXPECT_TRUE(got.split);
    if (segments) EXPECT_EQ(got.num_segments, segments);
    ASSERT_EQ(got.out.size(), base.out.size());
    int reported = 0;
    for (size_t row = 0; row * D < got.out.size(); ++row) {
      double maxabs = 0;
      for (uint32_t d = 0; d < D; ++d) maxabs = std::max(maxabs, std::fabs(base.ref_out[row * D + d]));
      for (uint32_t d = 0; d < D; ++d) {
        const size_t i = row * D + d;
        const double allowed = 2 * uc * maxabs + 2 * u_out * std::fabs(base.ref_out[i]) + 1e-30;
        if (!(std::fabs(got.out[i] - base.out[i]) <= allowed) && reported++ < 5)
          ADD_FAILURE() << "num_segments " << segments << " (" << got.num_segments << " used), row " << row << " dim "
                        << d << ": segmented " << got.out[i] << ", unsegmented " << base.out[i] << ", allowed "
                        << allowed;
      }
      if (!got.lse.empty()) {
        const double a = got.lse[row], b = base.lse[row];
        if (!(a == b || std::fabs(a - b) <= uc + 1e-6 * std::fabs(b)) && reported++ < 5)
          ADD_FAILURE() << "num_segments " << segments << ", row " << row << ": lse segmented " << a
                        << ", unsegmented " << b;
      }
    }
  }
}

// Split runs whose last segment of each item merges the item
// (PA_FLAG_MERGE_LAST: decode-kernel items) in the engine's workspace, every
// word random before each run but the arrival counters, which are 0 as the
// header asks; recorded anew each run, or one command buffer submitted again
// (a replay), where each run must leave the counters 0 for the next. The last
// of 3 runs is checked against the float64 reference (the outputs poisoned
// before each).
TEST_P(PagedAttentionSegments, MergedByTheLastSegmentInTheEnginesWorkspace) {
  for (bool resubmit : {false, true}) {
    for (uint32_t segments : {2u, 7u, 64u}) {
      PagedAttentionCase c = GetParam().c;
      c.split = SplitKv::on;
      c.num_segments = segments;
      c.runs = 3;
      c.garbage_workspace = true;
      c.resubmit = resubmit;
      // Views 0, 2 and 3 floats into their buffers: the partial results then
      // start 0, 2 and 1 floats past the counters (abi/paged_attention.h),
      // and nothing is written past the view's end (the runner checks).
      c.workspace_offset_words = segments % 4u;
      tool::PagedAttentionOutputs got;
      auto r = tool::run_paged_attention(ctx(), c, &got);
      EXPECT_TRUE(r.pass) << (resubmit ? "resubmitted, " : "recorded, ") << segments << " segments: " << r.summary << "\n"
                          << r.failure;
      EXPECT_TRUE(got.merge_last) << r.summary;
    }
  }
}

// Counters that are not 0 (a workspace not cleared before its first split
// run, or written by something else): the segments report it rather than
// merge from a count they cannot trust.
TEST_P(PagedAttentionSegments, CountersThatAreNotZeroAreReported) {
  PagedAttentionCase c = GetParam().c;
  c.split = SplitKv::on;
  c.num_segments = 5;
  c.garbage_workspace = true;
  c.junk_counters = true;
  EXPECT_VKATTN_ERROR(tool::run_paged_attention(ctx(), c), "arrival counter of work item",
                      "must be zero before its first split run");
}

std::vector<SplitCase> split_cases() {
  std::vector<SplitCase> v;
  {
    // Decode over long contexts: the case split-KV exists for. Same
    // specialisation as decode_h8x2_d64_bf16_hnd_bs32_sinks_lse above.
    auto c = make(kDecode, 8, 2, 64, 32, DType::bf16, KvLayout::hnd, 401);
    c.q_dtype = DType::bf16;
    c.out_dtype = DType::bf16;
    c.sinks = true;
    c.with_lse = true;
    v.push_back({"decode_bf16_sinks_lse", c});
  }
  {
    // Prefill rows too, with a window (segments that end up empty) and the
    // sink (segment 0 only).
    auto c = make({{1, 1328}, {5, 18}, {33, 463}}, 4, 4, 64, 16, DType::f16, KvLayout::nhd, 402);
    c.with_lse = true;
    c.sinks = true;
    c.sliding_window = 300;
    v.push_back({"mixed_f16_window_sinks_lse", c});
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(SplitKv, PagedAttentionSegments, ::testing::ValuesIn(split_cases()),
                         [](const auto& info) { return info.param.name; });

// ---- rows that see no key ----

class PagedAttentionEmpty : public VkTest {};

PagedAttentionCase empty_base(uint64_t seed) {
  // GQA 1 and few new tokens per sequence keep the row tile (and the compile) small.
  auto c = make({}, 4, 4, 64, 16, DType::f16, KvLayout::nhd, seed);
  c.with_lse = true;
  return c;
}

TEST_F(PagedAttentionEmpty, SequenceOfLengthZeroWithNoQueries) {
  // (0, 0): no rows at all, no blocks; neighbours unaffected.
  for (bool sinks : {false, true}) {
    auto c = empty_base(501);
    c.seqs = {{0, 0}, {3, 40}, {0, 0}, {0, 17}, {1, 9}};
    c.sinks = sinks;
    auto r = tool::run_paged_attention(ctx(), c);
    EXPECT_TRUE(r.pass) << r.summary << "\n" << r.failure;
  }
}

TEST_F(PagedAttentionEmpty, PaddingSequenceGivesZero) {
  // seq_len 0 with query tokens (seed 003's padding): out exactly 0, lse -inf
  // (or the sink); split and unsplit.
  for (auto [split, sinks] : {std::pair{SplitKv::off, false}, std::pair{SplitKv::on, true}}) {
      auto c = empty_base(502);
      c.seqs = {{1, 0}, {3, 40}, {2, 0}, {1, 300}};
      c.sinks = sinks;
      c.split = split;
      c.num_segments = split == SplitKv::on ? 3 : 0;
      auto r = tool::run_paged_attention(ctx(), c);
      EXPECT_TRUE(r.pass) << r.summary << "\n" << r.failure;
    }
}

TEST_F(PagedAttentionEmpty, RowWithEveryKeyMaskedGivesZero) {
  // Sequence 0 has no context (seq_len == query_len), so every key it sees is
  // a new token under qq_bias: rows 1 and 2 of qq_bias are -inf, which masks
  // every key of its tokens 1 and 2. Sequence 1 (context 6) still sees its
  // context keys in those rows.
  for (auto [split, sinks] : {std::pair{SplitKv::off, true}, std::pair{SplitKv::on, false}}) {
      auto c = empty_base(503);
      c.seqs = {{4, 4}, {3, 9}, {1, 70}};
      c.qq_bias = true;
      c.qq_bias_masked_rows = {1, 2};
      c.sinks = sinks;
      c.split = split;
      c.num_segments = split == SplitKv::on ? 2 : 0;
      tool::PagedAttentionOutputs o;
      auto r = tool::run_paged_attention(ctx(), c, &o);
      EXPECT_TRUE(r.pass) << r.summary << "\n" << r.failure;
      // The reference agrees that tokens 1 and 2 see nothing (the runner then
      // demands exact zeros there).
      for (uint32_t t : {1u, 2u})
        for (uint32_t h = 0; h < c.num_q_heads; ++h)
          for (uint32_t d = 0; d < c.head_size; ++d)
            ASSERT_EQ(o.ref_out[(t * c.num_q_heads + h) * c.head_size + d], 0.0);
    }
}

// ---- bad input: vkattn::Error before anything is dispatched ----

class PagedAttentionBadInput : public VkTest {
 protected:
  void SetUp() override {
    VkTest::SetUp();
    cache_ = std::make_unique<PagedKvCache>(ctx(), cfg_);
    cache_->fill(0x3C003C00u);
    q_ = Buffer(ctx(), 3 * 8 * 64 * 2);
    out_ = Buffer(ctx(), 3 * 8 * 64 * 4);
    lse_ = Buffer(ctx(), 3 * 8 * 4);
    params_ = Buffer(ctx(), 64 * 4);
    q_.fill(0x3C003C00u);
    out_.fill(0xFFFFFFFFu);
    // Two sequences: decode over 20 keys (blocks 3, 4) and 2 new tokens of 5 (block 5).
    batch_ = std::make_unique<DeviceBatch>(ctx(), std::vector<int32_t>{0, 1, 3}, std::vector<int32_t>{20, 5},
                                           std::vector<int32_t>{3, 4, 5, 0}, 2);
  }
  void TearDown() override {
    batch_.reset();
    cache_.reset();
    q_ = Buffer();
    out_ = Buffer();
    lse_ = Buffer();
    params_ = Buffer();
    VkTest::TearDown();
  }
  PagedAttentionPlan plan(uint32_t hq = 4, DType qd = DType::f16) {
    return PagedAttentionPlan(ctx(), cfg_, hq, qd, batch_->lengths());
  }
  TensorView q(std::vector<int64_t> shape = {3, 4, 64}, DType t = DType::f16) {
    return TensorView::contiguous(q_, t, std::move(shape));
  }
  TensorView out(std::vector<int64_t> shape = {3, 4, 64}, DType t = DType::f16) {
    return TensorView::contiguous(out_, t, std::move(shape));
  }
  TensorView param(std::vector<int64_t> shape, VkDeviceSize offset = 0) {
    return TensorView::contiguous(params_, DType::f32, std::move(shape), offset);
  }
  PagedAttentionArgs args(TensorView qv, TensorView ov, std::optional<TensorView> lse = std::nullopt) {
    PagedAttentionArgs a;
    a.q = std::move(qv);
    a.out = std::move(ov);
    a.lse = std::move(lse);
    a.batch = batch_->view();
    a.params.scale = 0.125f;
    return a;
  }
  PagedAttentionArgs args() { return args(q(), out()); }
  void expect_out_untouched() {
    auto b = out_.download_as<uint8_t>(out_.size());
    for (size_t i = 0; i < b.size(); ++i) ASSERT_EQ(b[i], 0xFF) << "out byte " << i << " was written";
  }
  KvCacheConfig cfg_{.num_blocks = 8, .block_size = 16, .num_kv_heads = 2, .head_size = 64};
  std::unique_ptr<PagedKvCache> cache_;
  std::unique_ptr<DeviceBatch> batch_;
  Buffer q_, out_, lse_, params_;
};

TEST_F(PagedAttentionBadInput, TheValidSetupRuns) {
  auto p = plan();
  EXPECT_NO_THROW(paged_attention(ctx(), p, *cache_, args()));
}

TEST_F(PagedAttentionBadInput, LengthsTheHostChecks) {
  batch_->seq_lens() = {20, -1};
  EXPECT_VKATTN_ERROR(plan(), "seq_lens[1] = -1");
  batch_->seq_lens() = {20, 1};   // sequence 1 has 2 new tokens
  EXPECT_VKATTN_ERROR(plan(), "query_len", "seq_lens[1] = 1");
  batch_->seq_lens() = {20, 5};
  batch_->query_start_loc() = {1, 2, 3};
  EXPECT_VKATTN_ERROR(plan(), "query_start_loc[0] = 1");
  batch_->query_start_loc() = {0, 2, 1};
  EXPECT_VKATTN_ERROR(plan(), "query_start_loc", "decreasing");
  const std::vector<int32_t> two{0, 1}, lens{20, 5};
  EXPECT_VKATTN_ERROR(PagedAttentionPlan(ctx(), cfg_, 4, DType::f16, PagedAttentionLengths{two, lens}),
                      "query_start_loc has 2 entries", "num_seqs + 1 = 3");
}

TEST_F(PagedAttentionBadInput, BatchViewShapes) {
  auto p = plan();
  auto a = args();
  a.batch.block_table.shape = {3, 2};
  EXPECT_VKATTN_ERROR(paged_attention(ctx(), p, *cache_, a), "block_table has shape [3, 2]", "num_seqs");
  a = args();
  a.batch.query_start_loc.shape = {2};
  EXPECT_VKATTN_ERROR(paged_attention(ctx(), p, *cache_, a), "query_start_loc has shape [2]", "expected [3]");
  a = args();
  a.batch.seq_lens.dtype = DType::i64;
  EXPECT_VKATTN_ERROR(paged_attention(ctx(), p, *cache_, a), "seq_lens has dtype i64", "i32");
  a = args();
  a.batch.block_table.shape = {2, 0};
  EXPECT_VKATTN_ERROR(paged_attention(ctx(), p, *cache_, a), "block_table has 0 columns");
  expect_out_untouched();
}

TEST_F(PagedAttentionBadInput, QHeadsNotDivisibleByKvHeads) {
  EXPECT_VKATTN_ERROR(plan(3), "num_q_heads = 3", "not divisible", "num_kv_heads = 2");
  EXPECT_VKATTN_ERROR(plan(0), "num_q_heads = 0");
}

TEST_F(PagedAttentionBadInput, QDtype) {
  EXPECT_VKATTN_ERROR(plan(4, DType::f32), "q dtype f32", "f16 or bf16");
  EXPECT_VKATTN_ERROR(plan(4, DType::fp8_e4m3), "q dtype fp8_e4m3");
  auto p = plan();
  EXPECT_VKATTN_ERROR(paged_attention(ctx(), p, *cache_, args(q({3, 4, 64}, DType::bf16), out())), "q has dtype bf16",
                      "expected f16");
  expect_out_untouched();
}

TEST_F(PagedAttentionBadInput, ViewShapes) {
  auto p = plan();
  // head_size of q differs from the cache's.
  EXPECT_VKATTN_ERROR(paged_attention(ctx(), p, *cache_, args(q({3, 4, 32}), out())), "q has shape [3, 4, 32]",
                      "head_size");
  EXPECT_VKATTN_ERROR(paged_attention(ctx(), p, *cache_, args(q({3, 8, 64}), out())), "q has shape [3, 8, 64]",
                      "num_q_heads");
  EXPECT_VKATTN_ERROR(paged_attention(ctx(), p, *cache_, args(q({2, 4, 64}), out())), "q has shape [2, 4, 64]",
                      "num_tokens");
  EXPECT_VKATTN_ERROR(paged_attention(ctx(), p, *cache_, args(q(), out({3, 4, 32}))), "out has shape [3, 4, 32]",
                      "expected [3, 4, 64]");
  EXPECT_VKATTN_ERROR(paged_attention(ctx(), p, *cache_, args(q(), out({3, 4, 64}, DType::i32))), "out has dtype i32");
  auto lse = TensorView::contiguous(lse_, DType::f32, {3, 3});
  EXPECT_VKATTN_ERROR(paged_attention(ctx(), p, *cache_, args(q(), out(), lse)), "lse has shape [3, 3]", "expected [3, 4]");
  lse = TensorView::contiguous(lse_, DType::f16, {3, 4});
  EXPECT_VKATTN_ERROR(paged_attention(ctx(), p, *cache_, args(q(), out(), lse)), "lse has dtype f16", "f32");
  // A view past the end of its buffer.
  Buffer small(ctx(), 100);
  EXPECT_VKATTN_ERROR(paged_attention(ctx(), p, *cache_, args(q(), TensorView::contiguous(small, DType::f16, {3, 4, 64}))),
                      "out");
  expect_out_untouched();
}

TEST_F(PagedAttentionBadInput, OutputsThatShareMemory) {
  auto p = plan();
  // out over q shifted by one token, in q's buffer.
  auto shifted = TensorView::contiguous(q_, DType::f16, {3, 4, 64}, 0);
  Buffer both(ctx(), 4 * 4 * 64 * 2);
  auto q_in_both = TensorView::contiguous(both, DType::f16, {3, 4, 64});
  auto out_in_both = TensorView::contiguous(both, DType::f16, {3, 4, 64}, 4 * 64 * 2);
  EXPECT_VKATTN_ERROR(paged_attention(ctx(), p, *cache_, args(q_in_both, out_in_both)), "out", "overlaps q");
  EXPECT_VKATTN_ERROR(paged_attention(ctx(), p, *cache_, args(q(), shifted)), "out", "overlaps q");
  // Zero strides: every token's output on the same row.
  auto zero = out();
  zero.strides = {0, 64, 1};
  EXPECT_VKATTN_ERROR(paged_attention(ctx(), p, *cache_, args(q(), zero)), "out", "share memory");
  // lse placed over out.
  auto lse_over_out = TensorView::contiguous(out_, DType::f32, {3, 4}, 64);
  EXPECT_VKATTN_ERROR(paged_attention(ctx(), p, *cache_, args(q(), out(), lse_over_out)), "overlaps");
  // out over the batch's metadata.
  auto a = args();
  a.out = TensorView::contiguous(BufferRef{a.batch.seq_lens.buffer}, DType::f16, {3, 4, 64});
  EXPECT_VKATTN_ERROR(paged_attention(ctx(), p, *cache_, a), "out");
  expect_out_untouched();
}

TEST_F(PagedAttentionBadInput, CacheOtherThanThePlans) {
  auto p = plan();
  PagedKvCache other(ctx(), KvCacheConfig{.num_blocks = 8, .block_size = 16, .num_kv_heads = 2, .head_size = 64,
                                          .dtype = DType::bf16});
  EXPECT_VKATTN_ERROR(paged_attention(ctx(), p, other, args()), "cache");
  expect_out_untouched();
}

TEST_F(PagedAttentionBadInput, ParamSizesAndValues) {
  auto p = plan();
  auto a = args();
  a.params.alibi_slopes = param({3});
  EXPECT_VKATTN_ERROR(paged_attention(ctx(), p, *cache_, a), "alibi_slopes has shape [3]", "expected [4]");
  a = args();
  a.params.sinks = param({5});
  EXPECT_VKATTN_ERROR(paged_attention(ctx(), p, *cache_, a), "sinks has shape [5]", "expected [4]");
  a = args();
  a.params.sinks = TensorView::contiguous(params_, DType::f16, {4});
  EXPECT_VKATTN_ERROR(paged_attention(ctx(), p, *cache_, a), "sinks has dtype f16");
  a = args();
  a.params.qq_bias = param({1, 2});   // sequence 1 has 2 new tokens: 2 rows are needed
  EXPECT_VKATTN_ERROR(paged_attention(ctx(), p, *cache_, a), "qq_bias has 1 rows", "longest query_len = 2");
  for (float bad : {0.0f, -1.0f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    a = args();
    a.params.scale = bad;
    EXPECT_VKATTN_ERROR(paged_attention(ctx(), p, *cache_, a), "scale", "finite value > 0");
    a = args();
    a.params.out_scale = bad;
    EXPECT_VKATTN_ERROR(paged_attention(ctx(), p, *cache_, a), "out_scale");
  }
  a = args();
  a.params.sliding_window = -3;
  EXPECT_VKATTN_ERROR(paged_attention(ctx(), p, *cache_, a), "sliding_window = -3");
  a = args();
  a.params.softcap = -1;
  EXPECT_VKATTN_ERROR(paged_attention(ctx(), p, *cache_, a), "softcap");
  expect_out_untouched();
}

// The prefill kernel checks each row's sink where it writes the row's first
// element (pa_write_result_scaled, which takes the row's factor computed
// once). One sequence of 5 new tokens (10 rows at GQA 2, more than one
// token's decode tile), unsplit: on a matrix path the prefill kernel writes
// every row, so the report can come from it only.
TEST_F(PagedAttentionBadInput, NanSinksAreReportedByThePrefillKernel) {
  DeviceBatch batch(ctx(), std::vector<int32_t>{0, 5}, std::vector<int32_t>{5}, std::vector<int32_t>{5, 0}, 2);
  PagedAttentionPlanOptions o;
  o.prefill = PrefillKernel::on;
  o.split = SplitKv::off;
  const PagedAttentionPlan p(ctx(), cfg_, 4, DType::f16, batch.lengths(), o);
  EXPECT_EQ(p.routes_prefill(), ctx().path_for("paged_prefill") != Path::scalar);
  auto a = args(q({5, 4, 64}), out({5, 4, 64}), TensorView::contiguous(lse_, DType::f32, {5, 4}));
  a.batch = batch.view();
  a.params.sinks = param({4});
  const float sinks[4] = {0.5f, 1.5f, 1.0f, 2.0f};
  params_.upload(sinks, sizeof sinks);
  EXPECT_NO_THROW(paged_attention(ctx(), p, *cache_, a));
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    const float s[4] = {0.5f, 1.5f, bad, 2.0f};
    params_.upload(s, sizeof s);
    EXPECT_VKATTN_ERROR(paged_attention(ctx(), p, *cache_, a), "sinks[2] = ", "NaN or +inf");
  }
}

TEST_F(PagedAttentionBadInput, NanParametersOnTheDeviceAreReported) {
  // Sinks and slopes together (one pipeline to compile), one of them bad at a time.
  auto p = plan();
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  auto a = args();
  a.params.sinks = param({4});
  a.params.alibi_slopes = param({4}, 64);
  const float slopes[4] = {0.5f, 0.25f, 0.125f, 0.1f}, sinks[4] = {0.5f, 1.5f, 1.0f, 2.0f};
  params_.upload(slopes, sizeof slopes, 64);
  params_.upload(sinks, sizeof sinks);
  EXPECT_NO_THROW(paged_attention(ctx(), p, *cache_, a));
  for (float bad : {nan, inf}) {
    const float s[4] = {0.5f, bad, 1.0f, 2.0f};
    params_.upload(s, sizeof s);
    EXPECT_VKATTN_ERROR(paged_attention(ctx(), p, *cache_, a), "sinks[1] = ", "NaN or +inf");
  }
  params_.upload(sinks, sizeof sinks);
  for (float bad : {nan, inf, -inf}) {
    const float s[4] = {0.5f, 0.25f, bad, 0.1f};
    params_.upload(s, sizeof s, 64);
    EXPECT_VKATTN_ERROR(paged_attention(ctx(), p, *cache_, a), "alibi_slopes[2] = ", "not finite");
  }
}

TEST_F(PagedAttentionBadInput, SplitRunsNeedAWorkspace) {
  PagedAttentionPlanOptions o;
  o.split = SplitKv::on;
  o.num_segments = 3;
  PagedAttentionPlan p(ctx(), cfg_, 4, DType::f16, batch_->lengths(), o);
  ASSERT_TRUE(p.split());
  ASSERT_GT(p.workspace_bytes(), 0u);
  // Recorded without a workspace: refused before anything is recorded.
  const std::string need = std::to_string(p.workspace_bytes());
  Buffer small(ctx(), p.workspace_bytes() - 4);
  ctx().submit_and_wait([&](VkCommandBuffer cmd) {
    auto a = args();
    EXPECT_VKATTN_ERROR(paged_attention(ctx(), p, *cache_, a, cmd), "workspace", need.c_str());
    a.workspace = TensorView::contiguous(small, DType::f32, {int64_t(small.size() / 4)});
    EXPECT_VKATTN_ERROR(paged_attention(ctx(), p, *cache_, a, cmd), "workspace holds");
  });
  // A workspace too small for the plan's segments: the plan refuses.
  o.workspace_bytes = p.workspace_bytes() - 1;
  EXPECT_VKATTN_ERROR(PagedAttentionPlan(ctx(), cfg_, 4, DType::f16, batch_->lengths(), o), "workspace");
  expect_out_untouched();
}

// ---- what the kernels check on the device: reported, never out of bounds ----

// A batch with no new token dispatches nothing, but its views are still
// checked (the engine's mistake shows on the step it makes it).
TEST_F(PagedAttentionBadInput, ViewsAreCheckedWhenThereIsNothingToRun) {
  DeviceBatch empty(ctx(), {0, 0}, {5}, {3}, 1);
  PagedAttentionPlan p(ctx(), cfg_, 4, DType::f16, empty.lengths());
  auto a = args(q({0, 4, 64}), out({0, 4, 64}));
  a.batch = empty.view();
  EXPECT_NO_THROW(paged_attention(ctx(), p, *cache_, a));
  a.q.buffer = BufferRef{};
  EXPECT_VKATTN_ERROR(paged_attention(ctx(), p, *cache_, a), "q", "VK_NULL_HANDLE");
  a = args(q({0, 4, 64}), out({0, 4, 64}));
  a.batch = empty.view();
  a.out.offset = out_.size() + 64;   // past its buffer
  EXPECT_VKATTN_ERROR(paged_attention(ctx(), p, *cache_, a), "out");
}

TEST_F(PagedAttentionBadInput, BlockTableEntryOutsideTheCacheIsReported) {
  auto p = plan();
  batch_->block_table() = {3, 9, 5, 0};
  batch_->upload();
  EXPECT_VKATTN_ERROR(paged_attention(ctx(), p, *cache_, args()), "block_table[0, 1] = 9", "not a block of the cache");
  batch_->block_table() = {3, 4, -1, 0};
  batch_->upload();
  EXPECT_VKATTN_ERROR(paged_attention(ctx(), p, *cache_, args()), "block_table[1, 0] = -1");
  // Entries past a sequence's blocks are never read.
  batch_->block_table() = {3, 4, 5, 1 << 30};
  batch_->upload();
  EXPECT_NO_THROW(paged_attention(ctx(), p, *cache_, args()));
}

TEST_F(PagedAttentionBadInput, SeqLensCorruptedOnTheDeviceAreReported) {
  auto p = plan();
  batch_->seq_lens() = {33, 5};   // needs 3 blocks, the table has 2 per sequence
  batch_->upload();
  EXPECT_VKATTN_ERROR(paged_attention(ctx(), p, *cache_, args()), "seq_lens[0] = 33", "32 keys");
  batch_->seq_lens() = {20, 1};   // below sequence 1's 2 new tokens
  batch_->upload();
  EXPECT_VKATTN_ERROR(paged_attention(ctx(), p, *cache_, args()), "seq_lens[1] = 1", "query_len 2");
  batch_->seq_lens() = {-4, 5};
  batch_->upload();
  EXPECT_VKATTN_ERROR(paged_attention(ctx(), p, *cache_, args()), "seq_lens[0] = -4");
}

TEST_F(PagedAttentionBadInput, QueryStartLocCorruptedOnTheDeviceIsReportedAndStaysInBounds) {
  // The plan covers 3 tokens; the device says more, fewer, out of order, or
  // starts past token 0 (whose rows nothing would write).
  // Every write stays inside out (the guard after it is checked), and every
  // corruption is reported.
  auto p = plan();
  Buffer guarded(ctx(), out_.size() + 4096);
  guarded.fill(0xFFFFFFFFu);
  auto ov = TensorView::contiguous(guarded, DType::f16, {3, 4, 64});
  for (std::vector<int32_t> bad : {std::vector<int32_t>{0, 1, 1 << 30}, {0, 2, 1}, {-5, 1, 3}, {0, 7, 9}, {0, 1, 4}, {2, 2, 3}}) {
    batch_->query_start_loc() = bad;
    batch_->upload();
    EXPECT_VKATTN_ERROR(paged_attention(ctx(), p, *cache_, args(q(), ov)), "query_start_loc on the device");
    auto g = guarded.download_as<uint8_t>(guarded.size());
    for (size_t i = 3 * 4 * 64 * 2; i < g.size(); ++i) ASSERT_EQ(g[i], 0xFF) << "byte " << i << " past out was written";
  }
}

TEST_F(PagedAttentionBadInput, QueryLongerThanTheReplayPlanIsReported) {
  // A decode replay plan (query_len 1) given a batch whose sequence 1 has 39 new tokens.
  PagedAttentionPlan p(ctx(), cfg_, 4, DType::f16, PagedAttentionLimits{.num_seqs = 2, .max_num_tokens = 40, .max_query_len = 1});
  DeviceBatch b(ctx(), {0, 1, 40}, {20, 45}, {3, 4, 0, 5, 6, 7}, 3);
  Buffer q40(ctx(), 40 * 4 * 64 * 2), out40(ctx(), 40 * 4 * 64 * 2);
  auto a = args(TensorView::contiguous(q40, DType::f16, {40, 4, 64}), TensorView::contiguous(out40, DType::f16, {40, 4, 64}));
  a.batch = b.view();
  EXPECT_VKATTN_ERROR(paged_attention(ctx(), p, *cache_, a), "sequence 1 has query_len 39", "plan");
}

}  // namespace
}  // namespace vkattn::test
