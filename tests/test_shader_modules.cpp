// Every embedded SPIR-V module: well-formed, and accepted by the device when
// the device has its path. (spirv-val runs on every module at build time and
// again in the ctest `spirv_val_embedded_modules`.)
#include "shader_registry.hpp"
#include "vk_test.hpp"

#include "context_impl.hpp"

#include <cstring>

namespace vkattn::test {
namespace {

class ShaderModules : public VkTest {};

TEST_F(ShaderModules, EveryModuleIsSpirvAndTheDeviceAcceptsItsPaths) {
  const auto& mods = detail::embedded_modules();
  ASSERT_FALSE(mods.empty());
  const auto& paths = ctx().capabilities().paths;
  int created = 0;
  for (const auto& m : mods) {
    SCOPED_TRACE(std::string(m.kernel) + "/" + m.path);
    ASSERT_EQ(m.size % 4, 0u);
    ASSERT_GE(m.size, 20u);
    uint32_t magic;
    std::memcpy(&magic, m.code, 4);
    EXPECT_EQ(magic, 0x07230203u);
    std::string p = m.path;
    bool supported = p == "universal" || std::find_if(paths.begin(), paths.end(), [&](Path x) { return path_name(x) == p; }) != paths.end();
    if (!supported) continue;
    VkShaderModuleCreateInfo ci{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    ci.codeSize = m.size;
    ci.pCode = reinterpret_cast<const uint32_t*>(m.code);
    VkShaderModule sm;
    ASSERT_EQ(ctx().impl().vk.vkCreateShaderModule(ctx().device(), &ci, nullptr, &sm), VK_SUCCESS);
    ctx().impl().vk.vkDestroyShaderModule(ctx().device(), sm, nullptr);
    ++created;
  }
  EXPECT_GT(created, 0);
}

}  // namespace
}  // namespace vkattn::test
