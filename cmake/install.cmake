# SPDX-License-Identifier: BSD-3-Clause
# Install rules: the shared and static libraries, the headers, rmx.pc and
# a CMake package (find_package(rmx) gives rmx::rmx and rmx::rmx_static).
include(CMakePackageConfigHelpers)

install(TARGETS rmx rmx_static EXPORT rmxTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/rmx DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR})
if(TARGET rmx_verbs) # the verbs transport, loaded by librmx.so from beside it
  install(TARGETS rmx_verbs LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()
if(TARGET rmx-info)
  # The tools (README's Tools section) find the library next to them
  # wherever the prefix goes.
  set(RMX_TOOLS rmx-info rmx-echo rmx-perf rmx-kv rmx-bulk-copy rmx-embed)
  set_target_properties(${RMX_TOOLS} PROPERTIES INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
  install(TARGETS ${RMX_TOOLS} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

set(RMX_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/rmx)
install(EXPORT rmxTargets NAMESPACE rmx:: DESTINATION ${RMX_CMAKE_DIR})
# What the static library needs from pkg-config, for rmxConfig.cmake.
set(RMX_PC_DEPS libuv)
set(RMX_PC_PRIVATE "")
if(RMX_HAVE_VERBS)
  string(APPEND RMX_PC_PRIVATE " libibverbs librdmacm")
endif()
if(SODIUM_FOUND)
  string(APPEND RMX_PC_PRIVATE " libsodium")
endif()
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/rmxConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/rmxConfig.cmake
                              INSTALL_DESTINATION ${RMX_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/rmxConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/rmxConfig.cmake ${PROJECT_BINARY_DIR}/rmxConfigVersion.cmake
        DESTINATION ${RMX_CMAKE_DIR})

# Relative to where rmx.pc lands, so an installed tree can move (and
# cmake --install --prefix works).
file(RELATIVE_PATH RMX_PC_UP ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
configure_file(${PROJECT_SOURCE_DIR}/cmake/rmx.pc.in ${PROJECT_BINARY_DIR}/rmx.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/rmx.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
