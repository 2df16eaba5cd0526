/*
 * The scalar ISA's bf16 GEMMs: the reference of the bf16 compute mode's arithmetic, and that
 * ISA's own kernels (not a fallback of another ISA). Operands are bf16, widened exactly to
 * f32; each product of two bf16 is exact in f32 and is added to an f32 sum in k order.
 * Panels hold k-pairs ([ceil(k/2)][NR][2]).
 */
#include "kernels/kernel_protos.h"
#include "kernels/scalar/convert_scalar.h"
#include "kernels/scalar/simd_scalar.h"

#define MR MH_GEMM_MR
#define NR MH_GEMM_NR

/* acc = A[m x k] . panel[k x n] over bf16 operands; the fetch's lines (one per k-pair) first. */
static void accumulate(size_t m, size_t n, size_t k, const uint16_t* a, size_t lda, const uint16_t* panel,
                       mh_fetch* fetch, float acc[MR][NR]) {
    mh_fetch f = mh_fetch_begin(fetch);
    for (size_t kp = 0; kp < (k + 1) / 2; kp++) mh_fetch_line(&f);
    mh_fetch_end(fetch, &f);
    for (size_t r = 0; r < m; r++)
        for (size_t j = 0; j < n; j++) {
            float s = 0.0f;
            for (size_t kk = 0; kk < k; kk++)
                s += mh_bf16_to_f32(a[r * lda + kk]) * mh_bf16_to_f32(panel[((kk / 2) * NR + j) * 2 + kk % 2]);
            acc[r][j] = s;
        }
}

void MH_KNAME(gemm_bf16)(size_t m, size_t n, size_t k, const uint16_t* a, size_t lda, const uint16_t* panel,
                         float* c, size_t ldc, mh_fetch* fetch) {
    float acc[MR][NR];
    accumulate(m, n, k, a, lda, panel, fetch, acc);
    for (size_t r = 0; r < m; r++)
        for (size_t j = 0; j < n; j++) c[r * ldc + j] = acc[r][j];
}

void MH_KNAME(gemm_acc_bf16)(size_t m, size_t n, size_t k, const uint16_t* a, size_t lda, const uint16_t* panel,
                             const float* alpha, float* c, size_t ldc, mh_fetch* fetch) {
    float acc[MR][NR];
    accumulate(m, n, k, a, lda, panel, fetch, acc);
    for (size_t r = 0; r < m; r++)
        for (size_t j = 0; j < n; j++) c[r * ldc + j] = alpha[r] * c[r * ldc + j] + acc[r][j];
}
