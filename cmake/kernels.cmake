# Kernel objects, one OBJECT library per ISA of the registry (src/dispatch/isa_list.h) that this
# target architecture has: the ISA's folder (src/kernels/<folder>/*.c: GEMM, pack_kt, table,
# and scalar's direct kernels) plus the generic kernels (src/kernels/generic/*.c), compiled
# with the ISA's flags (on x86 with the higher ISAs switched off, so a file cannot use more
# than its label), -DMH_ISA_SUFFIX=<name> (kernel names, MH_KNAME), -DMH_ISA_ENUM=<ENUM> and
# -DMH_SIMD_HEADER (the folder's simd_<name>.h). All are merged into the one library and the
# dispatcher picks a table at run time. An ISA the compiler cannot build is switched off at
# configure time by its probe (cmake/probes/<name>.c, none for scalar).
include(CheckCSourceCompiles)

# Options for the kernel objects alone, after the global flags (tests/fuzz/run.sh: the fuzzing
# build leaves UBSan out of the kernels, whose UB checks the asan-ubsan test stage runs).
set(MH_KERNEL_FLAGS "" CACHE STRING "Extra compile options for the ISA kernel objects only")

find_package(PkgConfig REQUIRED)
pkg_check_modules(SLEEF REQUIRED IMPORTED_TARGET sleef)

# mh_isa_registry(<out-prefix>): parses the registry rows into lists <out>_ENUMS, _NAMES,
# _ARCHS, _FOLDERS and _FLAGS (',' between a row's flags, '-' for none), one entry per row, in order.
function(mh_isa_registry out)
  file(READ ${PROJECT_SOURCE_DIR}/src/dispatch/isa_list.h text)
  string(REGEX MATCHALL "\n *X\\([^\n]*\\)" rows "${text}")
  foreach(var ENUMS NAMES ARCHS FOLDERS FLAGS)
    set(${var})
  endforeach()
  foreach(row IN LISTS rows)
    if(NOT row MATCHES "X\\(([A-Z0-9_]+), ([a-z0-9_]+), ([a-z0-9_]+), [0-9]+, \"([^\"]*)\", \"([^\"]*)\"\\)")
      message(FATAL_ERROR "src/dispatch/isa_list.h: cannot parse the row: ${row}")
    endif()
    list(APPEND ENUMS ${CMAKE_MATCH_1})
    list(APPEND NAMES ${CMAKE_MATCH_2})
    list(APPEND ARCHS ${CMAKE_MATCH_3})
    list(APPEND FOLDERS ${CMAKE_MATCH_4})
    string(REPLACE " " "," flags "${CMAKE_MATCH_5}")
    if(flags STREQUAL "")
      set(flags "-") # an empty entry would vanish from the list
    endif()
    list(APPEND FLAGS "${flags}") # ',' between words: one list entry per row
  endforeach()
  foreach(var ENUMS NAMES ARCHS FOLDERS FLAGS)
    set(${out}_${var} ${${var}} PARENT_SCOPE)
  endforeach()
endfunction()

