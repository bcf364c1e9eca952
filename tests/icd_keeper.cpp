// A Vulkan instance that lives as long as the test binary, so that the
// loader keeps the driver (ICD) loaded between tests. Every test makes and
// destroys its own Context; on the GPU machine (NVIDIA 580, whose ICD is a
// GLX vendor library), unloading and loading the ICD again made later
// vkCreateInstance calls fail with VK_ERROR_INCOMPATIBLE_DRIVER, after as few
// as two Contexts. An application keeps its instance, so it never sees this.
#include <gtest/gtest.h>

#include "vk_functions.hpp"

namespace vkattn::test {
namespace {

class IcdKeeper : public ::testing::Environment {
 public:
  void SetUp() override {
    try {
      vk_.load_global(nullptr);
    } catch (const std::exception&) {
      return;   // no loader: the device tests report it themselves
    }
    VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
    app.apiVersion = VK_API_VERSION_1_3;
    VkInstanceCreateInfo ci{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    ci.pApplicationInfo = &app;
    if (vk_.vkCreateInstance(&ci, nullptr, &instance_) != VK_SUCCESS) instance_ = VK_NULL_HANDLE;
    else vk_.load_instance(instance_);
  }
  void TearDown() override {
    if (instance_) vk_.vkDestroyInstance(instance_, nullptr);
    instance_ = VK_NULL_HANDLE;
  }

 private:
  detail::VkFunctions vk_;
  VkInstance instance_ = VK_NULL_HANDLE;
};

const auto* const keeper = ::testing::AddGlobalTestEnvironment(new IcdKeeper);

}  // namespace
}  // namespace vkattn::test
