# ctest: runs the tool with ARGS (separated by |) and passes only when it exits
# with an error and its stderr contains EXPECT (plain text, not a pattern).
string(REPLACE "|" ";" args "${ARGS}")
execute_process(COMMAND "${VKATTN}" ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0)
  message(FATAL_ERROR "vkattn ${args} succeeded, expected it to fail with: ${EXPECT}\n${out}")
endif()
string(FIND "${err}" "${EXPECT}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "vkattn ${args} failed (${rc}) without the expected message '${EXPECT}':\n${err}")
endif()
message(STATUS "failed as expected (${rc}): ${err}")
