#include <vkattn/vkattn.hpp>

#include <algorithm>
#include <iostream>
#include <limits>

#include "commands.hpp"
#include "context_impl.hpp"

namespace vkattn::tool {

DeviceFlags::DeviceFlags(cli::Flags& f)
    : path(f.add_choice("path", "auto", {"auto", "scalar", "coopmat", "coopmat2"},
                        "kernel path (auto: the best the device has; also VKATTN_PATH)")),
      // Bounded to int: ContextOptions::device_index is one, and a larger value
      // would wrap to another device (2^32 to 0) instead of being refused.
      device(f.add_int("device", -1, "device index (-1: best; also VKATTN_DEVICE)", -1,
                       std::numeric_limits<int>::max())),
      validation(f.add_bool("validation", false, "enable the Vulkan validation layers (also VKATTN_VALIDATION=1)")) {}

ContextOptions DeviceFlags::options() const {
  ContextOptions o;
  o = o.with_environment();   // flags given on the command line win over the environment
  if (path != "auto") o.force_path = parse_path(path);
  if (device >= 0) o.device_index = static_cast<int>(device);
  if (validation) o.validation = true;
  return o;
}

namespace {

// The extensions the device offers, sorted, one per line; `*` marks those the
// Context enabled. (Which optional ones a driver has, e.g. VK_EXT_shader_float8
// or VK_EXT_memory_priority, decides what is worth trying there.)
void print_device_extensions(Context& ctx) {
  const auto& impl = ctx.impl();
  uint32_t n = 0;
  impl.vk.vkEnumerateDeviceExtensionProperties(impl.physical_device, nullptr, &n, nullptr);
  std::vector<VkExtensionProperties> exts(n);
  impl.vk.vkEnumerateDeviceExtensionProperties(impl.physical_device, nullptr, &n, exts.data());
  std::vector<std::string> names;
  for (const auto& e : exts) names.emplace_back(e.extensionName);
  std::sort(names.begin(), names.end());
  const auto& on = impl.device_extensions;
  std::cout << names.size() << " device extensions offered, " << on.size() << " enabled (*)\n";
  for (const auto& name : names) std::cout << (std::find(on.begin(), on.end(), name) != on.end() ? "* " : "  ") << name << "\n";
}

}  // namespace

int cmd_info(const std::vector<std::string>& args) {
  cli::Flags f("vkattn info", "Print the device's capabilities and the path each kernel runs on");
  DeviceFlags dev(f);
  bool& json = f.add_bool("json", false, "print JSON instead of text");
  bool& extensions = f.add_bool("extensions", false,
                                "list every device extension the driver offers instead (* = enabled by vkattn)");
  f.parse(args);
  if (f.help_requested()) { std::cout << f.help(); return 0; }
  if (json && extensions) throw Error("vkattn info: --extensions prints a plain list; drop --json or --extensions");
  Context ctx(dev.options());
  if (extensions) {
    print_device_extensions(ctx);
    return 0;
  }
  std::cout << (json ? capability_report_json(ctx) : capability_report_text(ctx));
  return 0;
}

}  // namespace vkattn::tool
