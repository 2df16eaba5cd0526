/*
 * GEMM micro-kernels on packed panels, 6 rows x 16 columns.
 * Register budget: 12 ymm accumulators (6 rows x 2 vectors of 8), 2 ymm for the panel row,
 * 1 for the broadcast of A: 15 of 16. Per k step: 2 panel loads, 6 broadcasts (load-port
 * only), 12 FMAs, so the two FMA ports stay the bottleneck.
 * Tails: m < 6 is a specialised body (the switch below); n < 16 uses maskload / maskstore on
 * C and bias, so nothing past column n of C or of bias is read or written. The panel is
 * zero-padded to 16 columns by contract and is always read whole.
 */
#include "kernels/x86/avx2/kernels_avx2.h"
#include "kernels/x86/avx2/simd_avx2.h"

#define MR 6
#define NR 16

MH_INLINE void accumulate(const int M, size_t k, const float* a, size_t lda, const float* panel,
                          __m256 acc[MR][2]) {
    for (int r = 0; r < M; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (size_t kk = 0; kk < k; kk++) {
        const float* b = panel + kk * NR;
        const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
        for (int r = 0; r < M; r++) {
            const __m256 ar = _mm256_broadcast_ss(a + (size_t)r * lda + kk);
            acc[r][0] = _mm256_fmadd_ps(ar, b0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(ar, b1, acc[r][1]);
        }
    }
}

MH_INLINE void store_bias(const int M, size_t n, const float* bias, float* c, size_t ldc,
                          __m256 acc[MR][2]) {
    if (n == NR) {
        const __m256 b0 = bias ? _mm256_loadu_ps(bias) : _mm256_setzero_ps();
        const __m256 b1 = bias ? _mm256_loadu_ps(bias + 8) : _mm256_setzero_ps();
        for (int r = 0; r < M; r++) {
            _mm256_storeu_ps(c + (size_t)r * ldc, _mm256_add_ps(acc[r][0], b0));
            _mm256_storeu_ps(c + (size_t)r * ldc + 8, _mm256_add_ps(acc[r][1], b1));
        }
        return;
    }
    for (int v = 0; v < 2; v++) {
        const size_t cnt = mh_lanes8(n, (size_t)v * 8);
        if (cnt == 0) break;
        const __m256i mask = mh_mask8(cnt);
        const __m256 b = bias ? _mm256_maskload_ps(bias + v * 8, mask) : _mm256_setzero_ps();
        for (int r = 0; r < M; r++)
            _mm256_maskstore_ps(c + (size_t)r * ldc + v * 8, mask, _mm256_add_ps(acc[r][v], b));
    }
}

MH_INLINE void store_acc(const int M, size_t n, const float* alpha, float* c, size_t ldc,
                         __m256 acc[MR][2]) {
    if (n == NR) {
        for (int r = 0; r < M; r++) {
            const __m256 al = _mm256_broadcast_ss(alpha + r);
            float* cp = c + (size_t)r * ldc;
            _mm256_storeu_ps(cp, _mm256_fmadd_ps(al, _mm256_loadu_ps(cp), acc[r][0]));
            _mm256_storeu_ps(cp + 8, _mm256_fmadd_ps(al, _mm256_loadu_ps(cp + 8), acc[r][1]));
        }
        return;
    }
    for (int v = 0; v < 2; v++) {
        const size_t cnt = mh_lanes8(n, (size_t)v * 8);
        if (cnt == 0) break;
        const __m256i mask = mh_mask8(cnt);
        for (int r = 0; r < M; r++) {
            const __m256 al = _mm256_broadcast_ss(alpha + r);
            float* cp = c + (size_t)r * ldc + v * 8;
            _mm256_maskstore_ps(cp, mask, _mm256_fmadd_ps(al, _mm256_maskload_ps(cp, mask), acc[r][v]));
        }
    }
}

#define GEMM_CASE(M, STORE, EXTRA)            \
    case M: {                                 \
        __m256 acc[MR][2];                    \
        accumulate(M, k, a, lda, panel, acc); \
        STORE(M, n, EXTRA, c, ldc, acc);      \
        break;                                \
    }

void mh_f32_gemm_ukernel_6x16__avx2(size_t m, size_t n, size_t k, const float* a, size_t lda,
                                    const float* panel, const float* bias, float* c, size_t ldc) {
    switch (m) {
        GEMM_CASE(1, store_bias, bias)
        GEMM_CASE(2, store_bias, bias)
        GEMM_CASE(3, store_bias, bias)
        GEMM_CASE(4, store_bias, bias)
        GEMM_CASE(5, store_bias, bias)
        GEMM_CASE(6, store_bias, bias)
    default: break;
    }
}

void mh_f32_gemm_acc_ukernel_6x16__avx2(size_t m, size_t n, size_t k, const float* a, size_t lda,
                                        const float* panel, const float* alpha, float* c,
                                        size_t ldc) {
    switch (m) {
        GEMM_CASE(1, store_acc, alpha)
        GEMM_CASE(2, store_acc, alpha)
        GEMM_CASE(3, store_acc, alpha)
        GEMM_CASE(4, store_acc, alpha)
        GEMM_CASE(5, store_acc, alpha)
        GEMM_CASE(6, store_acc, alpha)
    default: break;
    }
}
