# ctest: vkattn_add_block_sparse_variant refuses BUFFERS that do not match the
# GLSL's VKA_MOD_BUFFER declarations, before it adds anything to the build
# (so each case runs in script mode). VARIANT_CMAKE: cmake/block_sparse_variant.cmake.
set(work "${CMAKE_CURRENT_BINARY_DIR}/variant_declarations")
file(MAKE_DIRECTORY "${work}")
file(WRITE "${work}/mod.glsl" "#define VKA_SCORE_MOD 1\nVKA_MOD_BUFFER(0, float, key_weight)\n"
                              "float vka_score_mod(float s, uint b, uint h, int q, int k) { return s + key_weight[k]; }\n")
function(expect_refusal buffers expect)
  file(WRITE "${work}/driver.cmake"
       "set(VKATTN_GLSLANG glslang)\nset(VKATTN_SHADER_DIR shaders)\nset(VKATTN_EMBED_SCRIPT embed)\n"
       "include(\"${VARIANT_CMAKE}\")\n"
       "vkattn_add_block_sparse_variant(TARGET t NAME v MOD \"${work}/mod.glsl\" BUFFERS ${buffers})\n")
  execute_process(COMMAND "${CMAKE_COMMAND}" -P "${work}/driver.cmake" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(rc EQUAL 0)
    message(FATAL_ERROR "BUFFERS ${buffers} was accepted, expected: ${expect}")
  endif()
  string(REPLACE "\n" " " err_line "${err}")
  string(REGEX REPLACE " +" " " err_line "${err_line}")
  string(FIND "${err_line}" "${expect}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "BUFFERS ${buffers} failed without '${expect}':\n${err}")
  endif()
endfunction()
expect_refusal("key_weight" "BUFFERS entry 'key_weight', expected name:dtype:extent")
expect_refusal("key_weight:i32:Lkv" "has no VKA_MOD_BUFFER(0, int, key_weight)")
expect_refusal("weights:f32:Lkv" "has no VKA_MOD_BUFFER(0, float, weights)")
expect_refusal("key_weight:f32:Lkv other:f32:H" "declares 1 VKA_MOD_BUFFERs, BUFFERS 2")
message(STATUS "every mismatched declaration was refused")
