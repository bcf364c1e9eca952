// vkattn::Error: every failure the library reports, with a message that names
// the argument, the value given and what was expected.
#pragma once
#include <stdexcept>
#include <string>

namespace vkattn {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, int vk_result = 0)
      : std::runtime_error(message), vk_result_(vk_result) {}
  // The VkResult behind this error, or 0 (VK_SUCCESS) when it is not a Vulkan failure.
  int vk_result() const noexcept { return vk_result_; }

 private:
  int vk_result_;
};

}  // namespace vkattn