# mh_isa_arch_matches(<arch> <out>): whether the target processor is of registry arch <arch>.
function(mh_isa_arch_matches arch out)
  set(match FALSE)
  if(arch STREQUAL "any")
    set(match TRUE)
  elseif(arch STREQUAL "x86_64" AND CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64|amd64")
    set(match TRUE)
  elseif(arch STREQUAL "aarch64" AND CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64|arm64|ARM64")
    set(match TRUE)
  endif()
  set(${out} ${match} PARENT_SCOPE)
endfunction()

set(MH_KERNEL_SOURCES) # every kernel is in an ISA object library
set(MH_KERNEL_OBJECT_LIBS)
set(MH_ISA_DEFINITIONS)
set(MH_TARGET_ISAS) # the registry's ISAs of this target architecture (the per-ISA tests run these)
file(GLOB MH_GENERIC_KERNEL_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/kernels/generic/*.c)

# The bf16 compute mode's kernels of an ISA: its folder's bf16/ subfolder (the bf16 GEMMs) plus
# src/kernels/generic/bf16/*.c (the bf16 packing and rounding, the ISA's flags only); the bf16/
# files get these extra flags, which only they get (the rest of the ISA does not require the
# extension; the run-time check is mh_compute_supported). Built when cmake/probes/<name>_bf16.c
# compiles (no probe: always); an ISA without bf16/ (or whose probe fails) leaves the bf16 slots
# NULL. Override rule: an ISA's bf16/<stem>_<name>.c replaces generic/bf16/<stem>.c for that
# ISA (it defines the same kernels, with the same results, through the extension's own
# instructions, which the generic files cannot use: they are compiled without its flags).
set(MH_BF16_FLAGS_scalar "")
set(MH_BF16_FLAGS_avx512 "-mavx512bf16")
set(MH_BF16_FLAGS_neon "-march=armv8.6-a+bf16")
set(MH_BF16_FLAGS_sve "-march=armv8.6-a+sve+bf16")
set(MH_AMX_FLAGS "-mamx-tile;-mamx-bf16")

# mh_isa_bf16_sources(name folder flags out): the bf16 sources of an ISA, or empty.
function(mh_isa_bf16_sources name folder flags out)
  set(${out} "" PARENT_SCOPE)
  file(GLOB own CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/kernels/${folder}/bf16/*.c)
  if(NOT own)
    return()
  endif()
  if(EXISTS ${PROJECT_SOURCE_DIR}/cmake/probes/${name}_bf16.c)
    set(CMAKE_REQUIRED_FLAGS "${flags};${MH_BF16_FLAGS_${name}}")
    string(REPLACE ";" " " CMAKE_REQUIRED_FLAGS "${CMAKE_REQUIRED_FLAGS}")
    file(READ ${PROJECT_SOURCE_DIR}/cmake/probes/${name}_bf16.c probe)
    check_c_source_compiles("${probe}" MH_COMPILER_HAS_${name}_BF16)
    if(NOT MH_COMPILER_HAS_${name}_BF16)
      message(STATUS "multihead: ${name} bf16 kernels disabled (the compiler cannot build them)")
      return()
    endif()
  endif()
  # only the ISA's own files (the generic ones are shared by every ISA's object library)
  set_source_files_properties(${own} PROPERTIES COMPILE_OPTIONS "${MH_BF16_FLAGS_${name}}")
  # bf16/*_amx_*.c: the AMX kernels, with MH_AMX_FLAGS on top when cmake/probes/amx.c compiles
  # (the table then defines MH_AMX_KERNELS), else left out
  file(GLOB amx CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/kernels/${folder}/bf16/*_amx_*.c)
  set(MH_AMX_SOURCES "" PARENT_SCOPE)
  if(amx)
    set(CMAKE_REQUIRED_FLAGS "${flags};${MH_BF16_FLAGS_${name}};${MH_AMX_FLAGS}")
    string(REPLACE ";" " " CMAKE_REQUIRED_FLAGS "${CMAKE_REQUIRED_FLAGS}")
    file(READ ${PROJECT_SOURCE_DIR}/cmake/probes/amx.c probe)
    check_c_source_compiles("${probe}" MH_COMPILER_HAS_AMX)
    if(MH_COMPILER_HAS_AMX)
      set_source_files_properties(${amx} PROPERTIES COMPILE_OPTIONS "${MH_BF16_FLAGS_${name}};${MH_AMX_FLAGS}")
      set(MH_AMX_SOURCES ${amx} PARENT_SCOPE)
    else()
      message(STATUS "multihead: ${name} AMX kernels disabled (the compiler cannot build them)")
      list(REMOVE_ITEM own ${amx})
    endif()
  endif()
  file(GLOB generic CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/kernels/generic/bf16/*.c)
  foreach(file IN LISTS generic) # the override rule
    get_filename_component(stem ${file} NAME_WE)
    if(EXISTS ${PROJECT_SOURCE_DIR}/src/kernels/${folder}/bf16/${stem}_${name}.c)
      list(REMOVE_ITEM generic ${file})
    endif()
  endforeach()
  set(${out} ${own} ${generic} PARENT_SCOPE)
endfunction()

# mh_add_isa(ENUM name folder flags): one ISA's object library, if its probe compiles.
function(mh_add_isa enum name folder flags)
  set(CMAKE_REQUIRED_FLAGS "${flags}")
  string(REPLACE ";" " " CMAKE_REQUIRED_FLAGS "${CMAKE_REQUIRED_FLAGS}")
  set(CMAKE_REQUIRED_LIBRARIES PkgConfig::SLEEF)
  if(EXISTS ${PROJECT_SOURCE_DIR}/cmake/probes/${name}.c)
    file(READ ${PROJECT_SOURCE_DIR}/cmake/probes/${name}.c probe)
    check_c_source_compiles("${probe}" MH_COMPILER_HAS_${enum})
    if(NOT MH_COMPILER_HAS_${enum})
      message(STATUS "multihead: ${name} kernels disabled (the compiler cannot build them)")
      return()
    endif()
  endif()
  file(GLOB sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/kernels/${folder}/*.c)
  mh_isa_bf16_sources(${name} ${folder} "${flags}" bf16_sources)
  add_library(mh_kernels_${name} OBJECT ${sources} ${MH_GENERIC_KERNEL_SOURCES} ${bf16_sources})
  target_compile_options(mh_kernels_${name} PRIVATE ${flags} ${MH_WARNINGS} ${MH_KERNEL_FLAGS})
  target_compile_definitions(mh_kernels_${name} PRIVATE MH_ISA_SUFFIX=${name} MH_ISA_ENUM=${enum}
    "MH_SIMD_HEADER=\"kernels/${folder}/simd_${name}.h\"")
  if(bf16_sources)
    target_compile_definitions(mh_kernels_${name} PRIVATE MH_BF16_KERNELS=1)
  endif()
  if(MH_AMX_SOURCES)
    target_compile_definitions(mh_kernels_${name} PRIVATE MH_AMX_KERNELS=1)
    # what the tests' *_amxemu programs compile the AMX source with (tests/CMakeLists.txt)
    set(MH_AMX_EMULATED_SOURCES ${MH_AMX_SOURCES} PARENT_SCOPE)
    set(MH_AMX_EMULATED_FLAGS ${flags} PARENT_SCOPE)
  endif()
  target_include_directories(mh_kernels_${name} PRIVATE ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(mh_kernels_${name} PRIVATE PkgConfig::SLEEF)
  set_target_properties(mh_kernels_${name} PROPERTIES POSITION_INDEPENDENT_CODE ON C_VISIBILITY_PRESET hidden)
  set(MH_KERNEL_OBJECT_LIBS ${MH_KERNEL_OBJECT_LIBS} mh_kernels_${name} PARENT_SCOPE)
  set(MH_ISA_DEFINITIONS ${MH_ISA_DEFINITIONS} MH_HAVE_${enum}=1 PARENT_SCOPE)
  message(STATUS "multihead: ${name} kernels enabled")
endfunction()

mh_isa_registry(MH_ISA)
list(LENGTH MH_ISA_NAMES n_isas)
math(EXPR last "${n_isas} - 1")
foreach(i RANGE ${last})
  list(GET MH_ISA_ENUMS ${i} enum)
  list(GET MH_ISA_NAMES ${i} name)
  list(GET MH_ISA_ARCHS ${i} arch)
  list(GET MH_ISA_FOLDERS ${i} folder)
  list(GET MH_ISA_FLAGS ${i} flags)
  string(REPLACE "," ";" flags "${flags}")
  if(flags STREQUAL "-")
    set(flags "")
  endif()
  mh_isa_arch_matches(${arch} here)
  if(NOT here)
    continue()
  endif()
  list(APPEND MH_TARGET_ISAS ${name})
  if(name STREQUAL "scalar")
    mh_add_isa(${enum} ${name} ${folder} "${flags}") # always built: the fallback table
  else()
    option(MH_ENABLE_${enum} "Build the ${name} kernels" ON)
    if(MH_ENABLE_${enum})
      mh_add_isa(${enum} ${name} ${folder} "${flags}")
    endif()
  endif()
endforeach()
