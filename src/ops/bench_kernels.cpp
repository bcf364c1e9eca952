// Dispatch of the ceiling kernels (shaders/bench_copy.comp, shaders/bench_matmul_peak.comp).
#include <vkattn/bench_kernels.hpp>
#include <vkattn/context.hpp>
#include <vkattn/error.hpp>

#define VKATTN_BENCH_COPY
#define VKATTN_BENCH_MATMUL
#include "abi/bench.h"
#include "../context_impl.hpp"
#include "../dispatch.hpp"
#include "../op_support.hpp"

namespace vkattn::bench {

using namespace vkattn::detail;

void copy(Context& ctx, BufferRef src, BufferRef dst, VkDeviceSize bytes, VkCommandBuffer cmd) {
  auto& impl = ctx.impl();
  if (bytes % 16 || bytes == 0) throw Error("bench::copy: bytes = " + std::to_string(bytes) + ", expected a positive multiple of 16");
  if (bytes > src.size || bytes > dst.size)
    throw Error("bench::copy: " + std::to_string(bytes) + " bytes exceed the buffers (" + std::to_string(src.size) + ", " +
                std::to_string(dst.size) + ")");
  if (bytes > impl.caps.max_storage_buffer_range || bytes / 16 > UINT32_MAX)
    throw Error("bench::copy: " + std::to_string(bytes) + " bytes exceed maxStorageBufferRange");
  abi::BenchCopySpec spec;
  const Pipeline& p = impl.pipelines->get({"bench_copy", ctx.path_for("bench_copy"), spec_words(spec), 3, sizeof(abi::BenchCopyPush)});
  abi::BenchCopyPush push{};
  push.num_vec4 = static_cast<uint32_t>(bytes / 16);
  Grid g = fold_grid(impl, (uint64_t(push.num_vec4) + spec.COPY_WORKGROUP_SIZE * 4 - 1) / (spec.COPY_WORKGROUP_SIZE * 4), "bench::copy");
  push.grid_x = g.x;
  const BufferBinding b[] = {{src.buffer, 0, bytes}, {dst.buffer, 0, bytes}};
  record_dispatch(impl, cmd, p, b, &push, g, ReportingOp::bench);
}

MatmulPeakLayout matmul_peak_layout(const Context& ctx, Path path) {
  MatmulPeakLayout l;
  switch (path) {
    case Path::coopmat2:
      l.workgroup_size = 256;
      l.a_elems = 128 * 16;
      l.b_elems = 16 * 128;
      l.c_elems_per_workgroup = 128 * 128;
      l.flops_per_workgroup_iteration = 2.0 * 128 * 128 * 16;
      l.max_exact_iterations = 1u << 19;   // |A x B| <= 16 with entries in {-1, 0, 1}
      break;
    case Path::coopmat: {
      l.workgroup_size = 128;
      uint32_t subgroups = std::max(1u, 128 / std::max(1u, ctx.capabilities().subgroup_size));
      l.a_elems = l.b_elems = 16 * 16;
      l.c_elems_per_workgroup = uint64_t(subgroups) * 4 * 256;
      l.flops_per_workgroup_iteration = subgroups * 4 * 2.0 * 16 * 16 * 16;
      l.max_exact_iterations = 1u << 19;
      break;
    }
    case Path::scalar:
      l.workgroup_size = 256;
      l.a_elems = l.b_elems = 4;
      l.c_elems_per_workgroup = 256 * 4;
      l.flops_per_workgroup_iteration = 256 * 4 * 4 * 2.0;
      l.max_exact_iterations = 512;         // 4 * iterations stays an exact f16 integer (< 2048)
      break;
  }
  return l;
}

void matmul_peak(Context& ctx, Path path, BufferRef a, BufferRef b, BufferRef c, uint32_t workgroups,
                 uint32_t iterations, VkCommandBuffer cmd, DType element) {
  auto& impl = ctx.impl();
  std::string missing = impl.caps.missing_for(path);
  if (!missing.empty()) throw Error("bench::matmul_peak: path '" + std::string(path_name(path)) + "' needs " + missing);
  if (element != DType::f16 && element != DType::bf16)
    throw Error("bench::matmul_peak: element dtype " + std::string(dtype_name(element)) + ", expected f16 or bf16");
  const bool bf16 = element == DType::bf16;
  if (bf16 && (path == Path::scalar || !impl.caps.bf16_matrices))
    throw Error("bench::matmul_peak: bf16 needs a matrix path on a device with bf16 cooperative matrices (path '" +
                std::string(path_name(path)) + "', bf16 matrices " + (impl.caps.bf16_matrices ? "yes" : "no") + ")");
  MatmulPeakLayout l = matmul_peak_layout(ctx, path);
  if (a.size < l.a_elems * 2u || b.size < l.b_elems * 2u || c.size < l.c_elems_per_workgroup * 4 * workgroups)
    throw Error("bench::matmul_peak: buffers too small for " + std::to_string(workgroups) + " workgroups");
  abi::BenchMatmulSpec spec;
  spec.MM_WORKGROUP_SIZE = l.workgroup_size;
  const Pipeline& p =
      impl.pipelines->get({bf16 ? "bench_matmul_peak_bf16" : "bench_matmul_peak", path, spec_words(spec), 4, sizeof(abi::BenchMatmulPush)});
  if (workgroups == 0 || workgroups > impl.caps.max_workgroup_count[0])
    throw Error("bench::matmul_peak: workgroups = " + std::to_string(workgroups) + ", expected 1 to " +
                std::to_string(impl.caps.max_workgroup_count[0]));
  Grid g = fold_grid(impl, workgroups, "bench::matmul_peak");
  abi::BenchMatmulPush push{iterations, g.x};
  const BufferBinding bb[] = {{a.buffer, 0, a.size}, {b.buffer, 0, b.size}, {c.buffer, 0, l.c_elems_per_workgroup * 4 * workgroups}};
  record_dispatch(impl, cmd, p, bb, &push, g, ReportingOp::bench);
}

}  // namespace vkattn::bench
