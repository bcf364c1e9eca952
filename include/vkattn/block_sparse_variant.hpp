// Block-sparse variants: mask and score mods written in GLSL and compiled at
// build time, FlexAttention's user-defined mask_mod and score_mod. A variant
// is a GLSL file (block_sparse_mods.glsl says what it may define) that the
// CMake function vkattn_add_block_sparse_variant compiles into the attention
// kernels and the mask builder, embeds into a target, and registers under its
// name when the program starts; BlockSparseArgs::variant (and BlockMaskBuild,
// BlockSparseVariant) select it by that name, and its buffers, declared in
// the GLSL with VKA_MOD_BUFFER(slot, type, name) and named in slot order in
// the CMake call, are bound by name (BlockSparseArgs::buffers).
//
//   vkattn_add_block_sparse_variant(TARGET app NAME stripes MOD stripes.glsl BUFFERS key_weight)
//
// Registration is process-wide and thread-safe; a name registers once.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace vkattn {

// One compiled module of a variant: kernel "block_sparse", "block_sparse_bf16"
// or "block_mask_build", path "scalar", "coopmat", "coopmat2" or "universal".
// `code` (SPIR-V) must outlive the program's use of the variant (the
// generated sources keep it in static storage).
struct BlockSparseVariantModule {
  std::string kernel, path;
  const unsigned char* code = nullptr;
  std::size_t size = 0;
};

// Throws vkattn::Error for a name that is empty, not [a-z0-9_], or taken, more
// than 4 buffers, or a module of another kernel.
void register_block_sparse_variant(const std::string& name, const std::vector<std::string>& buffers,
                                   const std::vector<BlockSparseVariantModule>& modules);

// The registered variants' names.
std::vector<std::string> block_sparse_variant_names();

}  // namespace vkattn
