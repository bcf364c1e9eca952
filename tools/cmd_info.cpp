#include <vkattn/vkattn.hpp>

#include <iostream>
#include <limits>

#include "commands.hpp"

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

int cmd_info(const std::vector<std::string>& args) {
  cli::Flags f("vkattn info", "Print the device's capabilities and the path each kernel runs on");
  DeviceFlags dev(f);
  bool& json = f.add_bool("json", false, "print JSON instead of text");
  f.parse(args);
  if (f.help_requested()) { std::cout << f.help(); return 0; }
  Context ctx(dev.options());
  std::cout << (json ? capability_report_json(ctx) : capability_report_text(ctx));
  return 0;
}

}  // namespace vkattn::tool
