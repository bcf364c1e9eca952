// The tool's subcommands; each returns the process exit code.
#pragma once
#include <vkattn/context.hpp>

#include <string>
#include <vector>

#include "cli/flags.hpp"

namespace vkattn::tool {

int cmd_info(const std::vector<std::string>& args);
int cmd_run(const std::vector<std::string>& args);
int cmd_bench(const std::vector<std::string>& args);

// The ops `run` takes, in its help's order (the top-level help lists them too).
const std::vector<std::string>& run_op_names();

// --path, --device and --validation, which every command that opens a device takes.
struct DeviceFlags {
  explicit DeviceFlags(cli::Flags& f);
  ContextOptions options() const;
  std::string& path;
  int64_t& device;
  bool& validation;
};

}  // namespace vkattn::tool
