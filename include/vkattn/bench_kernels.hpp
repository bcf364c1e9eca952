// Kernels that measure the device's ceilings, for `vkattn bench ceilings` and
// for applications that want the same figures. Recorded only: no synchronous form.
#pragma once
#include <vkattn/buffer.hpp>
#include <vkattn/capabilities.hpp>
#include <vkattn/dtype.hpp>

#include <cstdint>

namespace vkattn {

class Context;

namespace bench {

// dst[0, bytes) = src[0, bytes) with 16-byte loads and stores; bytes a multiple of 16.
void copy(Context& ctx, BufferRef src, BufferRef dst, VkDeviceSize bytes, VkCommandBuffer cmd);

// Shape of the matrix-peak kernel on a path.
struct MatmulPeakLayout {
  uint32_t workgroup_size = 0;
  uint32_t a_elems = 0, b_elems = 0;        // 16-bit inputs every workgroup reads once
  uint64_t c_elems_per_workgroup = 0;       // f32 outputs
  double flops_per_workgroup_iteration = 0;
  uint32_t max_exact_iterations = 0;        // iterations for which the result is exact (for checking)
};
MatmulPeakLayout matmul_peak_layout(const Context& ctx, Path path);

// `workgroups` workgroups each run `iterations` multiply-adds on the path's
// matrix unit (`element` inputs: f16, or bf16 on a matrix path of a device
// with Capabilities::bf16_matrices; f32 accumulation) with no memory traffic
// in the loop.
//   coopmat2 / coopmat: c[w] = iterations * (A x B) per workgroup tile
//   scalar: f16vec4 FMA chains; c[4i + j] = (+, -, -, +)[j] * 4 * iterations * x*y
void matmul_peak(Context& ctx, Path path, BufferRef a, BufferRef b, BufferRef c, uint32_t workgroups,
                 uint32_t iterations, VkCommandBuffer cmd, DType element = DType::f16);

}  // namespace bench
}  // namespace vkattn
