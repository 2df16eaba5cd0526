# Kernel sources per ISA. Each ISA is an OBJECT library compiled with its own flags (and, on
# x86, with the higher ISAs switched off so a file cannot use more than its label); all are
# merged into the one library and the dispatcher picks a table at run time. An ISA the
# compiler cannot build is switched off at configure time by a probe.
include(CheckCSourceCompiles)

option(MH_ENABLE_AVX2 "Build the AVX2+FMA kernels (x86-64)" ON)
option(MH_ENABLE_AVX512 "Build the AVX-512 kernels (x86-64)" ON)
option(MH_ENABLE_NEON "Build the NEON kernels (aarch64)" ON)
option(MH_ENABLE_SVE "Build the SVE kernels (aarch64)" ON)

find_package(PkgConfig REQUIRED)
pkg_check_modules(SLEEF REQUIRED IMPORTED_TARGET sleef)

set(MH_KERNEL_SOURCES
  src/kernels/scalar/convert_scalar.c
  src/kernels/scalar/pack_scalar.c
  src/kernels/scalar/f32_gemm_scalar.c
  src/kernels/scalar/attention_direct_scalar.c
  src/kernels/scalar/f32_softmax_scalar.c
  src/kernels/scalar/head_mix_scalar.c
  src/kernels/scalar/table_scalar.c)
set(MH_KERNEL_OBJECT_LIBS)
set(MH_ISA_DEFINITIONS)

# mh_add_isa(NAME FLAGS <flags...> SOURCES <files...>): probed with cmake/probes/NAME.c.
function(mh_add_isa name)
  cmake_parse_arguments(I "" "" "FLAGS;SOURCES" ${ARGN})
  string(TOUPPER ${name} upper)
  set(CMAKE_REQUIRED_FLAGS "${I_FLAGS}")
  string(REPLACE ";" " " CMAKE_REQUIRED_FLAGS "${CMAKE_REQUIRED_FLAGS}")
  set(CMAKE_REQUIRED_LIBRARIES PkgConfig::SLEEF)
  file(READ ${PROJECT_SOURCE_DIR}/cmake/probes/${name}.c probe)
  check_c_source_compiles("${probe}" MH_COMPILER_HAS_${upper})
  if(NOT MH_COMPILER_HAS_${upper})
    message(STATUS "multihead: ${name} kernels disabled (the compiler cannot build them)")
    return()
  endif()
  add_library(mh_kernels_${name} OBJECT ${I_SOURCES})
  target_compile_options(mh_kernels_${name} PRIVATE ${I_FLAGS} ${MH_WARNINGS})
  target_include_directories(mh_kernels_${name} PRIVATE ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(mh_kernels_${name} PRIVATE PkgConfig::SLEEF)
  set_target_properties(mh_kernels_${name} PROPERTIES POSITION_INDEPENDENT_CODE ON C_VISIBILITY_PRESET hidden)
  set(MH_KERNEL_OBJECT_LIBS ${MH_KERNEL_OBJECT_LIBS} mh_kernels_${name} PARENT_SCOPE)
  set(MH_ISA_DEFINITIONS ${MH_ISA_DEFINITIONS} MH_HAVE_${upper}=1 PARENT_SCOPE)
  message(STATUS "multihead: ${name} kernels enabled")
endfunction()

if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64|amd64")
  if(MH_ENABLE_AVX2)
    mh_add_isa(avx2 FLAGS -mavx2 -mfma -mf16c -mno-avx512f
      SOURCES
        src/kernels/x86/avx2/f32_gemm_6x16_avx2.c
        src/kernels/x86/avx2/pack_avx2.c
        src/kernels/x86/avx2/attention_direct_avx2.c
        src/kernels/x86/avx2/softmax_avx2.c
        src/kernels/x86/avx2/convert_avx2.c
        src/kernels/x86/avx2/head_mix_avx2.c
        src/kernels/x86/avx2/table_avx2.c)
  endif()
  if(MH_ENABLE_AVX512)
    mh_add_isa(avx512 FLAGS -mavx512f -mavx512bw -mavx512dq -mavx512vl -mfma -mf16c
      SOURCES
        src/kernels/x86/avx512/f32_gemm_6x64_avx512.c
        src/kernels/x86/avx512/pack_avx512.c
        src/kernels/x86/avx512/attention_direct_avx512.c
        src/kernels/x86/avx512/softmax_avx512.c
        src/kernels/x86/avx512/convert_avx512.c
        src/kernels/x86/avx512/head_mix_avx512.c
        src/kernels/x86/avx512/table_avx512.c)
  endif()
endif()

if(CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64|arm64|ARM64")
  # NEON (Advanced SIMD) is part of the armv8-a baseline; SVE kernels are vector-length agnostic.
  if(MH_ENABLE_NEON)
    mh_add_isa(neon FLAGS -march=armv8-a
      SOURCES
        src/kernels/arm/neon/f32_gemm_6x16_neon.c
        src/kernels/arm/neon/pack_neon.c
        src/kernels/arm/neon/attention_direct_neon.c
        src/kernels/arm/neon/softmax_neon.c
        src/kernels/arm/neon/convert_neon.c
        src/kernels/arm/neon/head_mix_neon.c
        src/kernels/arm/neon/table_neon.c)
  endif()
  if(MH_ENABLE_SVE)
    mh_add_isa(sve FLAGS -march=armv8-a+sve
      SOURCES
        src/kernels/arm/sve/f32_gemm_6x4vl_sve.c
        src/kernels/arm/sve/pack_sve.c
        src/kernels/arm/sve/attention_direct_sve.c
        src/kernels/arm/sve/softmax_sve.c
        src/kernels/arm/sve/convert_sve.c
        src/kernels/arm/sve/head_mix_sve.c
        src/kernels/arm/sve/table_sve.c)
  endif()
endif()
