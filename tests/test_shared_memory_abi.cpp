// The ABI's shared-memory counts (abi/paged_attention.h), which the host's
// tile choices test against the device's limit, against what each kernel's
// SPIR-V declares for the same tile (read from the embedded modules with
// their specialization constants applied: spirv_workgroup_memory.hpp). A
// shared array added to a kernel and not to the ABI's count, or a count
// that drifts from the declarations, fails here on any machine; a count
// under the declarations would let the host pick a tile the device cannot
// run.
#include "spirv_workgroup_memory.hpp"

#include "abi/block_sparse.h"
#include "abi/paged_attention.h"
#include "schedule/paged_attention_schedule.hpp"
#include "shader_registry.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace vkattn::test {
namespace {

namespace spec_id {
#define VKA_TEST_SPEC_ID(id, name, def) constexpr uint32_t name = id;
BLOCK_SPARSE_SPEC(VKA_TEST_SPEC_ID)
#undef VKA_TEST_SPEC_ID
}  // namespace spec_id

using Spec = std::map<uint32_t, uint32_t>;

// The module's declared shared bytes, with each variable named in failures.
struct Declared {
  uint64_t bytes = 0;
  std::string listing;
};
Declared declared(const char* kernel, const char* path, const Spec& spec) {
  const detail::EmbeddedModule* m = detail::find_module(kernel, path);
  if (!m || std::string(m->path) != path) throw std::runtime_error(std::string("no module ") + kernel + "/" + path);
  std::vector<uint32_t> words(m->size / 4);
  std::memcpy(words.data(), m->code, m->size);
  Declared d;
  for (const auto& v : workgroup_variables(words, spec)) {
    d.bytes += v.bytes;
    d.listing += " " + v.name + "=" + std::to_string(v.bytes);
  }
  return d;
}

Spec tile_spec(uint32_t head_size, const detail::Tile& t) {
  return {{spec_id::PA_HEAD_SIZE, head_size}, {spec_id::PA_BM, t.bm}, {spec_id::PA_BN, t.bn}, {spec_id::PA_WORKGROUP_SIZE, t.workgroup}};
}

std::string tile_text(uint32_t head_size, const detail::Tile& t) {
  return "head size " + std::to_string(head_size) + ", tile " + std::to_string(t.bm) + " x " + std::to_string(t.bn) + ", " +
         std::to_string(t.workgroup) + " invocations";
}

// The scalar kernel: the host's count (PA_SCALAR_SHARED_BYTES, of the larger
// head size where q.k's and V's differ) is what paged attention's module
// declares, exactly; block-sparse attention's module has no merge flag (it
// holds the chunk bases, for K/V from the paged cache).
TEST(SharedMemoryAbi, ScalarKernelCountIsWhatItsModulesDeclare) {
  constexpr uint64_t kNoMergeFlag = 4u;
  int checked = 0;
  for (uint32_t limit : {16384u, 32768u, 49152u, 65536u})
    for (uint32_t head_size : {16u, 64u, 80u, 96u, 128u, 192u, 256u})
      for (uint32_t rows : {1u, 4u, 16u}) {
        detail::ScheduleDevice dev;
        dev.path = Path::scalar;
        dev.max_shared_memory = limit;
        const detail::Tile t = detail::choose_tile(dev, head_size, rows);
        SCOPED_TRACE(tile_text(head_size, t) + ", limit " + std::to_string(limit));
        const uint64_t host = PA_SCALAR_SHARED_BYTES(head_size, head_size, t.bm, t.bn);
        if (limit >= 32768u) EXPECT_LE(host, limit);   // (below that, the smallest tile may not fit: the op fails cleanly)
        const Declared paged = declared("paged_attention", "scalar", tile_spec(head_size, t));
        EXPECT_EQ(paged.bytes, host) << paged.listing;
        const Declared sparse = declared("block_sparse", "scalar", tile_spec(head_size, t));
        EXPECT_EQ(sparse.bytes, host - kNoMergeFlag) << sparse.listing;
        ++checked;
      }
  // q.k's and V's head sizes differ (192 and 128): the host counts the larger for both.
  for (auto [d, dv] : {std::pair{192u, 128u}, std::pair{64u, 128u}}) {
    detail::ScheduleDevice dev;
    dev.path = Path::scalar;
    const detail::Tile t = detail::choose_tile(dev, std::max(d, dv), 16);
    Spec s = tile_spec(d, t);
    s[spec_id::BS_V_HEAD_SIZE] = dv;
    const Declared sparse = declared("block_sparse", "scalar", s);
    SCOPED_TRACE(tile_text(d, t) + ", V head size " + std::to_string(dv));
    EXPECT_EQ(sparse.bytes, PA_SCALAR_SHARED_BYTES(d, dv, t.bm, t.bn) - kNoMergeFlag) << sparse.listing;
    EXPECT_LE(sparse.bytes, PA_SCALAR_SHARED_BYTES(std::max(d, dv), std::max(d, dv), t.bm, t.bn));
    ++checked;
  }
  EXPECT_GT(checked, 80);
}

// The prefill kernel (both matrix paths, and the KHR module's two softmax
// forms: in registers, PA_REGISTER_MATRICES, or through shared memory):
// PP_SHARED_BYTES for paged attention and prefix prefill, plus
// PP_BS_DOCUMENT_BYTES for block-sparse attention's modules. The count may
// exceed a module's declarations by what that module leaves out (the S and
// P arrays' placeholders), never fall short of them.
TEST(SharedMemoryAbi, PrefillKernelCountCoversWhatItsModulesDeclare) {
  constexpr uint64_t kSlack = 64u;
  int checked = 0;
  for (auto [path, shared_softmax] : {std::pair{Path::coopmat2, false}, {Path::coopmat, false}, {Path::coopmat, true}})
    for (uint32_t head_size : {64u, 80u, 96u, 128u, 192u, 256u}) {
      detail::ScheduleDevice dev;
      dev.path = path;
      dev.prefill_shared_softmax = shared_softmax;
      const uint32_t sm = dev.prefill_shared_softmax ? 1u : 0u;
      const char* p = path == Path::coopmat2 ? "coopmat2" : "coopmat";
      const std::string form = shared_softmax ? " (softmax through shared memory)" : "";
      const detail::Tile t = detail::prefill_tile(dev, head_size);
      if (t.bm) {
        SCOPED_TRACE(std::string(p) + form + ", " + tile_text(head_size, t));
        const uint64_t host = PP_SHARED_BYTES(head_size, t.workgroup / 32u, t.bn, sm);
        EXPECT_LE(host, dev.max_shared_memory);
        for (const char* kernel : {"paged_prefill", "paged_prefill_bf16"})
          for (uint32_t suffix : {0u, 1u})
            for (uint32_t cache : {0u, 3u}) {
              Spec s = tile_spec(head_size, t);
              s[spec_id::PA_KV_SUFFIX] = suffix;
              s[spec_id::PA_CACHE_DTYPE] = cache;
              s[spec_id::PA_REGISTER_MATRICES] = !shared_softmax;
              const Declared d = declared(kernel, p, s);
              SCOPED_TRACE(std::string(kernel) + ", suffix " + std::to_string(suffix) + ", cache dtype " + std::to_string(cache));
              EXPECT_LE(d.bytes, host) << d.listing;
              EXPECT_LE(host, d.bytes + kSlack) << d.listing;
              ++checked;
            }
      }
      const detail::Tile b = detail::block_sparse_prefill_tile(dev, head_size, 128, 128);
      if (!b.bm) continue;
      SCOPED_TRACE(std::string(p) + form + ", block-sparse " + tile_text(head_size, b));
      const uint64_t host = PP_SHARED_BYTES(head_size, b.workgroup / 32u, b.bn, sm) + PP_BS_DOCUMENT_BYTES(b.bm, b.bn);
      EXPECT_LE(host, dev.max_shared_memory);
      Spec bs = tile_spec(head_size, b);
      bs[spec_id::PA_REGISTER_MATRICES] = !shared_softmax;
      for (const char* kernel : {"block_sparse", "block_sparse_bf16", "block_sparse_documents", "block_sparse_documents_bf16"}) {
        const Declared d = declared(kernel, p, bs);
        SCOPED_TRACE(kernel);
        EXPECT_LE(d.bytes, host) << d.listing;
        EXPECT_LE(host, d.bytes + kSlack + PP_BS_DOCUMENT_BYTES(b.bm, b.bn)) << d.listing;
        ++checked;
      }
    }
  EXPECT_GT(checked, 90);
}

// The decode kernel (both matrix paths, f16 and bf16 modules, the split
// layout's): PA_SUBGROUP_SHARED_BYTES for whole tiles (the halves'
// count is the same macro with H = 1: a module staging halves declares at
// most the whole tiles' count).
TEST(SharedMemoryAbi, DecodeKernelCountCoversWhatItsModulesDeclare) {
  constexpr uint64_t kSlack = 64u;
  int checked = 0;
  for (Path path : {Path::coopmat2, Path::coopmat})
    for (bool has_16x8x16 : {false, true})
      for (uint32_t head_size : {64u, 128u, 256u})
        for (uint32_t rows : {1u, 4u, 8u, 16u}) {
          detail::ScheduleDevice dev;
          dev.path = path;
          dev.has_16x8x16 = has_16x8x16;
          const char* p = path == Path::coopmat2 ? "coopmat2" : "coopmat";
          const detail::Tile t = detail::choose_tile(dev, head_size, rows);
          const uint32_t nw = t.workgroup / 32u;
          for (const char* kernel : {"paged_attention", "paged_attention_bf16", "paged_attention_split", "paged_attention_split_bf16"})
            for (uint32_t pack : {0u, 1u}) {
              const bool bf16 = std::strstr(kernel, "bf16") != nullptr;
              if (pack && !bf16) continue;   // (the f16 modules never pack O)
              Spec s = tile_spec(head_size, t);
              s[spec_id::PA_TILE_ROWS] = t.rows;
              s[spec_id::PA_SUBGROUP_SIZE] = 32;
              s[spec_id::PA_PACK_O] = pack;
              const uint32_t go = PA_SUBGROUP_O_GROUPS(t.bm, t.rows, pack);
              const uint64_t host = PA_SUBGROUP_SHARED_BYTES(head_size, nw, t.bm, t.rows, go);
              SCOPED_TRACE(std::string(kernel) + "/" + p + ", " + tile_text(head_size, t) + ", rows " + std::to_string(t.rows) +
                           ", pack " + std::to_string(pack));
              const Declared whole = declared(kernel, p, s);
              EXPECT_LE(whole.bytes, host) << whole.listing;
              EXPECT_LE(host, whole.bytes + kSlack) << whole.listing;
              s[spec_id::PA_STAGE_HALVES] = 1;
              const Declared halves = declared(kernel, p, s);
              EXPECT_LE(halves.bytes, host) << halves.listing;
              ++checked;
            }
        }
  EXPECT_GT(checked, 100);
}

// Half-tile staging (PA_STAGE_HALVES): the modules that take it declare no
// more than PA_SUBGROUP_SHARED_BYTES_H's count with H = 1, which the plan
// counts. At head size 128 with an fp8 cache the plan counts 3 workgroups
// of 4 subgroups per SM: 3 such counts fit 48 KiB for tiles of up to 8 rows
// (decode with GQA up to 8). (With 16 rows they do not: the plan counts the
// 2 that fit, decode_workgroups_per_sm.) At head size 256 (head halves) the
// plan itself tests that 2 fit.
TEST(SharedMemoryAbi, HalfTileModulesFitTheWorkgroupsPerSmThePlanCounts) {
  constexpr uint32_t kSmShared = 48u * 1024u;   // an SM's, for all its workgroups (DEVELOPERS.md)
  int checked = 0;
  for (Path path : {Path::coopmat2, Path::coopmat})
    for (uint32_t rows : {4u, 8u, 16u}) {
      detail::ScheduleDevice dev;
      dev.path = path;
      dev.has_16x8x16 = true;
      const char* p = path == Path::coopmat2 ? "coopmat2" : "coopmat";
      struct Case {
        const char* kernel;
        uint32_t head_size, q_dtype, cache_dtype, per_sm;
      };
      for (const Case c : {Case{"paged_attention", 128, abi::DTYPE_F16, abi::DTYPE_FP8_E4M3, 3},
                           Case{"paged_attention", 128, abi::DTYPE_F16, abi::DTYPE_FP8_E5M2, 3},
                           Case{"paged_attention_bf16", 128, abi::DTYPE_BF16, abi::DTYPE_FP8_E4M3, 3},
                           Case{"paged_attention_bf16", 128, abi::DTYPE_BF16, abi::DTYPE_FP8_E5M2, 3},
                           Case{"paged_attention", 256, abi::DTYPE_F16, abi::DTYPE_F16, 2},
                           Case{"paged_attention_bf16", 256, abi::DTYPE_BF16, abi::DTYPE_BF16, 2}}) {
        detail::Tile t = detail::choose_tile(dev, c.head_size, rows);
        t.workgroup = 4u * 32u;   // (the plans' 4-subgroup workgroups)
        Spec s = tile_spec(c.head_size, t);
        s[spec_id::PA_TILE_ROWS] = t.rows;
        s[spec_id::PA_SUBGROUP_SIZE] = 32;
        s[spec_id::PA_Q_DTYPE] = c.q_dtype;
        s[spec_id::PA_CACHE_DTYPE] = c.cache_dtype;
        s[spec_id::PA_STAGE_HALVES] = 1;
        const uint64_t host = PA_SUBGROUP_SHARED_BYTES_H(c.head_size, 4u, t.bm, t.rows, 1u, 1u);
        const Declared d = declared(c.kernel, p, s);
        SCOPED_TRACE(std::string(c.kernel) + "/" + p + ", " + tile_text(c.head_size, t) + ", rows " + std::to_string(t.rows) +
                     ", cache dtype " + std::to_string(c.cache_dtype));
        EXPECT_LE(d.bytes, host) << d.listing;
        if (c.per_sm == 3 && t.rows <= 8) EXPECT_LE(3u * host, kSmShared);
        ++checked;
      }
    }
  EXPECT_EQ(checked, 36);
}

}  // namespace
}  // namespace vkattn::test
