// Capability detection: what the device offers each path.
#include <vkattn/capabilities.hpp>
#include <vkattn/error.hpp>

#include <algorithm>
#include <thread>

#include "context_impl.hpp"

namespace vkattn {

std::string_view path_name(Path p) {
  switch (p) {
    case Path::scalar: return "scalar";
    case Path::coopmat: return "coopmat";
    case Path::coopmat2: return "coopmat2";
  }
  return "unknown";
}

Path parse_path(std::string_view name) {
  for (Path p : {Path::scalar, Path::coopmat, Path::coopmat2})
    if (path_name(p) == name) return p;
  throw Error("unknown path '" + std::string(name) + "': expected scalar, coopmat or coopmat2");
}

std::string Capabilities::missing_for(Path p) const {
  switch (p) {
    case Path::scalar: return "";
    case Path::coopmat:
      return coopmat ? "" : "VK_KHR_cooperative_matrix with a 16x16x16 f16 x f16 -> f32 subgroup shape";
    case Path::coopmat2: {
      if (coopmat2) return "";
      std::string m = "VK_NV_cooperative_matrix2";
      if (!coopmat) m += " (and VK_KHR_cooperative_matrix)";
      return m + " with workgroup scope, flexible dimensions, reductions, conversions, per-element operations, tensor addressing and block loads";
    }
  }
  return "an unknown path";
}

bool Capabilities::has_subgroup_shape(uint32_t m, uint32_t n, uint32_t k, std::string_view type) const {
  for (const CoopMatShape& s : coopmat_shapes)
    if (s.m == m && s.n == n && s.k == k && s.a_type == type && s.b_type == type && s.c_type == "f32" &&
        s.result_type == "f32" && s.scope == "subgroup")
      return true;
  return false;
}

namespace detail {

namespace {

std::string component_name(VkComponentTypeKHR t) {
  switch (static_cast<int>(t)) {
    case VK_COMPONENT_TYPE_FLOAT16_KHR: return "f16";
    case VK_COMPONENT_TYPE_FLOAT32_KHR: return "f32";
    case VK_COMPONENT_TYPE_FLOAT64_KHR: return "f64";
    case VK_COMPONENT_TYPE_SINT8_KHR: return "i8";
    case VK_COMPONENT_TYPE_SINT16_KHR: return "i16";
    case VK_COMPONENT_TYPE_SINT32_KHR: return "i32";
    case VK_COMPONENT_TYPE_SINT64_KHR: return "i64";
    case VK_COMPONENT_TYPE_UINT8_KHR: return "u8";
    case VK_COMPONENT_TYPE_UINT16_KHR: return "u16";
    case VK_COMPONENT_TYPE_UINT32_KHR: return "u32";
    case VK_COMPONENT_TYPE_UINT64_KHR: return "u64";
    case 1000141000: return "bf16";           // VK_COMPONENT_TYPE_BFLOAT16_KHR
    case 1000491002: return "fp8_e4m3";       // VK_COMPONENT_TYPE_FLOAT8_E4M3_EXT
    case 1000491003: return "fp8_e5m2";       // VK_COMPONENT_TYPE_FLOAT8_E5M2_EXT
    default: return "type" + std::to_string(static_cast<int>(t));
  }
}

std::string scope_name(VkScopeKHR s) {
  switch (s) {
    case VK_SCOPE_SUBGROUP_KHR: return "subgroup";
    case VK_SCOPE_WORKGROUP_KHR: return "workgroup";
    case VK_SCOPE_DEVICE_KHR: return "device";
    case VK_SCOPE_QUEUE_FAMILY_KHR: return "queue family";
    default: return "scope" + std::to_string(static_cast<int>(s));
  }
}

std::string device_type_name(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "CPU";
    default: return "other";
  }
}

}  // namespace

void query_capabilities(ContextImpl& impl, const std::vector<std::string>& exts) {
  auto has = [&](std::string_view e) { return std::find(exts.begin(), exts.end(), e) != exts.end(); };
  const bool km = has(VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME);
  const bool nm2 = has(VK_NV_COOPERATIVE_MATRIX_2_EXTENSION_NAME);
  const bool bf = has(VK_KHR_SHADER_BFLOAT16_EXTENSION_NAME);
  const bool sm = has(VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME);
  const bool amd_cores = has(VK_AMD_SHADER_CORE_PROPERTIES_EXTENSION_NAME);
  const bool arm_cores = has(VK_ARM_SHADER_CORE_BUILTINS_EXTENSION_NAME);
  const bool budget = has(VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
  VkPhysicalDevice pd = impl.physical_device;
  Capabilities& c = impl.caps;

  VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  VkPhysicalDeviceVulkan11Properties p11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES};
  VkPhysicalDeviceVulkan12Properties p12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_PROPERTIES};
  VkPhysicalDeviceVulkan13Properties p13{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES};
  VkPhysicalDeviceCooperativeMatrix2PropertiesNV pm2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_PROPERTIES_NV};
  VkPhysicalDeviceShaderSMBuiltinsPropertiesNV psm{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV};
  VkPhysicalDeviceShaderCorePropertiesAMD pamd{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CORE_PROPERTIES_AMD};
  VkPhysicalDeviceShaderCoreBuiltinsPropertiesARM parm{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CORE_BUILTINS_PROPERTIES_ARM};
  p2.pNext = &p11;
  p11.pNext = &p12;
  p12.pNext = &p13;
  void** tail = &p13.pNext;
  if (nm2) { *tail = &pm2; tail = &pm2.pNext; }
  if (sm) { *tail = &psm; tail = &psm.pNext; }
  if (amd_cores) { *tail = &pamd; tail = &pamd.pNext; }
  if (arm_cores) { *tail = &parm; tail = &parm.pNext; }
  impl.vk.vkGetPhysicalDeviceProperties2(pd, &p2);
  const auto& l = p2.properties.limits;

  c.device_name = p2.properties.deviceName;
  c.device_type = device_type_name(p2.properties.deviceType);
  c.driver_name = p12.driverName;
  c.driver_info = p12.driverInfo;
  c.vendor_id = p2.properties.vendorID;
  c.device_id = p2.properties.deviceID;
  c.api_version = p2.properties.apiVersion;
  c.driver_version = p2.properties.driverVersion;
  uint32_t iv = VK_API_VERSION_1_0;
  if (impl.vk.vkEnumerateInstanceVersion) impl.vk.vkEnumerateInstanceVersion(&iv);
  c.instance_api_version = iv;
  c.subgroup_size = p11.subgroupSize;
  c.min_subgroup_size = p13.minSubgroupSize;
  c.max_subgroup_size = p13.maxSubgroupSize;
  c.max_shared_memory = l.maxComputeSharedMemorySize;
  c.max_workgroup_invocations = l.maxComputeWorkGroupInvocations;
  for (int i = 0; i < 3; ++i) c.max_workgroup_count[i] = l.maxComputeWorkGroupCount[i];
  c.max_push_constants_size = l.maxPushConstantsSize;
  c.max_storage_buffer_range = l.maxStorageBufferRange;
  c.max_memory_allocation_size = p11.maxMemoryAllocationSize;
  c.max_buffer_size = p13.maxBufferSize ? p13.maxBufferSize : p11.maxMemoryAllocationSize;
  c.min_storage_buffer_offset_alignment = l.minStorageBufferOffsetAlignment;
  c.multiprocessor_count = sm ? psm.shaderSMCount
                         : amd_cores ? pamd.shaderEngineCount * pamd.shaderArraysPerEngineCount * pamd.computeUnitsPerShaderArray
                         : arm_cores ? parm.shaderCoreCount
                                     : 0;
  c.scheduling_multiprocessors = c.multiprocessor_count;
  if (!c.scheduling_multiprocessors) {
    // The device does not say. A CPU device runs a workgroup per thread; for
    // GPUs, a count in the range of today's parts (which only sizes split-KV).
    const auto type = p2.properties.deviceType;
    c.scheduling_multiprocessors = type == VK_PHYSICAL_DEVICE_TYPE_CPU ? std::max(1u, std::thread::hardware_concurrency())
                                   : type == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU ? 8u
                                                                                    : 32u;
  }

  VkPhysicalDeviceMemoryProperties2 mp2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2};
  VkPhysicalDeviceMemoryBudgetPropertiesEXT mb{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
  if (budget) mp2.pNext = &mb;
  impl.vk.vkGetPhysicalDeviceMemoryProperties2(pd, &mp2);
  impl.memory = mp2.memoryProperties;
  c.device_local_bytes = 0;
  c.device_local_budget_bytes = 0;
  for (uint32_t i = 0; i < impl.memory.memoryHeapCount; ++i)
    if (impl.memory.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) {
      c.device_local_bytes = std::max<uint64_t>(c.device_local_bytes, impl.memory.memoryHeaps[i].size);
      const uint64_t b = budget ? mb.heapBudget[i] : impl.memory.memoryHeaps[i].size;
      c.device_local_budget_bytes = std::max<uint64_t>(c.device_local_budget_bytes, b);
    }

  const std::vector<VkQueueFamilyProperties> fams = queue_families(impl.vk, pd);
  c.timestamp_period_ns = (impl.queue_family < fams.size() && fams[impl.queue_family].timestampValidBits > 0) ? l.timestampPeriod : 0.0f;

  DeviceFeatureChain f;
  f.link(km, nm2, bf, false);
  impl.vk.vkGetPhysicalDeviceFeatures2(pd, &f.core);
  if (!impl.owns_device) {
    // An adopted device: only what the application enabled counts, and with
    // no chain given, none of the optional features.
    const DeviceFeatureChain none;
    const DeviceFeatureChain& on = impl.adopted_features ? *impl.adopted_features : none;
    auto both = [](VkBool32& have, VkBool32 enabled) { have = have && enabled; };
    both(f.v13.subgroupSizeControl, on.v13.subgroupSizeControl);
    both(f.v13.computeFullSubgroups, on.v13.computeFullSubgroups);
    both(f.coopmat.cooperativeMatrix, on.coopmat.cooperativeMatrix);
    both(f.coopmat2.cooperativeMatrixWorkgroupScope, on.coopmat2.cooperativeMatrixWorkgroupScope);
    both(f.coopmat2.cooperativeMatrixFlexibleDimensions, on.coopmat2.cooperativeMatrixFlexibleDimensions);
    both(f.coopmat2.cooperativeMatrixReductions, on.coopmat2.cooperativeMatrixReductions);
    both(f.coopmat2.cooperativeMatrixConversions, on.coopmat2.cooperativeMatrixConversions);
    both(f.coopmat2.cooperativeMatrixPerElementOperations, on.coopmat2.cooperativeMatrixPerElementOperations);
    both(f.coopmat2.cooperativeMatrixTensorAddressing, on.coopmat2.cooperativeMatrixTensorAddressing);
    both(f.coopmat2.cooperativeMatrixBlockLoads, on.coopmat2.cooperativeMatrixBlockLoads);
    both(f.bf16.shaderBFloat16Type, on.bf16.shaderBFloat16Type);
    both(f.bf16.shaderBFloat16CooperativeMatrix, on.bf16.shaderBFloat16CooperativeMatrix);
  }
  c.float16 = f.v12.shaderFloat16;
  c.int8 = f.v12.shaderInt8;
  c.int64 = f.core.features.shaderInt64;
  c.storage_16bit = f.v11.storageBuffer16BitAccess;
  c.storage_8bit = f.v12.storageBuffer8BitAccess;
  c.buffer_device_address = f.v12.bufferDeviceAddress;
  c.memory_model = f.v12.vulkanMemoryModel;
  c.subgroup_size_control = f.v13.subgroupSizeControl && f.v13.computeFullSubgroups &&
                            (p13.requiredSubgroupSizeStages & VK_SHADER_STAGE_COMPUTE_BIT);
  c.bfloat16 = bf && f.bf16.shaderBFloat16Type;
  c.push_descriptors = has(VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);

  c.coopmat_shapes.clear();
  bool f16_16x16x16 = false;
  if (km && f.coopmat.cooperativeMatrix) {
    uint32_t n = 0;
    impl.vk.vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR(pd, &n, nullptr);
    std::vector<VkCooperativeMatrixPropertiesKHR> props(n, {VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR});
    impl.vk.vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR(pd, &n, props.data());
    for (const auto& p : props) {
      c.coopmat_shapes.push_back({p.MSize, p.NSize, p.KSize, component_name(p.AType), component_name(p.BType),
                                  component_name(p.CType), component_name(p.ResultType), scope_name(p.scope),
                                  p.saturatingAccumulation == VK_TRUE, 0});
      if (p.MSize == 16 && p.NSize == 16 && p.KSize == 16 && p.AType == VK_COMPONENT_TYPE_FLOAT16_KHR &&
          p.BType == VK_COMPONENT_TYPE_FLOAT16_KHR && p.CType == VK_COMPONENT_TYPE_FLOAT32_KHR &&
          p.scope == VK_SCOPE_SUBGROUP_KHR)
        f16_16x16x16 = true;
    }
  }
  c.coopmat = f16_16x16x16 && c.memory_model;
  c.bf16_matrices = c.coopmat && bf && f.bf16.shaderBFloat16CooperativeMatrix && c.has_subgroup_shape(16, 16, 16, "bf16");

  c.coopmat2_features.clear();
  c.coopmat2_flexible_shapes.clear();
  if (nm2) {
    const auto& m = f.coopmat2;
    std::pair<VkBool32, const char*> feats[] = {
        {m.cooperativeMatrixWorkgroupScope, "workgroup scope"}, {m.cooperativeMatrixFlexibleDimensions, "flexible dimensions"},
        {m.cooperativeMatrixReductions, "reductions"}, {m.cooperativeMatrixConversions, "conversions"},
        {m.cooperativeMatrixPerElementOperations, "per-element operations"},
        {m.cooperativeMatrixTensorAddressing, "tensor addressing"}, {m.cooperativeMatrixBlockLoads, "block loads"}};
    bool all = true;
    for (auto& [on, name] : feats) {
      if (on) c.coopmat2_features.emplace_back(name);
      all = all && on;
    }
    c.coopmat2 = all && c.coopmat;
    c.coopmat2_workgroup_scope_max_invocations = pm2.cooperativeMatrixWorkgroupScopeMaxWorkgroupSize;
    c.coopmat2_flexible_max_dimension = pm2.cooperativeMatrixFlexibleDimensionsMaxDimension;
    c.coopmat2_reserved_shared_memory = pm2.cooperativeMatrixWorkgroupScopeReservedSharedMemory;
    if (m.cooperativeMatrixFlexibleDimensions && impl.vk.vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV) {
      uint32_t n = 0;
      impl.vk.vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV(pd, &n, nullptr);
      std::vector<VkCooperativeMatrixFlexibleDimensionsPropertiesNV> props(
          n, {VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_FLEXIBLE_DIMENSIONS_PROPERTIES_NV});
      impl.vk.vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV(pd, &n, props.data());
      for (const auto& p : props)
        c.coopmat2_flexible_shapes.push_back({p.MGranularity, p.NGranularity, p.KGranularity, component_name(p.AType),
                                              component_name(p.BType), component_name(p.CType),
                                              component_name(p.ResultType), scope_name(p.scope),
                                              p.saturatingAccumulation == VK_TRUE, p.workgroupInvocations});
    }
  } else {
    c.coopmat2 = false;
  }

  c.paths.clear();
  if (c.coopmat2) c.paths.push_back(Path::coopmat2);
  if (c.coopmat) c.paths.push_back(Path::coopmat);
  c.paths.push_back(Path::scalar);
}

}  // namespace detail
}  // namespace vkattn
