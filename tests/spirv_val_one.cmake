# vkattn_spirv_val(SPV WHAT): spirv-val (SPIRV_VAL, ENV) on one module, or a
# fatal error naming WHAT. For the ctest scripts that validate modules.
function(vkattn_spirv_val spv what)
  execute_process(COMMAND "${SPIRV_VAL}" --target-env ${ENV} "${spv}" RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "spirv-val rejected ${what}: ${err}")
  endif()
  message(STATUS "valid: ${what}")
endfunction()
