# libslabkit.so, its install rules, the CMake package (find_package(slabkit), target
# slabkit::slabkit) and the pkg-config file (slabkit.pc). Included from the top-level
# CMakeLists.txt after src/, which sets SLABKIT_OBJECT_LIBS.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The shared library is made of the same objects as slabkit_internal (compiled with hidden
# visibility); the version script keeps every symbol but the slabkit_* API local.
add_library(slabkit SHARED)
add_library(slabkit::slabkit ALIAS slabkit)
foreach(layer ${SLABKIT_OBJECT_LIBS})
  target_sources(slabkit PRIVATE $<TARGET_OBJECTS:${layer}>)
endforeach()
set_target_properties(slabkit PROPERTIES
  VERSION ${PROJECT_VERSION}
  SOVERSION 0
  LINKER_LANGUAGE CXX
  EXPORT_NAME slabkit)
target_link_libraries(slabkit PRIVATE Threads::Threads)
target_include_directories(slabkit PUBLIC
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
set(SLABKIT_VERSION_SCRIPT ${PROJECT_SOURCE_DIR}/cmake/slabkit.map)
target_link_options(slabkit PRIVATE LINKER:--version-script=${SLABKIT_VERSION_SCRIPT})
set_property(TARGET slabkit APPEND PROPERTY LINK_DEPENDS ${SLABKIT_VERSION_SCRIPT})
# Every symbol the library needs must be resolved at link time. Sanitized builds are the
# exception: clang leaves the sanitizer runtime to the executable.
if(NOT SLABKIT_SANITIZE)
  target_link_options(slabkit PRIVATE LINKER:--no-undefined)
endif()

# ---- install ---------------------------------------------------------------------------------
# (SLABKIT_INSTALL, on by default: a project that vendors slabkit installs libslabkit.so with
# the programs that need it.)
if(NOT SLABKIT_INSTALL)
  return()
endif()
set(SLABKIT_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/slabkit)

install(TARGETS slabkit EXPORT slabkit-targets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# The malloc replacement, for LD_PRELOAD or -lslabkit-malloc (not part of the CMake package:
# linking it replaces the program's malloc, a choice made on the link line).
if(TARGET slabkit_malloc)
  install(TARGETS slabkit_malloc LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/slabkit
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h" PATTERN "*.hpp")
install(EXPORT slabkit-targets
  NAMESPACE slabkit::
  FILE slabkit-targets.cmake
  DESTINATION ${SLABKIT_CMAKE_DIR})

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/slabkit-config.cmake.in
  ${PROJECT_BINARY_DIR}/slabkit-config.cmake
  INSTALL_DESTINATION ${SLABKIT_CMAKE_DIR})
# 0.x releases: only the same minor version is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/slabkit-config-version.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/slabkit-config.cmake
              ${PROJECT_BINARY_DIR}/slabkit-config-version.cmake
  DESTINATION ${SLABKIT_CMAKE_DIR})

# pkg-config: the prefix is found relative to the .pc file, so the package can be installed
# anywhere (cmake --install --prefix) or moved.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(SLABKIT_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  set(SLABKIT_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
else()
  file(RELATIVE_PATH SLABKIT_PC_UP "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
  string(REGEX REPLACE "/$" "" SLABKIT_PC_UP "${SLABKIT_PC_UP}")
  set(SLABKIT_PC_PREFIX "\${pcfiledir}/${SLABKIT_PC_UP}")
  set(SLABKIT_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(SLABKIT_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(SLABKIT_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/slabkit.pc.in ${PROJECT_BINARY_DIR}/slabkit.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/slabkit.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
