#include <vkattn/capability_report.hpp>
#include <vkattn/context.hpp>
#include <vkattn/version.hpp>

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "json_writer.hpp"
#include "vk.hpp"

namespace vkattn {

namespace {

std::string version_text(uint32_t v) {
  return std::to_string(VK_API_VERSION_MAJOR(v)) + "." + std::to_string(VK_API_VERSION_MINOR(v)) + "." +
         std::to_string(VK_API_VERSION_PATCH(v));
}

std::string bytes_text(uint64_t b) {
  char buf[64];
  if (b >= (1ull << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", b / double(1ull << 30));
  else if (b >= (1ull << 20)) std::snprintf(buf, sizeof buf, "%.1f MiB", b / double(1ull << 20));
  else if (b >= 1024) std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
  else std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(b));
  return buf;
}

std::string shape_text(const CoopMatShape& s) {
  std::string t = std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k) + " " + s.a_type + "*" +
                  s.b_type + "+" + s.c_type + "->" + s.result_type + " (" + s.scope;
  if (s.workgroup_invocations) t += ", " + std::to_string(s.workgroup_invocations) + " invocations";
  if (s.saturating) t += ", saturating";
  return t + ")";
}

const char* yes(bool b) { return b ? "yes" : "no"; }

}  // namespace

std::string capability_report_text(const Context& ctx) {
  const Capabilities& c = ctx.capabilities();
  std::ostringstream o;
  o << "vkattn " << version_string << "\n"
    << "device            " << c.device_name << " (" << c.device_type << ", vendor 0x" << std::hex << c.vendor_id
    << ", device 0x" << c.device_id << std::dec << ")\n"
    << "driver            " << c.driver_name << " " << c.driver_info << "\n"
    << "Vulkan            device " << version_text(c.api_version) << ", instance " << version_text(c.instance_api_version) << "\n"
    << "subgroup size     " << c.subgroup_size << " (" << c.min_subgroup_size << ".." << c.max_subgroup_size
    << ", size control " << yes(c.subgroup_size_control) << ")\n"
    << "multiprocessors   " << (c.multiprocessor_count ? std::to_string(c.multiprocessor_count) : "unknown") << "\n"
    << "shared memory     " << bytes_text(c.max_shared_memory) << " per workgroup\n"
    << "device memory     " << bytes_text(c.device_local_bytes) << "\n"
    << "buffer limits     storage range " << bytes_text(c.max_storage_buffer_range) << ", allocation "
    << bytes_text(c.max_memory_allocation_size) << ", buffer " << bytes_text(c.max_buffer_size) << "\n"
    << "workgroups        " << c.max_workgroup_count[0] << " x " << c.max_workgroup_count[1] << " x "
    << c.max_workgroup_count[2] << ", " << c.max_workgroup_invocations << " invocations\n"
    << "timestamps        " << (c.timestamp_period_ns > 0 ? std::to_string(c.timestamp_period_ns) + " ns/tick" : std::string("no")) << "\n"
    << "types             fp16 " << yes(c.float16) << ", bf16 " << yes(c.bfloat16) << ", int8 " << yes(c.int8)
    << ", int64 " << yes(c.int64) << ", 16-bit storage " << yes(c.storage_16bit) << ", 8-bit storage "
    << yes(c.storage_8bit) << "\n"
    << "binding           push descriptors " << yes(c.push_descriptors) << ", buffer device address "
    << yes(c.buffer_device_address) << "\n"
    << "KHR coopmat       " << yes(c.coopmat) << ", bf16 matrices " << yes(c.bf16_matrices)
    << ", element order for register-built matrices " << yes(c.coopmat_register_order)
    << (c.coopmat_register_order ? " (fp8 decode tiles; the prefill kernel's softmax in registers)" : "") << "\n";
  for (const auto& s : c.coopmat_shapes) o << "                    " << shape_text(s) << "\n";
  o << "NV coopmat2       " << yes(c.coopmat2);
  if (!c.coopmat2_features.empty()) {
    o << " (";
    for (std::size_t i = 0; i < c.coopmat2_features.size(); ++i) o << (i ? ", " : "") << c.coopmat2_features[i];
    o << ")\n                    workgroup scope up to " << c.coopmat2_workgroup_scope_max_invocations
      << " invocations, flexible dimensions up to " << c.coopmat2_flexible_max_dimension << ", reserved shared memory "
      << bytes_text(c.coopmat2_reserved_shared_memory);
  }
  o << "\n";
  for (const auto& s : c.coopmat2_flexible_shapes) o << "                    " << shape_text(s) << "\n";
  o << "paths             ";
  for (std::size_t i = 0; i < c.paths.size(); ++i) o << (i ? ", " : "") << path_name(c.paths[i]);
  if (ctx.options().force_path) o << " (forced: " << path_name(*ctx.options().force_path) << ")";
  o << "\nkernels\n";
  for (const auto& [kernel, modules] : ctx.kernels()) {
    o << "  " << kernel << std::string(kernel.size() < 22 ? 22 - kernel.size() : 1, ' ');
    const std::string_view path = path_name(ctx.path_for(kernel));
    const bool bf16_module = kernel.ends_with("_bf16");
    if (std::find(modules.begin(), modules.end(), path) == modules.end() && modules != std::vector<std::string>{"universal"})
      o << "unused (no module for this device's paths)";
    else if (bf16_module && !c.bf16_matrices)
      o << "unused (the device multiplies no bf16 matrices)";
    else
      o << path;
    if (modules.size() == 1 && modules[0] == "universal") o << " (one module for every path: needs no cooperative matrices)";
    o << "\n";
  }
  return o.str();
}

std::string capability_report_json(const Context& ctx) {
  const Capabilities& c = ctx.capabilities();
  detail::JsonWriter j;
  j.begin_object();
  j.value("vkattn_version", version_string);
  j.begin_object("device")
      .value("name", c.device_name).value("type", c.device_type).value("vendor_id", c.vendor_id)
      .value("device_id", c.device_id).value("driver_name", c.driver_name).value("driver_info", c.driver_info)
      .value("api_version", version_text(c.api_version)).value("instance_api_version", version_text(c.instance_api_version))
      .value("multiprocessor_count", c.multiprocessor_count).value("device_local_bytes", c.device_local_bytes)
      .end_object();
  j.begin_object("limits")
      .value("subgroup_size", c.subgroup_size).value("min_subgroup_size", c.min_subgroup_size)
      .value("max_subgroup_size", c.max_subgroup_size).value("subgroup_size_control", c.subgroup_size_control)
      .value("max_shared_memory", c.max_shared_memory).value("max_storage_buffer_range", c.max_storage_buffer_range)
      .value("max_memory_allocation_size", c.max_memory_allocation_size).value("max_buffer_size", c.max_buffer_size)
      .value("max_workgroup_invocations", c.max_workgroup_invocations)
      .value("max_push_constants_size", c.max_push_constants_size)
      .value("timestamp_period_ns", double(c.timestamp_period_ns));
  j.begin_array("max_workgroup_count");
  for (uint32_t v : c.max_workgroup_count) j.value("", v);
  j.end_array().end_object();
  j.begin_object("features")
      .value("float16", c.float16).value("bfloat16", c.bfloat16).value("int8", c.int8).value("int64", c.int64)
      .value("storage_16bit", c.storage_16bit).value("storage_8bit", c.storage_8bit)
      .value("buffer_device_address", c.buffer_device_address).value("push_descriptors", c.push_descriptors)
      .value("memory_model", c.memory_model)
      .end_object();
  auto shapes = [&](std::string_view key, const std::vector<CoopMatShape>& v) {
    j.begin_array(key);
    for (const auto& s : v)
      j.begin_object().value("m", s.m).value("n", s.n).value("k", s.k).value("a", s.a_type).value("b", s.b_type)
          .value("c", s.c_type).value("result", s.result_type).value("scope", s.scope).value("saturating", s.saturating)
          .value("workgroup_invocations", s.workgroup_invocations).end_object();
    j.end_array();
  };
  j.begin_object("coopmat").value("available", c.coopmat).value("bf16_matrices", c.bf16_matrices)
      .value("register_order", c.coopmat_register_order);
  shapes("shapes", c.coopmat_shapes);
  j.end_object();
  j.begin_object("coopmat2").value("available", c.coopmat2);
  j.begin_array("features");
  for (const auto& f : c.coopmat2_features) j.value("", f);
  j.end_array();
  j.value("workgroup_scope_max_invocations", c.coopmat2_workgroup_scope_max_invocations)
      .value("flexible_max_dimension", c.coopmat2_flexible_max_dimension)
      .value("reserved_shared_memory", c.coopmat2_reserved_shared_memory);
  shapes("flexible_shapes", c.coopmat2_flexible_shapes);
  j.end_object();
  j.begin_array("paths");
  for (Path p : c.paths) j.value("", path_name(p));
  j.end_array();
  j.value("forced_path", ctx.options().force_path ? path_name(*ctx.options().force_path) : std::string_view(""));
  j.begin_array("kernels");
  for (const auto& [kernel, modules] : ctx.kernels()) {
    j.begin_object().value("name", kernel).value("path", path_name(ctx.path_for(kernel)));
    j.begin_array("modules");
    for (const auto& m : modules) j.value("", m);
    j.end_array().end_object();
  }
  j.end_array();
  j.end_object();
  return j.str() + "\n";
}

}  // namespace vkattn
