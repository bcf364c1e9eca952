// What the device can do, as the kernels see it: the capability report.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace vkattn {

// The three implementations every attention kernel has.
enum class Path : uint32_t { scalar = 0, coopmat = 1, coopmat2 = 2 };
std::string_view path_name(Path p);
Path parse_path(std::string_view name);   // throws vkattn::Error on an unknown name

struct CoopMatShape {
  uint32_t m = 0, n = 0, k = 0;
  std::string a_type, b_type, c_type, result_type;
  std::string scope;       // "subgroup" or "workgroup"
  bool saturating = false;
  uint32_t workgroup_invocations = 0;   // flexible-dimension (coopmat2) shapes only
};

struct Capabilities {
  std::string device_name, device_type, driver_name, driver_info;
  uint32_t vendor_id = 0, device_id = 0;
  uint32_t api_version = 0, driver_version = 0;
  uint32_t instance_api_version = 0;

  uint32_t subgroup_size = 0, min_subgroup_size = 0, max_subgroup_size = 0;
  bool subgroup_size_control = false;
  uint32_t max_shared_memory = 0;
  uint32_t max_workgroup_invocations = 0;
  uint32_t max_workgroup_count[3] = {0, 0, 0};
  uint32_t max_push_constants_size = 0;
  uint64_t max_storage_buffer_range = 0;
  uint64_t max_memory_allocation_size = 0;
  uint64_t max_buffer_size = 0;
  uint64_t min_storage_buffer_offset_alignment = 0;
  uint64_t device_local_bytes = 0;
  uint64_t device_local_budget_bytes = 0;   // what the largest device-local heap has left (VK_EXT_memory_budget, else its size)
  // As the device reports them (VK_NV_shader_sm_builtins, VK_AMD_shader_core_properties,
  // VK_ARM_shader_core_builtins); 0 when it does not say.
  uint32_t multiprocessor_count = 0;
  // What plans assume when they size split-KV work: multiprocessor_count, or
  // where the device does not say, the CPU's threads for a CPU device, 8 for
  // an integrated GPU and 32 otherwise.
  uint32_t scheduling_multiprocessors = 0;
  float timestamp_period_ns = 0;       // 0 when compute queues lack timestamps

  bool float16 = false, bfloat16 = false, int8 = false, int64 = false;
  bool storage_16bit = false, storage_8bit = false;
  bool buffer_device_address = false, push_descriptors = false, memory_model = false;

  bool coopmat = false;                 // VK_KHR_cooperative_matrix, with the f16 16x16x16 shape
  // The bf16 16x16x16 shape (f32 accumulation) too, with VK_KHR_shader_bfloat16's
  // cooperative matrices: the matrix paths then take bf16 inputs.
  bool bf16_matrices = false;
  // Whether a lane's elements of a 16 x 16 f16 matrix (and bf16 matrix, with
  // bf16_matrices) lie in the order the decode kernel builds fp8 caches' K
  // and V matrices in, in registers, and those of a 16 x 16 f32 accumulator
  // in the same positions, where the prefill kernel's softmax in registers
  // takes them (shaders/include/abi/matrix_element_order.h). The order is the
  // implementation's: the Context probes it once when it is set up, with a
  // dispatch on its queue (none without a queue: then false, fp8 K/V tiles
  // go through shared memory as on other devices, and the prefill kernel
  // runs its KHR module, with S and P through shared memory and 4 subgroups
  // per workgroup rather than 8, on either matrix path).
  bool coopmat_register_order = false;
  std::vector<CoopMatShape> coopmat_shapes;
  bool coopmat2 = false;                // VK_NV_cooperative_matrix2 with every feature vkattn uses
  std::vector<std::string> coopmat2_features;   // the features present
  std::vector<CoopMatShape> coopmat2_flexible_shapes;
  uint32_t coopmat2_workgroup_scope_max_invocations = 0;
  uint32_t coopmat2_flexible_max_dimension = 0;
  uint32_t coopmat2_reserved_shared_memory = 0;

  std::vector<Path> paths;              // paths this device can run, best first
  std::string missing_for(Path p) const;    // "" when p is available, else what the device lacks
  // Whether the device lists the subgroup-scope shape m x n x k of `type`
  // ("f16" or "bf16") inputs with f32 accumulation.
  bool has_subgroup_shape(uint32_t m, uint32_t n, uint32_t k, std::string_view type) const;
};

}  // namespace vkattn
