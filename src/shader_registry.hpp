// Internal: the SPIR-V modules embedded at build time (generated registry).
#pragma once
#include <cstddef>
#include <string_view>
#include <vector>

namespace vkattn::detail {

struct EmbeddedModule {
  const char* kernel;
  const char* path;          // "scalar", "coopmat", "coopmat2" or "universal"
  const unsigned char* code; // SPIR-V words, 4-byte aligned
  std::size_t size;          // bytes
};

const std::vector<EmbeddedModule>& embedded_modules();
// The module for (kernel, path), falling back to the kernel's universal module; null if none.
const EmbeddedModule* find_module(std::string_view kernel, std::string_view path);

}  // namespace vkattn::detail
