// Links against the installed library: opens the default device, writes one
// token into a cache and reads it back.
#include <vkattn/vkattn.hpp>

#include <cstdio>
#include <cstring>
#include <vector>

int main() {
  vkattn::Context ctx;
  vkattn::PagedKvCache cache(ctx, {.num_blocks = 4, .block_size = 16, .num_kv_heads = 1, .head_size = 16});
  std::vector<float> k(16), v(16);
  for (int i = 0; i < 16; ++i) { k[i] = 0.5f * i + 1; v[i] = -0.25f * i - 1; }
  vkattn::Buffer kb(ctx, 64), vb(ctx, 64), sb(ctx, 8);
  kb.upload(k.data(), 64);
  vb.upload(v.data(), 64);
  int64_t slot = 37;   // block 2, token 5
  sb.upload(&slot, 8);
  using vkattn::DType;
  vkattn::write_kv_cache(ctx, cache, vkattn::TensorView::contiguous(kb, DType::f32, {1, 1, 16}),
                         vkattn::TensorView::contiguous(vb, DType::f32, {1, 1, 16}),
                         vkattn::TensorView::contiguous(sb, DType::i64, {1}));
  auto block = cache.read_blocks(vkattn::KvPart::key, 2, 1);
  uint16_t h;
  std::memcpy(&h, &block[(5 * 16 + 3) * 2], 2);   // NHD: token 5, dim 3 = 2.5 = 0x4100 in f16
  std::printf("consumer: %s, stored 0x%04x\n", ctx.capabilities().device_name.c_str(), h);
  return h == 0x4100 ? 0 : 1;
}
