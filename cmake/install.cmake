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
  set(RMX_TOOLS rmx-info rmx-echo rmx-perf rmx-xfer rmx-kv rmx-bulk-copy rmx-embed)
  set_target_properties(${RMX_TOOLS} PROPERTIES INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
  install(TARGETS ${RMX_TOOLS} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

set(RMX_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/rmx)
install(EXPORT rmxTargets NAMESPACE rmx:: DESTINATION ${RMX_CMAKE_DIR})
# What the static library needs, for rmxConfig.cmake (looked up there
# quietly, only for rmx::rmx_static) and rmx.pc. In rmx.pc, libuv and
# libsodium are Requires.private (the public dependencies: libuv's loop is
# in the API) and rdma-core is Libs.private: pkg-config reads every
# Requires.private package even for --cflags, so naming rdma-core there
# would make the shared library unusable without rdma-core's development
# files (and add libnl's include directory to every compile).
set(RMX_STATIC_DEPS libuv)
set(RMX_PC_DEPS libuv)
set(RMX_PC_LIBS_PRIVATE "")
if(SODIUM_FOUND)
  list(APPEND RMX_STATIC_DEPS libsodium)
  string(APPEND RMX_PC_DEPS " libsodium")
endif()
if(RMX_HAVE_META) # Libs.private: the shared library's users never need their .pc files
  list(APPEND RMX_STATIC_DEPS libcurl json-c)
  string(APPEND RMX_PC_LIBS_PRIVATE " -lcurl -ljson-c")
endif()
if(RMX_HAVE_VERBS)
  list(APPEND RMX_STATIC_DEPS libibverbs librdmacm)
  string(APPEND RMX_PC_LIBS_PRIVATE " -libverbs -lrdmacm")
endif()
foreach(_l ${CMAKE_DL_LIBS})
  string(APPEND RMX_PC_LIBS_PRIVATE " -l${_l}")
endforeach()
list(JOIN RMX_STATIC_DEPS " " RMX_STATIC_DEPS)
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
