/* The AVX-512 bf16 GEMMs on AMX tiles (bf16_gemm_amx_avx512.c): the signatures of the
 * gemm_bf16 / gemm_acc_bf16 slots, which the AVX-512 table points at them when
 * mh_cpu_bf16_gemm() says AMX, and the rows they take (the table's gemm_mr_bf16). */
#ifndef MH_BF16_GEMM_AMX_AVX512_H
#define MH_BF16_GEMM_AMX_AVX512_H
#include "kernels/kernel_protos.h"

#define MH_AMX_MR 32

void MH_KNAME(gemm_bf16_amx)(size_t m, size_t n, size_t k, const uint16_t* a, size_t lda, const uint16_t* panel,
                             float* c, size_t ldc, mh_fetch* fetch);
void MH_KNAME(gemm_acc_bf16_amx)(size_t m, size_t n, size_t k, const uint16_t* a, size_t lda,
                                 const uint16_t* panel, const float* alpha, float* c, size_t ldc, mh_fetch* fetch);

#endif
