#include "runners/write_kv_cache_runner.hpp"

#include <vkattn/vkattn.hpp>
#include <vkattn_ref/kv_cache_ref.hpp>
#include <vkattn_ref/random.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "gpu_timer.hpp"

namespace vkattn::tool {

WriteKvCacheFlags::WriteKvCacheFlags(cli::Flags& f)
    : tokens_(f.add_int("num-tokens", 37, "new tokens to write", 0, 1 << 24)),
      blocks_(f.add_int("num-blocks", 64, "blocks in the cache", 1, 1 << 24)),
      block_size_(f.add_int("block-size", 16, "tokens per block (any value 1..1024)", 1, 1024)),
      heads_(f.add_int("num-kv-heads", 4, "KV heads", 1, 1024)),
      head_size_(f.add_int("head-size", 128, "head size (multiple of 16, 16..256)", 1, 4096)),
      padding_(f.add_int("padding", 3, "tokens whose slot is -1 (skipped)", 0)),
      reps_(f.add_int("repeat", 20, "timed repetitions (at most; fewer when they would take over 2 s)", 1, 100000)),
      cache_dtype_(f.add_choice("cache-dtype", "f16", {"f16", "bf16", "fp8_e4m3", "fp8_e5m2"}, "cache dtype")),
      input_dtype_(f.add_choice("dtype", "f16", {"f16", "bf16", "f32"}, "dtype of the new K/V")),
      slot_dtype_(f.add_choice("slot-dtype", "i64", {"i64", "i32"}, "dtype of slot_mapping")),
      layout_(f.add_choice("layout", "nhd", {"nhd", "hnd", "split"}, "cache layout")),
      k_scale_(f.add_double("k-scale", 0.05, "fp8 K scale (stored = k / k_scale)")),
      v_scale_(f.add_double("v-scale", 0.03, "fp8 V scale")),
      amplitude_(f.add_double("amplitude", 4.0, "inputs are uniform in [-a, a]", 0.0)),
      seed_(f.add_int("seed", 1, "random seed", 0)) {}

void check_tokens_fit(uint64_t num_tokens, uint64_t padding_tokens, uint64_t num_slots) {
  const uint64_t real = num_tokens - std::min(padding_tokens, num_tokens);
  if (real > num_slots)
    throw cli::UsageError("write-kv-cache: " + std::to_string(num_tokens) + " tokens with " +
                          std::to_string(padding_tokens) + " padding leave " + std::to_string(real) +
                          " tokens that each need a slot of their own, but the cache has only " + std::to_string(num_slots) +
                          " (--num-blocks x --block-size): use fewer tokens, more padding or a larger cache");
}

WriteKvCacheCase WriteKvCacheFlags::apply() const {
  check_tokens_fit(uint64_t(tokens_), uint64_t(padding_), uint64_t(blocks_) * uint64_t(block_size_));   // before the device opens
  WriteKvCacheCase c;
  c.num_tokens = static_cast<uint32_t>(tokens_);
  c.padding_tokens = static_cast<uint32_t>(padding_);
  c.cache.num_blocks = static_cast<uint32_t>(blocks_);
  c.cache.block_size = static_cast<uint32_t>(block_size_);
  c.cache.num_kv_heads = static_cast<uint32_t>(heads_);
  c.cache.head_size = static_cast<uint32_t>(head_size_);
  c.cache.dtype = parse_dtype(cache_dtype_);
  c.cache.layout = parse_layout(layout_);
  c.cache.k_scale = static_cast<float>(k_scale_);
  c.cache.v_scale = static_cast<float>(v_scale_);
  c.input_dtype = parse_dtype(input_dtype_);
  c.slot_dtype = parse_dtype(slot_dtype_);
  c.amplitude = amplitude_;
  c.seed = static_cast<uint64_t>(seed_);
  c.timing_repetitions = static_cast<uint32_t>(reps_);
  return c;
}

namespace {

ref::ElemType ref_type(DType t) { return ref::elem_type(dtype_name(t)); }

}  // namespace

RunResult run_write_kv_cache(Context& ctx, const WriteKvCacheCase& c) {
  const KvCacheConfig& cfg = c.cache;
  const uint32_t n = c.num_tokens, H = cfg.num_kv_heads, D = cfg.head_size;
  const uint32_t padding = std::min(c.padding_tokens, n);
  check_tokens_fit(n, c.padding_tokens, uint64_t(cfg.num_blocks) * cfg.block_size);
  PagedKvCache cache(ctx, cfg);
  ref::Rng rng(c.seed);

  // Inputs as the kernel will read them (already rounded to the input dtype).
  const ref::ElemType in_t = ref_type(c.input_dtype);
  std::vector<double> key = ref::round_to(in_t, ref::random_values(rng, size_t(n) * H * D, c.amplitude));
  std::vector<double> value = ref::round_to(in_t, ref::random_values(rng, size_t(n) * H * D, c.amplitude));
  // Exactly `padding` tokens (-1) at distinct random positions; the others
  // get distinct random slots, of which there are enough (check_tokens_fit).
  std::vector<uint32_t> perm = ref::random_permutation(rng, static_cast<uint32_t>(cache.num_slots()));
  std::vector<uint32_t> positions = ref::random_permutation(rng, n);
  std::vector<bool> is_padding(n, false);
  for (uint32_t p = 0; p < padding; ++p) is_padding[positions[p]] = true;
  std::vector<int64_t> slots(n);
  for (uint32_t i = 0, next = 0; i < n; ++i) slots[i] = is_padding[i] ? int64_t(-1) : int64_t(perm[next++]);

  // Lay the rows out with the requested padding and offset (poison in the gaps).
  const size_t row = size_t(H) * D, stride = row + c.row_padding, esz = dtype_size(c.input_dtype);
  auto laid_out = [&](const std::vector<double>& vals) {
    std::vector<double> padded(c.view_offset + size_t(n) * stride, 1e4);
    for (size_t i = 0; i < n; ++i)
      std::copy(vals.begin() + i * row, vals.begin() + (i + 1) * row, padded.begin() + c.view_offset + i * stride);
    return ref::encode_values(in_t, padded);
  };
  std::vector<uint8_t> key_bytes = laid_out(key), value_bytes = laid_out(value);
  const size_t in_bytes = std::max<size_t>(key_bytes.size(), 4);
  Buffer kbuf(ctx, in_bytes), vbuf(ctx, in_bytes);
  kbuf.upload(key_bytes.data(), key_bytes.size());
  vbuf.upload(value_bytes.data(), value_bytes.size());
  const size_t slot_size = dtype_size(c.slot_dtype);
  std::vector<uint8_t> slot_bytes(std::max<size_t>(size_t(n) * slot_size, 8));
  for (uint32_t i = 0; i < n; ++i) {
    if (slot_size == 8) std::memcpy(&slot_bytes[i * 8], &slots[i], 8);
    else { int32_t s = static_cast<int32_t>(slots[i]); std::memcpy(&slot_bytes[i * 4], &s, 4); }
  }
  Buffer sbuf(ctx, slot_bytes.size());
  sbuf.upload(slot_bytes.data(), slot_bytes.size());

  // Poison: random bytes everywhere, so untouched and wrongly touched bytes both show.
  std::vector<uint8_t> poison_k(cache.block_bytes() * cfg.num_blocks), poison_v(poison_k.size());
  for (auto* p : {&poison_k, &poison_v})
    for (size_t i = 0; i < p->size(); i += 8) {
      uint64_t r = rng.next();
      std::memcpy(p->data() + i, &r, std::min<size_t>(8, p->size() - i));
    }
  cache.write_blocks(KvPart::key, 0, poison_k);
  cache.write_blocks(KvPart::value, 0, poison_v);

  TensorView kv = TensorView::contiguous(kbuf, c.input_dtype, {n, H, D}, c.view_offset * esz);
  kv.strides = {int64_t(stride), int64_t(D), 1};
  TensorView vv = kv;
  vv.buffer = vbuf;
  TensorView sv = TensorView::contiguous(sbuf, c.slot_dtype, {n});
  write_kv_cache(ctx, cache, kv, vv, sv);

  std::vector<uint8_t> got_k = cache.read_blocks(KvPart::key, 0, cfg.num_blocks);
  std::vector<uint8_t> got_v = cache.read_blocks(KvPart::value, 0, cfg.num_blocks);

  ref::KvGeometry g{cfg.num_blocks, cfg.block_size, H, D, ref_type(cfg.dtype),
                    static_cast<ref::KvLayoutRef>(static_cast<uint32_t>(cfg.layout))};
  auto expected = ref::expected_kv_writes(g, key, value, slots, cfg.k_scale, cfg.v_scale);
  const ref::Format fmt = ref::format_of(g.dtype);
  const size_t es = dtype_size(cfg.dtype);
  // f32 arithmetic before rounding (x * (1/scale) for fp8) may move a value
  // sitting within ~2^-22 of a rounding midpoint to the other side.
  const double slack = is_fp8(cfg.dtype) ? 0x1p-20 : 0.0;
  const auto spec = ref::format_spec(fmt);
  const double min_normal = std::ldexp(1.0, 1 - spec.bias);

  RunResult r;
  r.tolerance = "every stored element is the round-to-nearest-even " + std::string(dtype_name(cfg.dtype)) +
                " value of input / scale" + (slack > 0 ? " (either neighbour within 2^-20 ulp of a midpoint)" : "") +
                "; every other byte unchanged";
  r.pass = true;
  std::vector<uint8_t> touched_k(got_k.size()), touched_v(got_v.size());
  for (const auto& e : expected) {
    auto& got = e.is_value ? got_v : got_k;
    auto& touched = e.is_value ? touched_v : touched_k;
    uint32_t bits = 0;
    std::memcpy(&bits, &got[e.byte_offset], es);
    std::memset(&touched[e.byte_offset], 1, es);
    double gv = ref::decode(fmt, bits);
    // Errors in the caller's units (dequantized); relative error only where the
    // format has its full precision (normal range), as subnormals round coarser.
    const double unit = is_fp8(cfg.dtype) ? (e.is_value ? cfg.v_scale : cfg.k_scale) : 1.0;
    double err = std::fabs(gv - e.exact) * unit;
    r.max_abs_err = std::max(r.max_abs_err, err);
    if (std::fabs(e.exact) >= min_normal && std::fabs(e.exact) <= ref::max_finite(fmt))
      r.max_rel_err = std::max(r.max_rel_err, err / (std::fabs(e.exact) * unit));
    if (!ref::is_correct_rounding(fmt, bits, e.exact, slack) && r.pass) {
      r.pass = false;
      std::ostringstream o;
      o << (e.is_value ? "V" : "K") << " cache byte " << e.byte_offset << ": stored " << gv << " (bits 0x" << std::hex
        << bits << std::dec << "), expected " << ref::decode(fmt, ref::encode(fmt, e.exact)) << " from " << e.exact;
      r.failure = o.str();
    }
  }
  for (int part = 0; part < 2 && r.pass; ++part) {
    const auto& got = part ? got_v : got_k;
    const auto& poison = part ? poison_v : poison_k;
    const auto& touched = part ? touched_v : touched_k;
    for (size_t i = 0; i < got.size(); ++i)
      if (!touched[i] && got[i] != poison[i]) {
        r.pass = false;
        r.failure = std::string(part ? "V" : "K") + " cache byte " + std::to_string(i) + " changed but no token maps to it";
        break;
      }
  }

  if (c.timing_repetitions > 0 && ctx.capabilities().timestamp_period_ns > 0) {
    if (c.before_timing) c.before_timing();
    r.gpu_us = median_time_us(ctx, [&](VkCommandBuffer cmd) { write_kv_cache(ctx, cache, kv, vv, sv, cmd); },
                              c.timing_repetitions);
  }
  r.bytes = 2.0 * n * H * D * (dtype_size(c.input_dtype) + es) + double(n) * slot_size;
  std::ostringstream s;
  s << "write_kv_cache: " << n << " tokens (" << padding << " padding) x " << H << " heads x " << D
    << ", " << dtype_name(c.input_dtype) << " -> " << dtype_name(cfg.dtype) << " cache, layout "
    << layout_name(cfg.layout) << ", " << cfg.num_blocks << " blocks of " << cfg.block_size << ", slots "
    << dtype_name(c.slot_dtype) << ", seed " << c.seed;
  r.summary = s.str();
  return r;
}

}  // namespace vkattn::tool
