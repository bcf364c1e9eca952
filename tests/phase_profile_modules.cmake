# ctest: the prefill kernel's modules of the developers' phase-profile build
# (VKATTN_PHASE_PROFILE, shaders/include/abi/phase_profile.h) still compile
# and validate, although no other build compiles them: the paged and the
# block-sparse op, on both matrix paths.
include(${CMAKE_CURRENT_LIST_DIR}/spirv_val_one.cmake)
foreach(variant "VKATTN_PATH=${COOPMAT2}" "VKATTN_PATH=${COOPMAT}" "VKATTN_PATH=${COOPMAT2};VKA_OP_BLOCK_SPARSE=1"
                "VKATTN_PATH=${COOPMAT2};VKA_OP_BLOCK_SPARSE=1;BS_STAGED_DOCUMENTS=1")
  set(defines -DPP_PHASE_PROFILE=1)
  foreach(d IN LISTS variant)
    list(APPEND defines -D${d})
  endforeach()
  set(spv "${DIR}/phase_profile.spv")
  file(MAKE_DIRECTORY "${DIR}")
  execute_process(COMMAND "${GLSLANG}" -V --quiet --target-env ${ENV} ${defines} -I${SRC}/shaders/include
                          -o "${spv}" "${SRC}/shaders/paged_prefill.comp"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "glslang failed on paged_prefill.comp with ${defines}: ${out}${err}")
  endif()
  vkattn_spirv_val("${spv}" "paged_prefill.comp with ${defines}")
endforeach()
