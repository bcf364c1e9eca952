// Consumer "variant": a block-sparse variant of the application's own
// (checker.glsl, compiled by vkattn_add_block_sparse_variant from the
// installed package), run through block_sparse_attention and its device mask
// builder, and checked against a C++ version of the same mods.
#include <vkattn/vkattn.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

void check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "consumer_variant: FAILED: %s\n", what);
  std::exit(1);
}

bool mask(int q, int k) { return ((q / 16) + (k / 16)) % 2 == 0; }

}  // namespace

int main() {
  constexpr int H = 2, L = 96, D = 32, QB = L / 32;
  const float head_factor[H] = {1.0f, -0.5f};
  vkattn::Context ctx;
  // q, K, V: small exact f16 values (multiples of 1/8 in [-1, 1]).
  std::vector<uint16_t> qkv(3 * H * L * D);
  std::vector<double> val(qkv.size());
  for (size_t i = 0; i < qkv.size(); ++i) {
    const int n = int(i * 2654435761u % 17) - 8;
    val[i] = n / 8.0;
    const double a = std::fabs(val[i]);
    // f16 bits of n / 8: 0, or sign | exponent | mantissa for |n| in 1..8.
    uint16_t bits = 0;
    if (n != 0) {
      int e = int(std::floor(std::log2(a)));
      const double m = a / std::ldexp(1.0, e) - 1.0;
      bits = uint16_t((n < 0 ? 0x8000 : 0) | ((e + 15) << 10) | int(std::lround(m * 1024)));
    }
    qkv[i] = bits;
  }
  vkattn::Buffer in(ctx, qkv.size() * 2), out(ctx, H * L * D * 4), lists(ctx, 4096), factors(ctx, 256);
  in.upload(qkv.data(), qkv.size() * 2);
  factors.upload(head_factor, sizeof head_factor);
  const int64_t n = int64_t(H) * L * D;
  vkattn::BlockSparseArgs a;
  a.q = vkattn::TensorView::contiguous(in, vkattn::DType::f16, {1, H, L, D});
  a.k = vkattn::TensorView::contiguous(in, vkattn::DType::f16, {1, H, L, D}, n * 2);
  a.v = vkattn::TensorView::contiguous(in, vkattn::DType::f16, {1, H, L, D}, 2 * n * 2);
  a.out = vkattn::TensorView::contiguous(out, vkattn::DType::f32, {1, H, L, D});
  a.mask.q_block_size = a.mask.kv_block_size = 32;
  a.mask.kv_num_blocks = vkattn::TensorView::contiguous(lists, vkattn::DType::i32, {1, 1, QB});
  a.mask.kv_indices = vkattn::TensorView::contiguous(lists, vkattn::DType::i32, {1, 1, QB, QB}, 256);
  a.mask.full_kv_num_blocks = vkattn::TensorView::contiguous(lists, vkattn::DType::i32, {1, 1, QB}, 512);
  a.mask.full_kv_indices = vkattn::TensorView::contiguous(lists, vkattn::DType::i32, {1, 1, QB, QB}, 768);
  a.custom_mods = "consumer_checker";
  a.custom_buffers = {{"head_factor", vkattn::TensorView::contiguous(factors, vkattn::DType::f32, {H})}};
  vkattn::BlockMaskBuild b;
  b.q_len = b.kv_len = L;
  b.mask = a.mask;
  b.custom_mods = a.custom_mods;
  b.custom_buffers = a.custom_buffers;   // every buffer the variant declares, as for the attention
  vkattn::build_block_mask(ctx, b);
  vkattn::block_sparse_attention(ctx, a);
  std::vector<float> got(H * L * D);
  out.download(got.data(), got.size() * 4);

  const double scale = 1.0 / std::sqrt(double(D));
  double worst = 0;
  for (int h = 0; h < H; ++h)
    for (int q = 0; q < L; ++q) {
      std::vector<double> p(L, 0.0);
      double m = -INFINITY, l = 0;
      for (int k = 0; k < L; ++k) {
        if (!mask(q, k)) continue;
        double s = 0;
        for (int d = 0; d < D; ++d) s += val[(h * L + q) * D + d] * val[n + (h * L + k) * D + d];
        p[k] = s * scale * head_factor[h];
        m = std::max(m, p[k]);
      }
      for (int k = 0; k < L; ++k) l += mask(q, k) ? std::exp(p[k] - m) : 0.0;
      for (int d = 0; d < D; ++d) {
        double o = 0;
        for (int k = 0; k < L; ++k)
          if (mask(q, k)) o += std::exp(p[k] - m) / l * val[2 * n + (h * L + k) * D + d];
        worst = std::max(worst, std::fabs(o - got[(h * L + q) * D + d]));
      }
    }
  // f16 P in the matrix kernels: a few 2^-11 of the values' magnitude (<= 1).
  check(worst <= 4e-3, "out matches the C++ version of the variant's mods");
  std::printf("consumer_variant: %s: custom variant 'consumer_checker' built a mask on the device and ran; max error %.2g\n",
              ctx.capabilities().device_name.c_str(), worst);
}
