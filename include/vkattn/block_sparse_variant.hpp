// Block-sparse variants: mask and score mods written in GLSL and compiled at
// build time, FlexAttention's user-defined mask_mod and score_mod. A variant
// is a GLSL file (block_sparse_mods.glsl says what it may define) that the
// CMake function vkattn_add_block_sparse_variant compiles into the attention
// kernels and the mask builder, embeds into a target, and registers under its
// name when the program starts; BlockSparseArgs::variant (and BlockMaskBuild,
// BlockSparseVariant) select it by that name, and its buffers, declared in
// the GLSL with VKA_MOD_BUFFER(slot, type, name) and in slot order in the
// CMake call with their element type and extent, are bound by name
// (BlockSparseArgs::custom_buffers).
//
//   vkattn_add_block_sparse_variant(TARGET app NAME stripes MOD stripes.glsl BUFFERS key_weight:f32:Lkv)
//
// Registration is process-wide and thread-safe; a name registers once.
#pragma once
#include <vkattn/dtype.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace vkattn {

// One of a variant's buffers, in slot order: its name, the element type its
// GLSL declares it with (f32 for float, i32 for int, f16, bf16), and how many
// elements its mods read at most: a product of the op's sizes "B", "H" (q
// heads), "Lq" and "Lkv" and of positive integers, joined by '*' ("H*Lkv").
// For build_block_mask, whose mods see the mask's rows, B and H are the
// mask's Sz and Sh. A view of another dtype, of fewer elements or not
// contiguous is an Error before anything is recorded, so mods that keep their
// reads within the declared extent never read past the caller's buffer.
struct BlockSparseVariantBuffer {
  std::string name;
  DType dtype = DType::f32;
  std::string extent;
};

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
// than 4 buffers, a buffer named twice, of a dtype other than f16, bf16, f32
// or i32, or with an extent that does not parse, or a module of another
// kernel.
void register_block_sparse_variant(const std::string& name, const std::vector<BlockSparseVariantBuffer>& buffers,
                                   const std::vector<BlockSparseVariantModule>& modules);

// The registered variants' names.
std::vector<std::string> block_sparse_variant_names();

// A registered variant's buffers, in slot order, as it declared them; throws
// vkattn::Error for a name not registered.
std::vector<BlockSparseVariantBuffer> block_sparse_variant_buffers(const std::string& name);

}  // namespace vkattn
