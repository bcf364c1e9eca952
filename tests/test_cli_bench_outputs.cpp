// `vkattn bench`: --json, --csv and --plot files that cannot be written are
// refused before anything runs (here --device 99 would fail as soon as a
// device is opened), and checking them leaves no file behind.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "commands.hpp"
#include "vk_test.hpp"

namespace vkattn::test {
namespace {

namespace fs = std::filesystem;

// Runs `vkattn bench ceilings --device 99 ARGS`; returns which error it threw.
std::string bench_error(std::vector<std::string> args) {
  ScopedUnsetEnv no_env_device("VKATTN_DEVICE");
  args.insert(args.begin(), {"ceilings", "--device", "99"});
  try {
    tool::cmd_bench(args);
  } catch (const cli::UsageError& e) {
    return std::string("usage: ") + e.what();
  } catch (const Error& e) {
    return std::string("error: ") + e.what();
  }
  return "no error";
}

class BenchOutputs : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("vkattn_bench_out_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path dir_;
};

TEST_F(BenchOutputs, AMissingDirectoryIsRefusedBeforeTheRun) {
  const std::string missing = (dir_ / "missing" / "x").string();
  for (const char* flag : {"--json", "--csv", "--plot"})
    EXPECT_EQ(bench_error({flag, missing}),
              "usage: " + std::string(flag) + ": cannot write '" + missing + "': No such file or directory");
}

TEST_F(BenchOutputs, ADirectoryIsRefusedBeforeTheRun) {
  EXPECT_EQ(bench_error({"--csv", dir_.string()}), "usage: --csv: cannot write '" + dir_.string() + "': it is a directory");
}

TEST_F(BenchOutputs, WritableFilesAreCheckedWithoutBeingCreatedOrTruncated) {
  const fs::path fresh = dir_ / "fresh.json", kept = dir_ / "kept.csv";
  { std::ofstream(kept) << "an earlier run's figures\n"; }
  const std::string err = bench_error({"--json", fresh.string(), "--csv", kept.string(), "--plot", "/dev/null"});
  EXPECT_NE(err.find("error: device index 99 is out of range"), std::string::npos) << err;   // got as far as the device
  EXPECT_FALSE(fs::exists(fresh));
  std::ifstream in(kept);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "an earlier run's figures\n");
}

}  // namespace
}  // namespace vkattn::test
