// Internal: the registered block-sparse variants (block_sparse_variants.cpp).
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "shader_registry.hpp"

namespace vkattn::detail {

struct RegisteredVariant {
  std::string name;
  std::vector<std::string> buffers;   // in slot order
  // Its kernels' names: block_sparse@NAME, block_sparse_bf16@NAME, block_mask_build@NAME.
  std::string attention, attention_bf16, build;
};
// Null for a name not registered. Entries live as long as the program.
const RegisteredVariant* find_variant(std::string_view name);

// A registered variant's module for kernel "KERNEL@NAME", or its universal one; null if none.
const EmbeddedModule* find_registered_module(std::string_view kernel, std::string_view path);

}  // namespace vkattn::detail
