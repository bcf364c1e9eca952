# ctest: the installed libvkattn.a defines no global symbol named vk* or volk*
# (vkattn's own vkattn_* names aside), only references them. A definition of
# such a name (volk's function pointers, once compiled in) replaces the
# loader's function in an application that calls Vulkan itself: its first
# vkCreateInstance jumps into a data pointer.
file(GLOB_RECURSE libs "${PREFIX}/*/libvkattn.a")
if(NOT libs)
  message(FATAL_ERROR "no libvkattn.a under ${PREFIX}")
endif()
execute_process(COMMAND ${NM} -g --defined-only ${libs} OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT out MATCHES "vkattn_spv_write_kv_cache")
  message(FATAL_ERROR "${NM} listed no vkattn symbols in ${libs}")
endif()
string(REGEX MATCHALL "[^\n]+" lines "${out}")
set(bad "")
set(count 0)
foreach(line IN LISTS lines)
  if(line MATCHES " [A-Za-z] ((vk|volk)[^ ]*)$")
    set(name "${CMAKE_MATCH_1}")
    if(NOT name MATCHES "^vkattn_")
      math(EXPR count "${count} + 1")
      if(count LESS_EQUAL 10)
        string(APPEND bad "\n  ${line}")
      endif()
    endif()
  endif()
endforeach()
if(count GREATER 0)
  message(FATAL_ERROR "${libs} defines ${count} Vulkan or volk names, which would replace an application's "
                      "(only references to them are allowed), e.g.:${bad}")
endif()
message(STATUS "${libs}: no vk*/volk* definitions")
