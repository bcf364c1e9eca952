# Locates the pieces of the Vulkan SDK that vkattn builds against: headers new
# enough for VK_NV_cooperative_matrix2, volk's single source file, glslang and
# spirv-val. tools/setup.sh provides them on a fresh machine.
if(NOT VKATTN_TOOL_DIR AND EXISTS "${PROJECT_SOURCE_DIR}/.deps/bin")
  set(VKATTN_TOOL_DIR "${PROJECT_SOURCE_DIR}/.deps/bin" CACHE PATH "" FORCE)
endif()
if(NOT VKATTN_SDK_INCLUDE_DIR AND EXISTS "${PROJECT_SOURCE_DIR}/.deps/root/usr/include/vulkan/vulkan_core.h")
  set(VKATTN_SDK_INCLUDE_DIR "${PROJECT_SOURCE_DIR}/.deps/root/usr/include" CACHE PATH "" FORCE)
endif()

find_program(VKATTN_GLSLANG glslangValidator HINTS ${VKATTN_TOOL_DIR} NO_CACHE)
find_program(VKATTN_SPIRV_VAL spirv-val HINTS ${VKATTN_TOOL_DIR} NO_CACHE)
if(NOT VKATTN_GLSLANG OR NOT VKATTN_SPIRV_VAL)
  message(FATAL_ERROR "glslangValidator and spirv-val were not found (looked in '${VKATTN_TOOL_DIR}' and PATH). Run tools/setup.sh first.")
endif()
execute_process(COMMAND ${VKATTN_GLSLANG} --version OUTPUT_VARIABLE _glslang_version ERROR_QUIET)
string(REGEX MATCH "Glslang Version: [0-9]+:([0-9]+)\\.([0-9]+)" _m "${_glslang_version}")
set(_glslang_major "${CMAKE_MATCH_1}")
set(_glslang_minor "${CMAKE_MATCH_2}")
if(NOT _m OR _glslang_major LESS 15)
  message(FATAL_ERROR "glslang >= 15 is needed for GL_NV_cooperative_matrix2 (found: '${_m}' from ${VKATTN_GLSLANG}). Run tools/setup.sh.")
endif()

find_path(VKATTN_VULKAN_INCLUDE_DIR vulkan/vulkan_core.h HINTS ${VKATTN_SDK_INCLUDE_DIR} NO_CACHE)
find_path(VKATTN_VOLK_DIR volk.c HINTS ${VKATTN_SDK_INCLUDE_DIR} PATHS /usr/include /usr/share/volk NO_CACHE)
if(NOT VKATTN_VULKAN_INCLUDE_DIR OR NOT VKATTN_VOLK_DIR)
  message(FATAL_ERROR "Vulkan headers or volk.c not found (VKATTN_SDK_INCLUDE_DIR='${VKATTN_SDK_INCLUDE_DIR}'). Run tools/setup.sh.")
endif()
file(STRINGS "${VKATTN_VULKAN_INCLUDE_DIR}/vulkan/vulkan_core.h" _hv REGEX "^#define VK_HEADER_VERSION [0-9]+")
string(REGEX REPLACE ".* ([0-9]+)$" "\\1" _hv "${_hv}")
if(_hv LESS 309)
  message(FATAL_ERROR "Vulkan headers 1.4.${_hv} in ${VKATTN_VULKAN_INCLUDE_DIR} are too old: 1.4.309 or newer is needed")
endif()
message(STATUS "vkattn: glslang ${_glslang_major}.${_glslang_minor} (${VKATTN_GLSLANG}), Vulkan headers 1.x.${_hv} (${VKATTN_VULKAN_INCLUDE_DIR})")

# volk compiled into vkattn: entry points are loaded at run time, so neither the
# library nor its users link libvulkan.
add_library(vkattn_volk OBJECT "${VKATTN_VOLK_DIR}/volk.c")
target_include_directories(vkattn_volk PUBLIC "$<BUILD_INTERFACE:${VKATTN_VULKAN_INCLUDE_DIR}>" "$<BUILD_INTERFACE:${VKATTN_VOLK_DIR}>")
target_compile_definitions(vkattn_volk PUBLIC VK_NO_PROTOTYPES)
