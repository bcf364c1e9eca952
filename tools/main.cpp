// vkattn: the standalone command. `info` prints the capability report, `run OP`
// runs one op on random data and verifies it against the float64 reference,
// `bench SUITE` measures a sweep of cases against the device's ceilings.
#include <vkattn/vkattn.hpp>

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "bench/suites.hpp"
#include "cli/flags.hpp"
#include "commands.hpp"

namespace {

// The ops and suites come from the lists `run` and `bench` dispatch on, so
// that the help names every one of them.
std::string usage() {
  auto joined = [](const std::vector<std::string>& names) {
    std::string s;
    for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
    return s;
  };
  std::vector<std::string> suite_names;
  for (const auto& s : vkattn::tool::suites()) suite_names.push_back(s.name);
  return "usage: vkattn <command> [flags]\n"
         "\n"
         "commands:\n"
         "  info                 device capabilities and the path each kernel runs on (--json for JSON)\n"
         "  run OP               run one op on random data, verify against the float64 reference, time it\n"
         "                       ops: " + joined(vkattn::tool::run_op_names()) + "\n"
         "  bench SUITE          time a sweep of cases against the device's ceilings\n"
         "                       suites: " + joined(suite_names) + "\n"
         "\n"
         "`vkattn <command> --help` lists a command's flags.\n";
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::fputs(usage().c_str(), args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  const std::string command = args[0];
  args.erase(args.begin());
  try {
    if (command == "info") return vkattn::tool::cmd_info(args);
    if (command == "run") return vkattn::tool::cmd_run(args);
    if (command == "bench") return vkattn::tool::cmd_bench(args);
    std::string hint;
    if (auto near = vkattn::cli::nearest(command, {"info", "run", "bench"})) hint = " (did you mean '" + *near + "'?)";
    std::fprintf(stderr, "vkattn: unknown command '%s'%s\n\n%s", command.c_str(), hint.c_str(), usage().c_str());
    return 2;
  } catch (const vkattn::cli::UsageError& e) {
    std::fprintf(stderr, "vkattn %s: %s\n", command.c_str(), e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vkattn %s: error: %s\n", command.c_str(), e.what());
    return 1;
  }
}
