# `cmake --install` + find_package(vkattn) -> vkattn::vkattn. The Vulkan C
# headers the library was built against (<vulkan/vulkan.h> included) are
# installed beside its own. The library defines no Vulkan symbols: it loads
# libvulkan.so.1 at run time, or takes the application's vkGetInstanceProcAddr.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
install(TARGETS vkattn EXPORT vkattnTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} ${CMAKE_INSTALL_INCLUDEDIR}/vkattn/vulkan-headers)
install(DIRECTORY include/vkattn DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${VKATTN_VULKAN_INCLUDE_DIR}/vulkan DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/vkattn/vulkan-headers
  FILES_MATCHING PATTERN "*.h")
install(DIRECTORY ${VKATTN_VULKAN_INCLUDE_DIR}/vk_video DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/vkattn/vulkan-headers)
install(EXPORT vkattnTargets NAMESPACE vkattn:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/vkattn)
set(VKATTN_INSTALL_SHADER_DIR ${CMAKE_INSTALL_DATADIR}/vkattn/shaders)
configure_package_config_file(cmake/vkattnConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/vkattnConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/vkattn PATH_VARS VKATTN_INSTALL_SHADER_DIR)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/vkattnConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/vkattnConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/vkattnConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/vkattn)

# Block-sparse variants in consuming projects (cmake/block_sparse_variant.cmake):
# the kernels' sources, the embedding script, and the glslang the library was
# built with (a consumer may set VKATTN_GLSLANG to another >= 15.3).
install(FILES shaders/paged_attention.comp shaders/paged_prefill.comp shaders/block_mask_build.comp
  DESTINATION ${CMAKE_INSTALL_DATADIR}/vkattn/shaders)
install(DIRECTORY shaders/include DESTINATION ${CMAKE_INSTALL_DATADIR}/vkattn/shaders)
install(FILES cmake/block_sparse_variant.cmake cmake/embed_spirv.cmake DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/vkattn)
