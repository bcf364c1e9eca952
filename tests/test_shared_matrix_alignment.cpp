// Cooperative-matrix loads and stores through shared memory read only arrays
// of 16-byte elements. VUID-RuntimeSpirv-OpCooperativeMatrixLoadKHR-08986
// (and -06324 for the NV forms) asks that a load's or store's pointer and
// stride be aligned to the lesser of 16 bytes and a row's (or column's)
// natural alignment, which for every matrix the kernels move is 16 bytes.
// A shared array of 4- or 2-byte elements is aligned only to its element:
// where the driver places it is its own choice, and a kernel that loads
// from it is right or wrong by that placement. (Seen on the H200: a table
// of floats loaded as an accumulator read wrong values in one module and
// right ones in another that differed only in other shared declarations;
// the same table as vec4s read right in both. DEVELOPERS.md, "Block-sparse
// masks as matrices, tried".) With 16-byte elements every element offset and stride
// in elements is a multiple of 16 bytes. Read from the embedded SPIR-V, on
// any machine.
#include "spirv_workgroup_memory.hpp"

#include "block_sparse_variants.hpp"
#include "shader_registry.hpp"

#include <vkattn/block_sparse_variant.hpp>

#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace vkattn::test {
namespace {

// Counts the module's shared matrix accesses into *accesses and fails on
// each one through an array of elements other than 16 bytes.
bool check_module(const detail::EmbeddedModule& m, const std::string& label, int* accesses) {
  std::vector<uint32_t> words(m.size / 4);
  std::memcpy(words.data(), m.code, m.size);
  const auto found = shared_matrix_accesses(words);
  for (const auto& a : found) {
    ++*accesses;
    EXPECT_EQ(a.element_bytes, 16u) << label << ": a cooperative-matrix "
                                    << (a.opcode % 2u == 1u ? "load" : "store") << " (opcode " << a.opcode
                                    << ") through shared `" << a.variable << "`, whose elements are "
                                    << a.element_bytes
                                    << " bytes: declare it as an array of 16-byte vectors (uvec4, vec4)";
  }
  return !found.empty();
}

TEST(SharedMatrixAlignment, MatrixLoadsAndStoresUseSixteenByteElements) {
  int accesses = 0, modules = 0;
  for (const auto& m : detail::embedded_modules())
    modules += check_module(m, std::string(m.kernel) + "/" + m.path, &accesses) ? 1 : 0;
  // The prefill and decode kernels' matrix paths and the register-order probe
  // move matrices through shared memory: a reader that found none has missed them.
  EXPECT_GE(modules, 4);
  EXPECT_GT(accesses, 0);
}

// The modules of registered block-sparse variants (this binary's test_stripes,
// built by vkattn_add_block_sparse_variant as an application's would be) are
// compiled from the same kernel source with the variant's mods, outside the
// embedded set.
TEST(SharedMatrixAlignment, RegisteredVariantsModulesToo) {
  int accesses = 0, modules = 0;
  for (const auto& name : block_sparse_variant_names()) {
    const auto* v = detail::find_variant(name);
    ASSERT_NE(v, nullptr) << name;
    for (const auto& kernel : {v->attention, v->attention_bf16})
      for (const char* path : {"coopmat", "coopmat2"})
        if (const auto* m = detail::find_registered_module(kernel, path))
          modules += check_module(*m, kernel + "/" + path, &accesses) ? 1 : 0;
  }
  // test_stripes has f16 and bf16 modules on both matrix paths.
  EXPECT_GE(modules, 4);
  EXPECT_GT(accesses, 0);
}

}  // namespace
}  // namespace vkattn::test
