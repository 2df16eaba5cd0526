/*
 * For the BF16_GEMMS tests (tests/CMakeLists.txt), which include the library's private
 * headers: NAME.avx512_amx asks for the AMX bf16 GEMMs (MH_BF16_GEMM=amx), and NAME_amxemu is
 * the test built with MH_TEST_AMX_EMULATED and MH_ISA_SUFFIX=amxemu and linked with the AMX
 * kernels' source compiled on tests/support/amx_emulate.h (symbols *__amxemu), which it puts in
 * the AVX-512 table.
 */
#ifndef MH_TEST_BF16_GEMM_CHOICE_H
#define MH_TEST_BF16_GEMM_CHOICE_H
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "dispatch/cpu_features.h"
#include "dispatch/dispatch.h"

/* 1, after saying so, when the run should be Skipped: MH_BF16_GEMM=amx where this CPU or OS
 * gives no AMX (the table holds the other GEMMs), or, in an _amxemu build, no AVX-512
 * table with bf16 GEMMs to put the emulated ones in (done here, before any context). */
#ifdef MH_TEST_AMX_EMULATED
#include "kernels/x86/avx512/bf16/bf16_gemm_amx_avx512.h" /* its names with MH_ISA_SUFFIX amxemu */
static inline int mh_test_bf16_gemm_skip(void) {
    mh_dispatch_bf16_ready(); /* AMX's own GEMMs, where granted, in before the emulated replace them */
    mh_kernels* k = (mh_kernels*)(void*)mh_dispatch_table(MH_ISA_AVX512); /* the process's own table */
    if (!k || !k->gemm_bf16 || !mh_cpu_has_bf16(MH_ISA_AVX512)) {
        printf("skipped: no AVX-512 bf16 GEMMs here to replace by the emulated AMX ones\n");
        return 1;
    }
    k->gemm_bf16 = MH_KNAME(gemm_bf16_amx);
    k->gemm_acc_bf16 = MH_KNAME(gemm_acc_bf16_amx);
    k->gemm_mr_bf16 = MH_AMX_MR;
    return 0;
}
#else
static inline int mh_test_bf16_gemm_skip(void) {
    const char* env = getenv("MH_BF16_GEMM");
    if (!env || strcasecmp(env, "amx") != 0 || mh_dispatch_bf16_ready()) return 0;
    printf("skipped: MH_BF16_GEMM=amx, and this CPU or OS gives no AMX-BF16\n");
    return 1;
}
#endif

#endif
