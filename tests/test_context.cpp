// Context: device choice, capability report, path forcing, adoption, pipeline cache.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>

#include <unistd.h>   // environ

#include "runners/write_kv_cache_runner.hpp"
#include "vk_test.hpp"

namespace vkattn::test {
namespace {

class ContextTest : public VkTest {};

TEST_F(ContextTest, ReportsTheDeviceAndAPathPerKernel) {
  const auto& c = ctx().capabilities();
  EXPECT_FALSE(c.device_name.empty());
  EXPECT_GE(VK_API_VERSION_MINOR(c.api_version), 3u);
  EXPECT_GT(c.max_storage_buffer_range, 0u);
  EXPECT_GT(c.subgroup_size, 0u);
  ASSERT_FALSE(c.paths.empty());
  EXPECT_EQ(c.paths.back(), Path::scalar);   // every device has the scalar path
  std::string text = capability_report_text(ctx());
  EXPECT_NE(text.find(c.device_name), std::string::npos);
  EXPECT_NE(text.find("write_kv_cache"), std::string::npos);
  std::string json = capability_report_json(ctx());
  EXPECT_NE(json.find("\"kernels\""), std::string::npos);
  EXPECT_NE(json.find("\"coopmat2\""), std::string::npos);
  // Braces balance outside strings: a cheap well-formedness check.
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < json.size(); ++i) {
    char ch = json[i];
    if (in_string) { if (ch == '\\') ++i; else if (ch == '"') in_string = false; continue; }
    if (ch == '"') in_string = true;
    else if (ch == '{' || ch == '[') ++depth;
    else if (ch == '}' || ch == ']') { --depth; ASSERT_GE(depth, 0); }
  }
  EXPECT_EQ(depth, 0);
}

TEST_F(ContextTest, BestPathIsChosenFromTheDevice) {
  const auto& c = ctx().capabilities();
  if (!ctx().options().force_path) {
    // A kernel with one universal module runs on the device's best path.
    EXPECT_EQ(ctx().path_for("write_kv_cache"), c.paths.front());
  }
  EXPECT_EQ(c.coopmat2, std::find(c.paths.begin(), c.paths.end(), Path::coopmat2) != c.paths.end());
  EXPECT_EQ(c.coopmat, std::find(c.paths.begin(), c.paths.end(), Path::coopmat) != c.paths.end());
}

TEST_F(ContextTest, ForcingAMissingPathSaysWhatIsMissing) {
  ScopedUnsetEnv no_env_path("VKATTN_PATH");
  const auto& c = ctx().capabilities();
  for (Path p : {Path::coopmat, Path::coopmat2}) {
    if (std::find(c.paths.begin(), c.paths.end(), p) != c.paths.end()) continue;
    auto opts = test_options();
    opts.force_path = p;
    EXPECT_VKATTN_ERROR(Context{opts}, "forced", c.device_name.c_str(), "lacks",
                        p == Path::coopmat ? "VK_KHR_cooperative_matrix" : "VK_NV_cooperative_matrix2");
  }
  auto opts = test_options();
  opts.force_path = Path::scalar;
  Context scalar(opts);
  EXPECT_EQ(scalar.path_for("write_kv_cache"), Path::scalar);
}

// The tests' changes to the environment (test_env.hpp) never move its array
// of entries, which the driver's threads may be reading: a value set, cleared
// and restored replaces a pointer in place, and the entries stay as many.
TEST(ContextEnvironment, TestsChangeVariablesWithoutMovingTheEnvironment) {
  char** const array = environ;
  size_t entries = 0;
  while (environ[entries]) ++entries;
  {
    ScopedUnsetEnv keep_path("VKATTN_PATH"), keep_device("VKATTN_DEVICE");
    set_test_env("VKATTN_PATH", "scalar");
    set_test_env("VKATTN_DEVICE", "0");
    EXPECT_STREQ(std::getenv("VKATTN_PATH"), "scalar");
    clear_test_env("VKATTN_PATH");
    EXPECT_EQ(ContextOptions{}.with_environment().force_path, std::nullopt);   // empty reads as unset
  }
  size_t after = 0;
  while (environ[after]) ++after;
  EXPECT_EQ(environ, array);
  EXPECT_EQ(after, entries);
}

TEST(ContextEnvironment, VariablesOverrideOptions) {
  ScopedUnsetEnv keep_path("VKATTN_PATH"), keep_device("VKATTN_DEVICE");
  set_test_env("VKATTN_PATH", "scalar");
  set_test_env("VKATTN_DEVICE", "0");
  auto o = ContextOptions{}.with_environment();
  EXPECT_EQ(o.force_path, Path::scalar);
  EXPECT_EQ(o.device_index, 0);
  set_test_env("VKATTN_PATH", "tensor-cores");
  EXPECT_VKATTN_ERROR(ContextOptions{}.with_environment(), "unknown path 'tensor-cores'", "scalar, coopmat or coopmat2");
  clear_test_env("VKATTN_PATH");
  set_test_env("VKATTN_DEVICE", "first");
  EXPECT_VKATTN_ERROR(ContextOptions{}.with_environment(), "VKATTN_DEVICE='first'");
  clear_test_env("VKATTN_DEVICE");
}

TEST(ContextDevice, AnIndexOutOfRangeListsTheDevices) {
  auto opts = test_options();
  opts.device_index = 99;
  EXPECT_VKATTN_ERROR(Context{opts}, "device index 99 is out of range", "0: ");
}

TEST(ContextDevice, ANegativeIndexOtherThanMinusOneIsRefused) {
  // -1 picks the best device; any other negative value (e.g. 2^31 wrapped
  // into an int) is a mistake, not a request for the best device.
  ScopedUnsetEnv no_env_device("VKATTN_DEVICE");
  for (int index : {-2, std::numeric_limits<int>::min()}) {
    auto opts = test_options();
    opts.device_index = index;
    const std::string what = "device_index = " + std::to_string(index);
    EXPECT_VKATTN_ERROR(Context{opts}, what.c_str(), "expected -1");
  }
}

TEST(ContextEnvironment, DeviceIndexMustBeExactlyANumberInRange) {
  ScopedUnsetEnv keep_device("VKATTN_DEVICE");
  for (const char* text : {"2147483648", "4294967296", "18446744073709551616", "-1", "-0", "+1", " 1", "1 ", "0x1", ""}) {
    set_test_env("VKATTN_DEVICE", text);
    if (!*text) {   // unset in effect: the option stays
      EXPECT_EQ(ContextOptions{}.with_environment().device_index, -1);
      continue;
    }
    const std::string what = "VKATTN_DEVICE='" + std::string(text) + "'";
    EXPECT_VKATTN_ERROR(ContextOptions{}.with_environment(), what.c_str(), "is not a device index");
  }
  set_test_env("VKATTN_DEVICE", "2147483647");
  EXPECT_EQ(ContextOptions{}.with_environment().device_index, 2147483647);
  clear_test_env("VKATTN_DEVICE");
}

TEST_F(ContextTest, AdoptedDeviceIsUsedAndNeverDestroyed) {
  ScopedUnsetEnv no_env_path("VKATTN_PATH");
  auto exts = std::vector<std::string>{};   // nothing declared: only the scalar path may be chosen
  {
    Context adopted = Context::adopt({ctx().instance(), ctx().physical_device(), ctx().device(), ctx().queue(),
                                      ctx().queue_family(), exts, nullptr},
                                     test_options());
    EXPECT_FALSE(adopted.owns_device());
    EXPECT_EQ(adopted.capabilities().paths, std::vector<Path>{Path::scalar});
    tool::WriteKvCacheCase c;
    c.timing_repetitions = 0;
    c.num_tokens = 5;
    auto r = tool::run_write_kv_cache(adopted, c);
    EXPECT_TRUE(r.pass) << r.failure;
  }
  // The owner's device still works after the adopted context is gone.
  tool::WriteKvCacheCase c;
  c.timing_repetitions = 0;
  auto r = tool::run_write_kv_cache(ctx(), c);
  EXPECT_TRUE(r.pass) << r.failure;
}

TEST(ContextAdopt, MissingHandlesAreNamed) {
  EXPECT_VKATTN_ERROR(Context::adopt({}), "Context::adopt", "instance=null", "device=null");
}

TEST(PipelineCache, FileIsWrittenAndReused) {
  auto path = std::filesystem::temp_directory_path() / ("vkattn_pc_" + std::to_string(::getpid()) + ".bin");
  std::filesystem::remove(path);
  auto opts = test_options();
  opts.pipeline_cache_path = path.string();
  tool::WriteKvCacheCase c;
  c.timing_repetitions = 0;
  {
    Context ctx(opts);
    EXPECT_TRUE(tool::run_write_kv_cache(ctx, c).pass);
    EXPECT_EQ(ctx.pipelines_created(), 1u);
  }
  ASSERT_TRUE(std::filesystem::exists(path));
  EXPECT_GE(std::filesystem::file_size(path), 32u);   // at least the header (lavapipe stores nothing more)
  {
    Context ctx(opts);   // reads the file; a second process would start faster
    EXPECT_TRUE(tool::run_write_kv_cache(ctx, c).pass);
  }
  // A corrupt file is ignored, not trusted.
  { std::ofstream(path, std::ios::binary | std::ios::trunc) << "garbage that is not a pipeline cache at all........"; }
  {
    Context ctx(opts);
    EXPECT_TRUE(tool::run_write_kv_cache(ctx, c).pass);
  }
  std::filesystem::remove(path);
}

TEST_F(ContextTest, BufferRangeChecks) {
  Buffer b(ctx(), 64);
  std::vector<uint8_t> data(65);
  EXPECT_VKATTN_ERROR(b.upload(data.data(), 65), "range [0, 65)", "64 bytes");
  EXPECT_VKATTN_ERROR(b.download(data.data(), 8, 60), "range [60, 68)");
  EXPECT_VKATTN_ERROR(Buffer(ctx(), 0), "size is 0");
  EXPECT_VKATTN_ERROR(Buffer(ctx(), ctx().capabilities().max_buffer_size + 1), "exceeds the device's largest buffer");
  std::vector<uint32_t> words = {1, 2, 3, 4};
  b.upload(std::span<const uint32_t>(words), 16);
  EXPECT_EQ(b.download_as<uint32_t>(4, 16), words);
  b.fill(0xDEADBEEFu, 0, 16);
  EXPECT_EQ(b.download_as<uint32_t>(1)[0], 0xDEADBEEFu);
}

}  // namespace
}  // namespace vkattn::test
