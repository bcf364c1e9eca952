# vkattn_add_block_sparse_variant(TARGET tgt NAME name MOD file.glsl [BUFFERS name:dtype:extent ...])
#
# Compiles a block-sparse variant (a GLSL file of mask and score mods, see
# shaders/include/block_sparse_mods.glsl) into every module block-sparse
# attention and the mask builder run: the scalar kernel, the prefill kernel on
# coopmat and coopmat2 (f16 and bf16), and build_block_mask. The modules are
# embedded into TARGET with a source that registers them under NAME when the
# program starts (vkattn::register_block_sparse_variant); BlockSparseArgs::
# custom_mods = NAME selects them. BUFFERS declares the variant's buffers in
# slot order, as VKA_MOD_BUFFER(slot, type, name) declares them in the GLSL
# (checked here): name:dtype:extent, dtype f32 (float), i32 (int), f16
# (float16_t) or bf16 (bfloat16_t), extent the most elements its mods read, a
# product of B, H, Lq, Lkv and integers joined by '*' (vkattn::
# BlockSparseVariantBuffer). custom_buffers binds them by name, and a view of
# another dtype or fewer elements is an error.
#
# Works in vkattn's own tree and from an installed package (find_package(vkattn)
# sets VKATTN_SHADER_DIR, VKATTN_GLSLANG and VKATTN_EMBED_SCRIPT; VKATTN_SPIRV_VAL,
# when set, validates each module).
function(vkattn_add_block_sparse_variant)
  cmake_parse_arguments(V "" "TARGET;NAME;MOD" "BUFFERS" ${ARGN})
  if(NOT V_TARGET OR NOT V_NAME OR NOT V_MOD)
    message(FATAL_ERROR "vkattn_add_block_sparse_variant: TARGET, NAME and MOD are required")
  endif()
  if(NOT V_NAME MATCHES "^[a-z0-9_]+$")
    message(FATAL_ERROR "vkattn_add_block_sparse_variant: NAME '${V_NAME}' must be lowercase letters, digits and '_'")
  endif()
  list(LENGTH V_BUFFERS nbuf)
  if(nbuf GREATER 4)
    message(FATAL_ERROR "vkattn_add_block_sparse_variant: at most 4 BUFFERS")
  endif()
  get_filename_component(mod "${V_MOD}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  # The GLSL's VKA_MOD_BUFFER(slot, type, name) lines, against BUFFERS.
  file(READ "${mod}" mod_text)
  string(REGEX MATCHALL "VKA_MOD_BUFFER\\([ \t]*[0-9]+[ \t]*,[ \t]*[A-Za-z0-9_]+[ \t]*,[ \t]*[A-Za-z0-9_]+[ \t]*\\)" glsl_decls "${mod_text}")
  list(LENGTH glsl_decls nglsl)
  if(NOT nglsl EQUAL nbuf)
    message(FATAL_ERROR "vkattn_add_block_sparse_variant(${V_NAME}): ${V_MOD} declares ${nglsl} VKA_MOD_BUFFERs, BUFFERS ${nbuf}")
  endif()
  set(buffer_rows "")
  set(slot 0)
  foreach(b IN LISTS V_BUFFERS)
    if(NOT b MATCHES "^([a-z_][a-z0-9_]*):(f32|i32|f16|bf16):([A-Za-z0-9*]+)$")
      message(FATAL_ERROR "vkattn_add_block_sparse_variant(${V_NAME}): BUFFERS entry '${b}', expected name:dtype:extent "
                          "(dtype f32, i32, f16 or bf16; extent e.g. H*Lkv)")
    endif()
    set(bname "${CMAKE_MATCH_1}")
    set(btype "${CMAKE_MATCH_2}")
    set(bextent "${CMAKE_MATCH_3}")
    set(glsl_type_f32 float)
    set(glsl_type_i32 int)
    set(glsl_type_f16 float16_t)
    set(glsl_type_bf16 bfloat16_t)
    set(found FALSE)
    foreach(d IN LISTS glsl_decls)
      if(d MATCHES "\\([ \t]*${slot}[ \t]*,[ \t]*${glsl_type_${btype}}[ \t]*,[ \t]*${bname}[ \t]*\\)")
        set(found TRUE)
      endif()
    endforeach()
    if(NOT found)
      message(FATAL_ERROR "vkattn_add_block_sparse_variant(${V_NAME}): ${V_MOD} has no VKA_MOD_BUFFER(${slot}, "
                          "${glsl_type_${btype}}, ${bname}) for BUFFERS entry '${b}'")
    endif()
    string(APPEND buffer_rows "{\"${bname}\", vkattn::DType::${btype}, \"${bextent}\"}, ")
    math(EXPR slot "${slot} + 1")
  endforeach()
  if(NOT VKATTN_GLSLANG OR NOT VKATTN_SHADER_DIR OR NOT VKATTN_EMBED_SCRIPT)
    message(FATAL_ERROR "vkattn_add_block_sparse_variant: VKATTN_GLSLANG, VKATTN_SHADER_DIR and VKATTN_EMBED_SCRIPT must be set")
  endif()
  set(dir "${CMAKE_CURRENT_BINARY_DIR}/vkattn_variants/${V_NAME}")
  # The kernels include the variant as "vka_mod.glsl" from this folder.
  configure_file("${mod}" "${dir}/vka_mod/vka_mod.glsl" COPYONLY)
  # kernel|source|path|extra define
  set(modules
      "block_sparse|paged_attention.comp|scalar|"
      "block_sparse|paged_prefill.comp|coopmat|"
      "block_sparse|paged_prefill.comp|coopmat2|"
      "block_sparse_bf16|paged_prefill.comp|coopmat|-DPA_MATRIX_BF16=1"
      "block_sparse_bf16|paged_prefill.comp|coopmat2|-DPA_MATRIX_BF16=1"
      "block_mask_build|block_mask_build.comp|universal|")
  set(path_scalar 0)
  set(path_universal 0)
  set(path_coopmat 1)
  set(path_coopmat2 2)
  set(decls "")
  set(rows "")
  set(sources "")
  foreach(m IN LISTS modules)
    string(REPLACE "|" ";" fields "${m}")
    list(GET fields 0 kernel)
    list(GET fields 1 source)
    list(GET fields 2 path)
    list(GET fields 3 extra)
    set(id "${V_NAME}_${kernel}__${path}")
    set(spv "${dir}/${id}.spv")
    set(cpp "${dir}/${id}.cpp")
    set(dep "${dir}/${id}.d")   # the headers it includes: a variant is rebuilt when vkattn's change
    set(validate "")
    if(VKATTN_SPIRV_VAL)
      set(validate COMMAND ${VKATTN_SPIRV_VAL} --target-env vulkan1.3 "${spv}")
    endif()
    add_custom_command(
      OUTPUT "${spv}" "${cpp}"   # the SPIR-V first: glslang's depfile names it
      COMMAND ${VKATTN_GLSLANG} -V --quiet --target-env vulkan1.3 -DVKATTN_PATH=${path_${path}} -DVKA_OP_BLOCK_SPARSE=1
              -DVKA_MOD=1 ${extra} -I${dir}/vka_mod -I${VKATTN_SHADER_DIR}/include --depfile "${dep}" -o "${spv}"
              "${VKATTN_SHADER_DIR}/${source}"
      ${validate}
      COMMAND ${CMAKE_COMMAND} -DSPV=${spv} -DOUT=${cpp} -DSYMBOL=vkattn_variant_${id} -P ${VKATTN_EMBED_SCRIPT}
      DEPENDS "${dir}/vka_mod/vka_mod.glsl" "${VKATTN_SHADER_DIR}/${source}" ${VKATTN_EMBED_SCRIPT}
      DEPFILE "${dep}"
      COMMENT "SPIR-V block-sparse variant ${V_NAME}: ${kernel} (${path})"
      VERBATIM)
    string(APPEND decls "extern const unsigned char vkattn_variant_${id}[];\nextern const std::size_t vkattn_variant_${id}_size;\n")
    string(APPEND rows "        {\"${kernel}\", \"${path}\", vkattn_variant_${id}, vkattn_variant_${id}_size},\n")
    list(APPEND sources "${cpp}")
  endforeach()
  set(reg "${dir}/register_${V_NAME}.cpp")
  file(WRITE "${reg}.in"
       "// Generated by vkattn_add_block_sparse_variant: registers variant '${V_NAME}' at start-up.\n"
       "#include <vkattn/block_sparse_variant.hpp>\n#include <cstddef>\n\n${decls}\nnamespace {\n"
       "const bool registered = [] {\n"
       "  vkattn::register_block_sparse_variant(\"${V_NAME}\", {${buffer_rows}}, {\n${rows}      });\n"
       "  return true;\n}();\n}  // namespace\n")
  configure_file("${reg}.in" "${reg}" COPYONLY)
  target_sources(${V_TARGET} PRIVATE ${sources} "${reg}")
endfunction()
