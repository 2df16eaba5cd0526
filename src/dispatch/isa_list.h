/*
 * The ISA registry: one row per kernel ISA. It drives mh_isa_name, the automatic choice,
 * detection and table init (src/dispatch), the kernel objects and their flags
 * (cmake/kernels.cmake), the per-ISA tests (tests/CMakeLists.txt, tests/sanitize/tsan.sh,
 * tests/api/test_api.c) and the benchmark report (bench/machine_limits.cc, bench/report.py).
 * CMake, bash and python parse the rows with a regular expression, so keep each row on one
 * line in exactly this form:
 *
 *   X(ENUM, name, arch, priority, "folder", "flags")
 *     ENUM      the mh_isa value without MH_ISA_ (include/multihead.h; values are stable)
 *     name      mh_isa_name, MH_ISA=name, the kernels' name suffix (mh_softmax_tile__name)
 *     arch      x86_64, aarch64 or any: the target architectures that build it
 *     priority  the automatic choice takes the supported ISA with the highest priority
 *     folder    the ISA's kernels under src/kernels/ (simd_<name>.h, table_<name>.c, GEMM)
 *     flags     the compiler flags of its kernel objects (cmake/probes/<name>.c is the probe)
 * and give cpu_features.c a cpu_has_<name>() for it.
 */
#ifndef MH_ISA_LIST_H
#define MH_ISA_LIST_H

#define MH_ISA_LIST(X) \
    X(SCALAR, scalar, any, 0, "scalar", "") \
    X(AVX2, avx2, x86_64, 20, "x86/avx2", "-mavx2 -mfma -mf16c -mno-avx512f") \
    X(AVX512, avx512, x86_64, 30, "x86/avx512", "-mavx512f -mavx512bw -mavx512dq -mavx512vl -mfma -mf16c") \
    X(NEON, neon, aarch64, 10, "arm/neon", "-march=armv8-a") \
    X(SVE, sve, aarch64, 15, "arm/sve", "-march=armv8-a+sve")

#endif
