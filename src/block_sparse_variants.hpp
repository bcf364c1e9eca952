// Internal: the registered block-sparse variants (block_sparse_variants.cpp).
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <vkattn/dtype.hpp>

#include <cstdint>

#include "shader_registry.hpp"

namespace vkattn::detail {

// A buffer's extent as registration parsed it: a product of sizes.
struct ExtentFactor {
  enum Kind { number, batch, heads, q_len, kv_len } kind;
  int64_t value = 0;   // for number
};
// The sizes an extent's names stand for in one call.
struct ExtentSizes {
  int64_t batch = 0, heads = 0, q_len = 0, kv_len = 0;
};
struct RegisteredBuffer {
  std::string name;
  DType dtype;
  std::string extent;                  // as declared, for messages
  std::vector<ExtentFactor> factors;
  int64_t elements(const ExtentSizes& s) const;
};

struct RegisteredVariant {
  std::string name;
  std::vector<RegisteredBuffer> buffers;   // in slot order
  // Its kernels' names: block_sparse@NAME, block_sparse_bf16@NAME, block_mask_build@NAME.
  std::string attention, attention_bf16, build;
};
// Null for a name not registered. Entries live as long as the program.
const RegisteredVariant* find_variant(std::string_view name);

// A registered variant's module for kernel "KERNEL@NAME", or its universal one; null if none.
const EmbeddedModule* find_registered_module(std::string_view kernel, std::string_view path);

}  // namespace vkattn::detail
