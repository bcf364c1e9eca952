#include "bench/ceilings.hpp"

#include <vkattn/vkattn.hpp>
#include <vkattn_ref/random.hpp>
#include <vkattn_ref/number_formats.hpp>

#include <cmath>
#include <memory>

#include "context_impl.hpp"
#include "dispatch.hpp"
#include "gpu_timer.hpp"

namespace vkattn::tool {

namespace {

constexpr uint64_t kFillBytes = 256;

// Copy `bytes` (a large, cache-cold buffer); verified on a small copy of random words.
BenchOp copy_op(Context& ctx, uint64_t bytes) {
  auto src = std::make_shared<Buffer>(ctx, bytes);
  auto dst = std::make_shared<Buffer>(ctx, bytes);
  src->fill(0x3C003C00u);
  BenchOp op;
  op.info.name = "copy " + std::to_string(bytes >> 20) + " MiB";
  op.info.params = {{"bytes", std::to_string(bytes)}};
  op.info.bytes = 2.0 * double(bytes);   // read + written
  op.info.bound = "memory";
  op.record = [&ctx, src, dst, bytes](VkCommandBuffer cmd, uint32_t) { bench::copy(ctx, *src, *dst, bytes, cmd); };
  op.verify = [&ctx]() {
    const uint64_t n = (1u << 20) + 48;   // 1 MiB plus a partial workgroup
    std::vector<uint32_t> words(n / 4);
    ref::Rng rng(42);
    for (auto& w : words) w = static_cast<uint32_t>(rng.next());
    Buffer s(ctx, n), d(ctx, n + 64);
    s.upload(words.data(), n);
    d.fill(0xFFFFFFFFu);
    ctx.submit_and_wait([&](VkCommandBuffer cmd) { bench::copy(ctx, s, d, n, cmd); });
    auto got = d.download_as<uint32_t>((n + 64) / 4);
    Verification v;
    v.pass = std::equal(words.begin(), words.end(), got.begin()) && got.back() == 0xFFFFFFFFu;
    if (!v.pass) v.failure = "the copied words differ from the source, or the copy wrote past its end";
    return v;
  };
  return op;
}

// The fixed cost of a dispatch as the suites time it (barrier, timestamps, one
// small copy of one workgroup), and of two where the second reads what the
// first wrote, after a compute barrier (as split-KV's reduce follows the
// attention kernel): the floor under latency-bound cases such as decode of one
// sequence. With `fill`, a vkCmdFillBuffer of 256 bytes of the first buffer
// comes first, and the dispatch reads it after a transfer-to-compute barrier:
// what a kernel that needs zeroed counters (a reduce fused into the attention
// kernel) would pay in place of a second dispatch.
BenchOp dispatch_op(Context& ctx, uint32_t dispatches, bool fill = false) {
  constexpr uint64_t bytes = 4096;
  auto bufs = std::make_shared<std::vector<Buffer>>();
  for (uint32_t i = 0; i <= dispatches; ++i) bufs->emplace_back(ctx, bytes);
  BenchOp op;
  op.info.name = fill ? "fill + dispatch" : dispatches == 1 ? "dispatch" : std::to_string(dispatches) + " dependent dispatches";
  op.info.params = {{"dispatches", std::to_string(dispatches)}, {"bytes", std::to_string(bytes)}, {"fill", fill ? std::to_string(kFillBytes) : "0"}};
  op.info.bound = "latency";
  op.record = [&ctx, bufs, dispatches, fill](VkCommandBuffer cmd, uint32_t) {
    if (fill) {
      ctx.impl().vk.vkCmdFillBuffer(cmd, (*bufs)[0].handle(), 0, kFillBytes, 0u);
      detail::transfer_to_compute_barrier(ctx.impl(), cmd);
    }
    for (uint32_t i = 0; i < dispatches; ++i) {
      if (i) detail::compute_barrier(ctx.impl(), cmd);   // the barrier the ops record before their reduce
      bench::copy(ctx, (*bufs)[i], (*bufs)[i + 1], bytes, cmd);
    }
  };
  // The last buffer ends up holding the first's words (the filled ones zero).
  op.verify = [&ctx, bufs, dispatches, fill, record = op.record]() {
    std::vector<uint32_t> words(bytes / 4);
    ref::Rng rng(5);
    for (auto& w : words) w = static_cast<uint32_t>(rng.next());
    (*bufs)[0].upload(words.data(), bytes);
    if (fill) std::fill(words.begin(), words.begin() + kFillBytes / 4, 0u);
    for (uint32_t i = 1; i <= dispatches; ++i) (*bufs)[i].fill(0xFFFFFFFFu);
    ctx.submit_and_wait([&](VkCommandBuffer cmd) { record(cmd, 0); });
    Verification v;
    v.pass = (*bufs)[dispatches].download_as<uint32_t>(bytes / 4) == words;
    if (!v.pass) v.failure = "the last copy's words differ from the first buffer's";
    return v;
  };
  return op;
}

// Random A, B with entries in {-1, 0, 1}; the expected C of `iterations` multiply-adds.
// element: f16, or bf16 (matrix paths): the values are small integers, exact in both.
BenchOp matmul_op(Context& ctx, Path path, uint32_t workgroups, uint32_t iterations, DType element) {
  const auto layout = bench::matmul_peak_layout(ctx, path);
  const bool bf16 = element == DType::bf16;
  auto encode = [bf16](double x) { return bf16 ? ref::bf16_from_double(x) : ref::f16_from_double(x); };
  auto decode = [bf16](uint16_t x) { return bf16 ? ref::bf16_to_double(x) : ref::f16_to_double(x); };
  auto make_inputs = [layout, path, encode](ref::Rng& rng, std::vector<uint16_t>& a, std::vector<uint16_t>& b) {
    a.resize(layout.a_elems);
    b.resize(layout.b_elems);
    if (path == Path::scalar) {
      // x * y = 1 in every lane: (1, 2, 0.5, 4) * (1, 0.5, 2, 0.25)
      const double x[4] = {1, 2, 0.5, 4}, y[4] = {1, 0.5, 2, 0.25};
      for (int i = 0; i < 4; ++i) { a[i] = ref::f16_from_double(x[i]); b[i] = ref::f16_from_double(y[i]); }
      return;
    }
    for (auto& v : a) v = encode(double(int(rng.below(3)) - 1));
    for (auto& v : b) v = encode(double(int(rng.below(3)) - 1));
  };
  auto ab = std::make_shared<std::pair<Buffer, Buffer>>(Buffer(ctx, layout.a_elems * 2), Buffer(ctx, layout.b_elems * 2));
  {
    ref::Rng rng(7);
    std::vector<uint16_t> a, b;
    make_inputs(rng, a, b);
    ab->first.upload(a.data(), a.size() * 2);
    ab->second.upload(b.data(), b.size() * 2);
  }
  auto c = std::make_shared<Buffer>(ctx, layout.c_elems_per_workgroup * 4 * workgroups);
  BenchOp op;
  op.info.name = std::string(dtype_name(element)) + " matrix peak (" + std::string(path_name(path)) + ")";
  op.info.params = {{"path", std::string(path_name(path))}, {"dtype", std::string(dtype_name(element))}, {"workgroups", std::to_string(workgroups)},
                    {"iterations", std::to_string(iterations)}};
  op.info.flops = layout.flops_per_workgroup_iteration * workgroups * iterations;
  op.info.bound = "compute";
  op.record = [&ctx, path, ab, c, workgroups, iterations, element](VkCommandBuffer cmd, uint32_t) {
    bench::matmul_peak(ctx, path, ab->first, ab->second, *c, workgroups, iterations, cmd, element);
  };
  op.verify = [&ctx, path, layout, make_inputs, decode, element]() {
    const uint32_t wgs = 3, iters = std::min<uint32_t>(37, layout.max_exact_iterations);
    ref::Rng rng(11);
    std::vector<uint16_t> a, b;
    make_inputs(rng, a, b);
    Buffer ba(ctx, a.size() * 2), bb(ctx, b.size() * 2), bc(ctx, layout.c_elems_per_workgroup * 4 * wgs);
    ba.upload(a.data(), a.size() * 2);
    bb.upload(b.data(), b.size() * 2);
    bc.fill(0x7FC00000u);   // NaN poison
    ctx.submit_and_wait([&](VkCommandBuffer cmd) { bench::matmul_peak(ctx, path, ba, bb, bc, wgs, iters, cmd, element); });
    auto got = bc.download_as<float>(layout.c_elems_per_workgroup * wgs);
    std::vector<double> expect(layout.c_elems_per_workgroup);
    if (path == Path::scalar) {
      const double sign[4] = {1, -1, -1, 1};
      for (size_t i = 0; i < expect.size(); ++i) expect[i] = sign[i % 4] * 4.0 * iters;
    } else {
      // One tile: M x N = c_elems / (tiles per workgroup); every tile is A x B (M x K times K x N).
      const uint32_t K = 16, M = layout.a_elems / K, N = layout.b_elems / K;
      std::vector<double> tile(size_t(M) * N, 0.0);
      for (uint32_t i = 0; i < M; ++i)
        for (uint32_t j = 0; j < N; ++j)
          for (uint32_t k = 0; k < K; ++k) tile[i * N + j] += decode(a[i * K + k]) * decode(b[k * N + j]);
      for (size_t i = 0; i < expect.size(); ++i) expect[i] = iters * tile[i % tile.size()];
    }
    Verification v;
    v.pass = true;
    for (size_t i = 0; i < got.size(); ++i) {
      double e = expect[i % expect.size()];
      double err = std::fabs(double(got[i]) - e);
      v.max_abs_err = std::max(v.max_abs_err, std::isnan(got[i]) ? INFINITY : err);
      if (!(err == 0.0) && v.pass) {   // integers throughout: exact
        v.pass = false;
        v.failure = "c[" + std::to_string(i) + "] = " + std::to_string(got[i]) + ", expected " + std::to_string(e);
      }
    }
    return v;
  };
  return op;
}

}  // namespace

std::vector<BenchOp> ceiling_ops(Context& ctx, bool quick) {
  const auto& caps = ctx.capabilities();
  const bool cpu = caps.device_type == "CPU";
  const uint32_t sms = caps.multiprocessor_count ? caps.multiprocessor_count : 8;
  uint64_t copy_bytes = cpu || quick ? (32ull << 20) : (1ull << 30);
  copy_bytes = std::min<uint64_t>(copy_bytes, caps.max_storage_buffer_range & ~uint64_t(0xFFFF));
  std::vector<BenchOp> ops;
  ops.push_back(copy_op(ctx, copy_bytes));
  const Path path = ctx.path_for("bench_matmul_peak");
  const auto layout = bench::matmul_peak_layout(ctx, path);
  // Enough workgroups to fill every multiprocessor several times; enough
  // iterations that each launch runs for about a millisecond on a big GPU.
  uint32_t workgroups = cpu || quick ? 16 : sms * (path == Path::scalar ? 16 : 8);
  uint32_t iterations = path == Path::scalar ? layout.max_exact_iterations : (cpu || quick ? 64 : 2048);
  ops.push_back(matmul_op(ctx, path, workgroups, iterations, DType::f16));
  if (path != Path::scalar && caps.bf16_matrices) ops.push_back(matmul_op(ctx, path, workgroups, iterations, DType::bf16));
  ops.push_back(dispatch_op(ctx, 1));
  ops.push_back(dispatch_op(ctx, 2));
  ops.push_back(dispatch_op(ctx, 1, true));
  return ops;
}

void spin_up(Context& ctx, bool quick) {
  const Path path = ctx.path_for("bench_matmul_peak");
  const auto layout = bench::matmul_peak_layout(ctx, path);
  const auto& caps = ctx.capabilities();
  const uint32_t wgs = quick || caps.device_type == "CPU" ? 4 : std::max(1u, caps.multiprocessor_count) * 8;
  const uint32_t iters = std::min<uint32_t>(layout.max_exact_iterations, quick ? 16 : 2048);
  Buffer a(ctx, layout.a_elems * 2), b(ctx, layout.b_elems * 2), c(ctx, layout.c_elems_per_workgroup * 4 * wgs);
  a.fill(0);
  b.fill(0);
  GpuTimer timer(ctx);
  double us = 0;
  for (int i = 0; i < 64 && us < (quick ? 1e3 : 3e5); ++i)
    for (double x : timer.time_us([&](VkCommandBuffer cmd, uint32_t) { bench::matmul_peak(ctx, path, a, b, c, wgs, iters, cmd); }, 16))
      us += x;
}

void absorb_ceiling(report::Ceilings& ceilings, const report::BenchCase& c) {
  const auto s = report::stats_of(c, ceilings);
  if (c.params.count("path") == 0 && c.bound == "memory" && c.name.rfind("copy", 0) == 0) ceilings.copy_gbps = s.gbps;
  if (c.bound == "compute" && c.name.find("matrix peak") != std::string::npos) {
    (c.params.at("dtype") == "bf16" ? ceilings.bf16_tflops : ceilings.f16_tflops) = s.tflops;
    ceilings.matrix_path = c.params.at("path");
  }
  if (c.bound == "latency") {
    const auto fill = c.params.find("fill");
    if (fill != c.params.end() && fill->second != "0") ceilings.fill_dispatch_us = s.median_us;
    else if (c.params.at("dispatches") == "1") ceilings.dispatch_us = s.median_us;
    else ceilings.dependent_dispatches_us = s.median_us;
  }
}

}  // namespace vkattn::tool
