/*
 * GEMM micro-kernels on packed panels, 6 rows x 16 columns.
 * Register budget (32 q registers): 24 accumulators (6 rows x 4 vectors of 4), 4 for the panel
 * row, 1 for the broadcast of A (LD1R): 29 of 32. Per k step: 4 panel loads, 6 broadcasts,
 * 24 FMAs.
 * Tails: m < 6 is a specialised body (the switch below); n < 16 stores (and reads bias / C)
 * only the first n columns, through a lane-exact partial path.
 */
#include "kernels/kernel_protos.h"
#include "kernels/arm/neon/simd_neon.h"

#define MR MH_GEMM_MR
#define NR MH_GEMM_NR
#define NV 4

MH_INLINE void accumulate(const int M, size_t k, const float* a, size_t lda, const float* panel,
                          float32x4_t acc[MR][NV]) {
    MH_UNROLL for (int r = 0; r < M; r++)
        MH_UNROLL for (int v = 0; v < NV; v++) acc[r][v] = vdupq_n_f32(0.0f);
    for (size_t kk = 0; kk < k; kk++) {
        const float* b = panel + kk * NR;
        const float32x4_t b0 = vld1q_f32(b), b1 = vld1q_f32(b + 4);
        const float32x4_t b2 = vld1q_f32(b + 8), b3 = vld1q_f32(b + 12);
        MH_UNROLL for (int r = 0; r < M; r++) {
            const float32x4_t ar = vld1q_dup_f32(a + (size_t)r * lda + kk);
            acc[r][0] = vfmaq_f32(acc[r][0], ar, b0);
            acc[r][1] = vfmaq_f32(acc[r][1], ar, b1);
            acc[r][2] = vfmaq_f32(acc[r][2], ar, b2);
            acc[r][3] = vfmaq_f32(acc[r][3], ar, b3);
        }
    }
}

MH_INLINE void store_bias(const int M, size_t n, const float* bias, float* c, size_t ldc,
                          float32x4_t acc[MR][NV]) {
    MH_UNROLL for (int v = 0; v < NV; v++) {
        const size_t cnt = mh_cnt4(n, (size_t)v * 4);
        if (cnt == 0) break;
        const float32x4_t b = bias ? mh_vload_n(bias + v * 4, cnt, 0.0f) : vdupq_n_f32(0.0f);
        MH_UNROLL for (int r = 0; r < M; r++) mh_vstore_n(c + (size_t)r * ldc + v * 4, vaddq_f32(acc[r][v], b), cnt);
    }
}

MH_INLINE void store_acc(const int M, size_t n, const float* alpha, float* c, size_t ldc,
                         float32x4_t acc[MR][NV]) {
    MH_UNROLL for (int r = 0; r < M; r++) {
        const float32x4_t al = vdupq_n_f32(alpha[r]);
        MH_UNROLL for (int v = 0; v < NV; v++) {
            const size_t cnt = mh_cnt4(n, (size_t)v * 4);
            if (cnt == 0) break;
            float* cp = c + (size_t)r * ldc + v * 4;
            mh_vstore_n(cp, vfmaq_f32(acc[r][v], al, mh_vload_n(cp, cnt, 0.0f)), cnt);
        }
    }
}

#define GEMM_CASE(M, STORE, EXTRA)            \
    case M: {                                 \
        float32x4_t acc[MR][NV];              \
        accumulate(M, k, a, lda, panel, acc); \
        STORE(M, n, EXTRA, c, ldc, acc);      \
        break;                                \
    }

MH_NO_PRE_RA_SCHED void MH_KNAME(gemm)(size_t m, size_t n, size_t k, const float* a, size_t lda,
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

MH_NO_PRE_RA_SCHED void MH_KNAME(gemm_acc)(size_t m, size_t n, size_t k, const float* a, size_t lda,
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
