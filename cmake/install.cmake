# Installation and the two ways to consume the installed library (included by the top-level
# CMakeLists.txt after the multihead and multihead_static targets exist):
#
#   <prefix>/<includedir>/multihead.h
#   <prefix>/<libdir>/libmultihead.so.X.Y.Z, libmultihead.so.X -> ..., libmultihead.so -> ...
#   <prefix>/<libdir>/libmultihead.a
#   <prefix>/<libdir>/cmake/multihead/multiheadConfig.cmake          find_package(multihead)
#                                      multiheadConfigVersion.cmake   (SameMajorVersion)
#                                      multiheadTargets*.cmake        multihead::multihead
#                                      multiheadStaticTargets*.cmake  multihead::multihead_static
#   <prefix>/<libdir>/pkgconfig/multihead.pc                          pkg-config multihead
#                               multihead-static.pc                   pkg-config multihead-static
#
# The shared library needs nothing at link time beyond itself (OpenMP, SLEEF and libm are its
# own DT_NEEDED entries); the static library needs OpenMP, SLEEF and libm, which the CMake
# package finds (find_dependency) and multihead-static.pc lists (multihead.pc too, under
# Requires.private/Libs.private, for a fully static link of the shared library's users).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(MH_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/multihead CACHE STRING
    "Where multiheadConfig.cmake is installed, relative to the prefix")
mark_as_advanced(MH_INSTALL_CMAKEDIR)

install(TARGETS multihead EXPORT multiheadTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS multihead_static EXPORT multiheadStaticTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES include/multihead.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

# Two export sets, so that a consumer of the shared library alone needs neither OpenMP nor
# SLEEF development files: multiheadConfig.cmake loads the static target only when its
# dependencies are found (or fails when the "static" component is REQUIRED).
install(EXPORT multiheadTargets NAMESPACE multihead:: DESTINATION ${MH_INSTALL_CMAKEDIR})
install(EXPORT multiheadStaticTargets NAMESPACE multihead:: DESTINATION ${MH_INSTALL_CMAKEDIR})

# The OpenMP runtime the objects were compiled against (gomp for gcc, omp for clang, iomp5
# for Intel's compilers), for multiheadConfig.cmake: a consumer whose compiler brings another
# runtime still links the one the archive calls.
set(MH_OPENMP_RUNTIME)
set(MH_OPENMP_RUNTIME_DIR)
foreach(_lib IN LISTS OpenMP_C_LIB_NAMES)
  if(_lib MATCHES "^(gomp|omp|iomp5|libomp|libiomp5md)$" AND NOT MH_OPENMP_RUNTIME)
    set(MH_OPENMP_RUNTIME ${_lib})
    get_filename_component(MH_OPENMP_RUNTIME_DIR "${OpenMP_${_lib}_LIBRARY}" DIRECTORY)
  endif()
endforeach()

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/multiheadConfig.cmake.in
  ${PROJECT_BINARY_DIR}/multiheadConfig.cmake
  INSTALL_DESTINATION ${MH_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/multiheadConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/multiheadConfig.cmake
              ${PROJECT_BINARY_DIR}/multiheadConfigVersion.cmake
        DESTINATION ${MH_INSTALL_CMAKEDIR})

# ---------------------------------------------------------------- multihead.pc
# The prefix is written at install time, so `cmake --install --prefix DIR` gets DIR (and a
# DESTDIR staging install the final prefix, not the staging path).
set(_mh_pc_dir ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
set(MH_PC_PREFIX "@MH_PC_INSTALL_PREFIX@") # filled in by the install step below
foreach(_d LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${_d}}")
    set(MH_PC_${_d} "${CMAKE_INSTALL_${_d}}")
  else()
    set(MH_PC_${_d} "\${prefix}/${CMAKE_INSTALL_${_d}}")
  endif()
endforeach()

# What the static library's objects need besides SLEEF (Requires.private: sleef): the OpenMP
# runtime they were compiled against (-lgomp with gcc, -lomp with clang; -L added when the
# runtime is outside the compiler's default directories) and libm.
set(MH_PC_LIBS_PRIVATE)
foreach(_lib IN LISTS OpenMP_C_LIB_NAMES)
  get_filename_component(_dir "${OpenMP_${_lib}_LIBRARY}" DIRECTORY)
  if(_dir AND NOT _dir IN_LIST CMAKE_C_IMPLICIT_LINK_DIRECTORIES)
    list(APPEND MH_PC_LIBS_PRIVATE "-L${_dir}")
  endif()
  list(APPEND MH_PC_LIBS_PRIVATE "-l${_lib}")
endforeach()
if(NOT OpenMP_C_LIB_NAMES)
  list(APPEND MH_PC_LIBS_PRIVATE ${OpenMP_C_FLAGS})
endif()
if(MH_LIBM)
  list(APPEND MH_PC_LIBS_PRIVATE -lm)
endif()
list(REMOVE_DUPLICATES MH_PC_LIBS_PRIVATE)
string(REPLACE ";" " " MH_PC_LIBS_PRIVATE "${MH_PC_LIBS_PRIVATE}")
# Two modules: multihead (the shared library) and multihead-static (libmultihead.a by its path:
# with both installed side by side, -lmultihead links the .so even under --static).
foreach(_pc multihead multihead-static)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/${_pc}.pc.in ${PROJECT_BINARY_DIR}/${_pc}.pc.in @ONLY)
  install(CODE "
    set(MH_PC_INSTALL_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
    configure_file(\"${PROJECT_BINARY_DIR}/${_pc}.pc.in\" \"${PROJECT_BINARY_DIR}/pc-install/${_pc}.pc\" @ONLY)
  ")
  install(FILES ${PROJECT_BINARY_DIR}/pc-install/${_pc}.pc DESTINATION ${_mh_pc_dir})
endforeach()
