# ctest steps for the consumer applications (tests/consumer).
#   STEP=install: cmake --install the build into a fresh prefix WORK/prefix.
#   STEP=build:   configure and build SRC in WORK/build with find_package(vkattn) from there.
if(STEP STREQUAL "install")
  file(REMOVE_RECURSE "${WORK}")
  execute_process(COMMAND ${CMAKE_COMMAND} --install "${BUILD}" --prefix "${WORK}/prefix" RESULT_VARIABLE rc OUTPUT_QUIET)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "cmake --install failed")
  endif()
elseif(STEP STREQUAL "build")
  execute_process(COMMAND ${CMAKE_COMMAND} -S "${SRC}" -B "${WORK}/build" -G Ninja -DCMAKE_BUILD_TYPE=Release
                          "-DCMAKE_PREFIX_PATH=${WORK}/prefix" "-DVOLK_DIR=${VOLK_DIR}"
                          "-DCMAKE_C_COMPILER=${C_COMPILER}" "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}" RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "configuring the consumer failed")
  endif()
  execute_process(COMMAND ${CMAKE_COMMAND} --build "${WORK}/build" RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "building the consumer failed")
  endif()
else()
  message(FATAL_ERROR "STEP must be install or build (got '${STEP}')")
endif()
