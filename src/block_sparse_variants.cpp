// The process-wide registry of block-sparse variants (block_sparse_variant.hpp)
// and of their modules, which find_module searches after the embedded ones.
#include <vkattn/block_sparse_custom_buffers.hpp>
#include <vkattn/block_sparse_variant.hpp>
#include <vkattn/error.hpp>

#include <algorithm>
#include <climits>
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

int64_t RegisteredBuffer::elements(const ExtentSizes& s) const {
  int64_t n = 1;
  for (const ExtentFactor& f : factors) {
    const int64_t v = f.kind == ExtentFactor::number ? f.value
                      : f.kind == ExtentFactor::batch ? s.batch
                      : f.kind == ExtentFactor::heads ? s.heads
                      : f.kind == ExtentFactor::q_len ? s.q_len
                                                      : s.kv_len;
    if (v <= 0) return 0;
    if (n > INT64_MAX / v) return INT64_MAX;   // no view holds that many
    n *= v;
  }
  return n;
}

namespace {

// "H*Lkv" -> its factors; throws naming the buffer for anything else.
std::vector<ExtentFactor> parse_extent(const std::string& what, const BlockSparseVariantBuffer& b) {
  const std::string bad = what + "buffer '" + b.name + "' has extent '" + b.extent +
                          "', expected a product of B, H, Lq, Lkv and positive integers joined by '*' (e.g. H*Lkv)";
  std::vector<ExtentFactor> out;
  std::size_t at = 0;
  while (true) {
    const std::size_t end = std::min(b.extent.find('*', at), b.extent.size());
    const std::string t = b.extent.substr(at, end - at);
    if (t == "B") out.push_back({ExtentFactor::batch});
    else if (t == "H") out.push_back({ExtentFactor::heads});
    else if (t == "Lq") out.push_back({ExtentFactor::q_len});
    else if (t == "Lkv") out.push_back({ExtentFactor::kv_len});
    else if (!t.empty() && t.size() <= 10 && std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
             std::stoll(t) > 0 && std::stoll(t) < (1ll << 31))
      out.push_back({ExtentFactor::number, std::stoll(t)});
    else
      throw Error(bad);
    if (end == b.extent.size()) return out;
    at = end + 1;
  }
}

}  // namespace
}  // namespace detail

void register_block_sparse_variant(const std::string& name, const std::vector<BlockSparseVariantBuffer>& buffers,
                                   const std::vector<BlockSparseVariantModule>& modules) {
  const std::string what = "register_block_sparse_variant('" + name + "'): ";
  if (name.empty() || !std::all_of(name.begin(), name.end(), [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; }))
    throw Error(what + "the name must be lowercase letters, digits and '_'");
  if (name.size() > VariantName::kMaxBytes)
    throw Error(what + "the name is " + std::to_string(name.size()) + " bytes, expected at most " +
                std::to_string(VariantName::kMaxBytes) + " (the ops hold it in place: VariantName)");
  if (buffers.size() > BlockSparseCustomBuffers::kMax)
    throw Error(what + std::to_string(buffers.size()) + " buffers, expected at most " +
                std::to_string(BlockSparseCustomBuffers::kMax));
  std::vector<detail::RegisteredBuffer> declared;
  for (const auto& b : buffers) {
    if (b.name.empty()) throw Error(what + "a buffer has no name");
    if (b.name.size() > VariantName::kMaxBytes)
      throw Error(what + "buffer '" + b.name + "' has a name of " + std::to_string(b.name.size()) + " bytes, expected at most " +
                  std::to_string(VariantName::kMaxBytes) + " (the ops hold it in place: VariantName)");
    for (const auto& d : declared)
      if (d.name == b.name) throw Error(what + "buffer '" + b.name + "' is declared twice");
    if (b.dtype != DType::f16 && b.dtype != DType::bf16 && b.dtype != DType::f32 && b.dtype != DType::i32)
      throw Error(what + "buffer '" + b.name + "' has dtype " + std::string(dtype_name(b.dtype)) +
                  ", expected f16, bf16, f32 or i32 (the GLSL types a mod reads)");
    declared.push_back({b.name, b.dtype, b.extent, detail::parse_extent(what, b)});
  }
  for (const auto& m : modules) {
    if (m.kernel != "block_sparse" && m.kernel != "block_sparse_bf16" && m.kernel != "block_mask_build")
      throw Error(what + "module of kernel '" + m.kernel + "', expected block_sparse, block_sparse_bf16 or block_mask_build");
    if (!m.code || m.size == 0 || m.size % 4) throw Error(what + "module " + m.kernel + "/" + m.path + " has no SPIR-V words");
  }
  auto& r = detail::registry();
  std::lock_guard lock(r.mutex);
  for (const auto& v : r.variants)
    if (v.name == name) throw Error(what + "a variant of that name is already registered");
  r.variants.push_back({name, std::move(declared), "block_sparse@" + name, "block_sparse_bf16@" + name, "block_mask_build@" + name});
  for (const auto& m : modules) {
    auto& o = r.modules.emplace_back();
    o.kernel = m.kernel + "@" + name;
    o.path = m.path;
    o.module = {o.kernel.c_str(), o.path.c_str(), m.code, m.size};
  }
}

std::vector<BlockSparseVariantBuffer> block_sparse_variant_buffers(const std::string& name) {
  const detail::RegisteredVariant* v = detail::find_variant(name);
  if (!v) throw Error("block_sparse_variant_buffers: '" + name + "' is not a registered variant");
  std::vector<BlockSparseVariantBuffer> out;
  for (const auto& b : v->buffers) out.push_back({b.name, b.dtype, b.extent});
  return out;
}

std::vector<std::string> block_sparse_variant_names() {
  auto& r = detail::registry();
  std::lock_guard lock(r.mutex);
  std::vector<std::string> out;
  for (const auto& v : r.variants) out.push_back(v.name);
  return out;
}

void VariantName::assign(std::string_view name) {
  if (name.size() > kMaxBytes)
    throw Error("VariantName: '" + std::string(name) + "' is " + std::to_string(name.size()) + " bytes, expected at most " +
                std::to_string(kMaxBytes) + " (no registered variant or buffer has a longer name)");
  std::copy(name.begin(), name.end(), chars_.begin());
  chars_[name.size()] = '\0';
  size_ = static_cast<uint8_t>(name.size());
}

void BlockSparseCustomBuffers::too_many(std::size_t count) {
  throw Error("custom_buffers: " + std::to_string(count) + " buffers, expected at most " + std::to_string(kMax) +
              " (a variant declares at most that many)");
}

}  // namespace vkattn
