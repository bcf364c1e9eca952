// ContextOptions::pipeline_cache_path (VKATTN_PIPELINE_CACHE) names a regular
// file or one to create: anything else is refused with vkattn::Error when the
// Context is made, before anything is read or written. The tests run as root,
// so device nodes are only ever given to a Context that must refuse them.
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "vk_test.hpp"

namespace vkattn::test {
namespace {

namespace fs = std::filesystem;

// A fresh directory for one test, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() /
            ("vkattn_pcf_" + std::to_string(::getpid()) + "_" + info->test_suite_name() + "_" + info->name());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  fs::path operator/(const char* name) const { return path_ / name; }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

ContextOptions with_cache(const fs::path& path) {
  auto o = test_options();
  o.pipeline_cache_path = path.string();
  return o;
}

std::string contents(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// A file the Context wrote: at least a VkPipelineCacheHeaderVersionOne of this device.
void expect_cache_of(const Context& ctx, const fs::path& p) {
  const std::string data = contents(p);
  ASSERT_GE(data.size(), sizeof(VkPipelineCacheHeaderVersionOne)) << p;
  VkPipelineCacheHeaderVersionOne h;
  std::memcpy(&h, data.data(), sizeof h);
  EXPECT_EQ(h.headerVersion, VK_PIPELINE_CACHE_HEADER_VERSION_ONE);
  EXPECT_EQ(h.vendorID, ctx.capabilities().vendor_id);
  EXPECT_EQ(h.deviceID, ctx.capabilities().device_id);
}

class PipelineCacheFile : public ::testing::Test {
 protected:
  void SetUp() override { no_env_ = std::make_unique<ScopedUnsetEnv>("VKATTN_PIPELINE_CACHE"); }
  std::unique_ptr<ScopedUnsetEnv> no_env_;
};

TEST_F(PipelineCacheFile, DeviceNodesAreRefusedAndLeftAlone) {
  for (const char* node : {"/dev/null", "/dev/zero"}) {
    if (!fs::is_character_file(node)) continue;   // not on this system: nothing to check
    struct stat before {};
    ASSERT_EQ(::stat(node, &before), 0);
    EXPECT_VKATTN_ERROR(Context{with_cache(node)}, node, "is a device", "expected a regular file",
                        "VKATTN_PIPELINE_CACHE");
    struct stat after {};
    ASSERT_EQ(::stat(node, &after), 0);
    EXPECT_TRUE(S_ISCHR(after.st_mode)) << node << " is no longer a device";
    EXPECT_EQ(after.st_rdev, before.st_rdev);
    EXPECT_EQ(after.st_ino, before.st_ino);
  }
}

TEST_F(PipelineCacheFile, ADirectoryIsRefused) {
  TempDir dir;
  EXPECT_VKATTN_ERROR(Context{with_cache(dir.path())}, "is a directory", "expected a regular file");
  EXPECT_TRUE(fs::is_directory(dir.path()));
}

TEST_F(PipelineCacheFile, AFifoIsRefusedWithoutWaitingForAWriter) {
  TempDir dir;
  const fs::path fifo = dir / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  EXPECT_VKATTN_ERROR(Context{with_cache(fifo)}, "is a FIFO");
  EXPECT_TRUE(fs::is_fifo(fifo));
}

TEST_F(PipelineCacheFile, AMissingDirectoryIsRefused) {
  TempDir dir;
  EXPECT_VKATTN_ERROR(Context{with_cache(dir / "missing" / "cache.bin")}, "the directory", "missing", "does not exist");
  EXPECT_FALSE(fs::exists(dir / "missing"));
}

TEST_F(PipelineCacheFile, TheEnvironmentVariableIsCheckedToo) {
  TempDir dir;
  set_test_env("VKATTN_PIPELINE_CACHE", dir.path().c_str());
  EXPECT_VKATTN_ERROR(Context{test_options()}, "is a directory");
}

TEST_F(PipelineCacheFile, ALinkToARegularFileStaysALink) {
  TempDir dir;
  const fs::path target = dir / "target.bin", link = dir / "link.bin";
  { std::ofstream(target, std::ios::binary) << "not a pipeline cache yet"; }
  fs::create_symlink(target, link);
  {
    Context ctx(with_cache(link));
    ctx.save_pipeline_cache();
    EXPECT_TRUE(fs::is_symlink(fs::symlink_status(link)));
    EXPECT_EQ(fs::read_symlink(link), target);
    expect_cache_of(ctx, target);
  }
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(link)));   // also after the save at destruction
  // A relative link to a file not created yet: the file appears where it points.
  const fs::path dangling = dir / "dangling.bin";
  fs::create_symlink("created.bin", dangling);
  {
    Context ctx(with_cache(dangling));
    ctx.save_pipeline_cache();
    EXPECT_TRUE(fs::is_symlink(fs::symlink_status(dangling)));
    expect_cache_of(ctx, dir / "created.bin");
  }
}

TEST_F(PipelineCacheFile, ALinkToADeviceIsRefused) {
  if (!fs::is_character_file("/dev/null")) GTEST_SKIP() << "no /dev/null";
  TempDir dir;
  const fs::path link = dir / "link.bin";
  fs::create_symlink("/dev/null", link);
  EXPECT_VKATTN_ERROR(Context{with_cache(link)}, "is a device");
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(link)));
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
}

TEST_F(PipelineCacheFile, ARegularFileRoundTrips) {
  TempDir dir;
  const fs::path file = dir / "cache.bin";
  std::string first;
  {
    Context ctx(with_cache(file));
    ctx.save_pipeline_cache();
    expect_cache_of(ctx, file);
    first = contents(file);
  }
  {
    Context again(with_cache(file));   // reads the file the first one wrote
    again.save_pipeline_cache();
    expect_cache_of(again, file);
    EXPECT_EQ(contents(file).substr(0, sizeof(VkPipelineCacheHeaderVersionOne)),
              first.substr(0, sizeof(VkPipelineCacheHeaderVersionOne)));
  }
  // Only the file itself: no temporary files left beside it.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);
}

TEST_F(PipelineCacheFile, APlantedTemporaryNameIsNeverFollowed) {
  // Whatever already has a name the temporary file may take (here links to a
  // file that must not be overwritten, as could be planted in a shared
  // directory) is skipped, not opened.
  TempDir dir;
  const fs::path file = dir / "cache.bin", victim = dir / "victim";
  { std::ofstream(victim) << "keep"; }
  const std::string tmp = "cache.bin.tmp" + std::to_string(::getpid());
  fs::create_symlink(victim, dir.path() / tmp);
  for (int i = 0; i < 4; ++i) fs::create_symlink(victim, dir.path() / (tmp + "." + std::to_string(i)));
  Context ctx(with_cache(file));
  ctx.save_pipeline_cache();
  EXPECT_EQ(contents(victim), "keep");
  expect_cache_of(ctx, file);
}

}  // namespace
}  // namespace vkattn::test
