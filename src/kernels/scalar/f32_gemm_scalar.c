#include "kernels/kernel_protos.h"
#include "kernels/scalar/simd_scalar.h"

#define MR MH_GEMM_MR
#define NR MH_GEMM_NR

/* acc = A[m x k] . panel[k x NR]. Register budget (as a compiler sees it): a 4x8 accumulator
 * (8 SSE registers of baseline x86-64), one broadcast of A per row and one panel row; the NR
 * loop is contiguous and vectorises. */
static inline void accumulate(size_t m, size_t k, const float* a, size_t lda, const float* panel, mh_fetch* fetch,
                              float acc[MR][NR]) {
    mh_fetch f = mh_fetch_begin(fetch);
    if (m == MR) { /* the full tile: constant trip counts keep acc in registers */
        for (size_t kk = 0; kk < k; kk++) {
            mh_fetch_step(&f, kk);
            const float* b = panel + kk * NR;
            for (size_t r = 0; r < MR; r++) {
                const float av = a[r * lda + kk];
                for (size_t j = 0; j < NR; j++) acc[r][j] += av * b[j];
            }
        }
        mh_fetch_end(fetch, &f);
        return;
    }
    for (size_t kk = 0; kk < k; kk++) {
        mh_fetch_step(&f, kk);
        const float* b = panel + kk * NR;
        for (size_t r = 0; r < m; r++) {
            const float av = a[r * lda + kk];
            for (size_t j = 0; j < NR; j++) acc[r][j] += av * b[j];
        }
    }
    mh_fetch_end(fetch, &f);
}

void MH_KNAME(gemm)(size_t m, size_t n, size_t k, const float* a, size_t lda, const float* panel, const float* bias,
                    float* c, size_t ldc, mh_fetch* fetch) {
    float acc[MR][NR] = {{0}};
    accumulate(m, k, a, lda, panel, fetch, acc);
    for (size_t r = 0; r < m; r++)
        for (size_t j = 0; j < n; j++) c[r * ldc + j] = acc[r][j] + (bias ? bias[j] : 0.0f);
}

void MH_KNAME(gemm_acc)(size_t m, size_t n, size_t k, const float* a, size_t lda, const float* panel,
                        const float* alpha, float* c, size_t ldc, mh_fetch* fetch) {
    float acc[MR][NR] = {{0}};
    accumulate(m, k, a, lda, panel, fetch, acc);
    for (size_t r = 0; r < m; r++)
        for (size_t j = 0; j < n; j++) c[r * ldc + j] = alpha[r] * c[r * ldc + j] + acc[r][j];
}
