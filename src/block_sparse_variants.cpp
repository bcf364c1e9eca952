// The process-wide registry of block-sparse variants (block_sparse_variant.hpp)
// and of their modules, which find_module searches after the embedded ones.
#include <vkattn/block_sparse_variant.hpp>
#include <vkattn/error.hpp>

#include <algorithm>
#include <deque>
#include <mutex>

#include "block_sparse_variants.hpp"
#include "shader_registry.hpp"

namespace vkattn {

namespace detail {
namespace {

struct OwnedModule {
  std::string kernel, path;
  EmbeddedModule module;
};

struct Registry {
  std::mutex mutex;
  std::deque<RegisteredVariant> variants;   // deques: entries never move
  std::deque<OwnedModule> modules;
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

const EmbeddedModule* find_registered_module(std::string_view kernel, std::string_view path) {
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  const EmbeddedModule* universal = nullptr;
  for (const auto& m : r.modules) {
    if (kernel != m.kernel) continue;
    if (path == m.path) return &m.module;
    if (m.path == "universal") universal = &m.module;
  }
  return universal;
}

const RegisteredVariant* find_variant(std::string_view name) {
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  for (const auto& v : r.variants)
    if (v.name == name) return &v;
  return nullptr;
}

}  // namespace detail

void register_block_sparse_variant(const std::string& name, const std::vector<std::string>& buffers,
                                   const std::vector<BlockSparseVariantModule>& modules) {
  const std::string what = "register_block_sparse_variant('" + name + "'): ";
  if (name.empty() || !std::all_of(name.begin(), name.end(), [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; }))
    throw Error(what + "the name must be lowercase letters, digits and '_'");
  if (buffers.size() > 4) throw Error(what + std::to_string(buffers.size()) + " buffers, expected at most 4");
  for (const auto& m : modules) {
    if (m.kernel != "block_sparse" && m.kernel != "block_sparse_bf16" && m.kernel != "block_mask_build")
      throw Error(what + "module of kernel '" + m.kernel + "', expected block_sparse, block_sparse_bf16 or block_mask_build");
    if (!m.code || m.size == 0 || m.size % 4) throw Error(what + "module " + m.kernel + "/" + m.path + " has no SPIR-V words");
  }
  auto& r = detail::registry();
  std::lock_guard lock(r.mutex);
  for (const auto& v : r.variants)
    if (v.name == name) throw Error(what + "a variant of that name is already registered");
  r.variants.push_back({name, buffers, "block_sparse@" + name, "block_sparse_bf16@" + name, "block_mask_build@" + name});
  for (const auto& m : modules) {
    auto& o = r.modules.emplace_back();
    o.kernel = m.kernel + "@" + name;
    o.path = m.path;
    o.module = {o.kernel.c_str(), o.path.c_str(), m.code, m.size};
  }
}

std::vector<std::string> block_sparse_variant_names() {
  auto& r = detail::registry();
  std::lock_guard lock(r.mutex);
  std::vector<std::string> out;
  for (const auto& v : r.variants) out.push_back(v.name);
  return out;
}

}  // namespace vkattn
