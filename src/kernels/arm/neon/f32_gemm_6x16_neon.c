/*
 * GEMM micro-kernels on packed panels, 6 rows x 16 columns.
 * Register budget (32 q registers): 24 accumulators (6 rows x 4 vectors of 4), 4 for the panel
 * row, 1 for the broadcast of A (LD1R): 29 of 32. Per k step: 4 panel loads, 6 broadcasts,
 * 24 FMAs.
 * Tails: m < 6 is a specialised body (the switch below); n < 16 stores (and reads bias / C)
 * only the first n columns, through a lane-exact partial path.
 */
#include "kernels/kernel_protos.h"
#include "kernels/arm/neon/gemm_store_neon.h"

MH_INLINE void accumulate(const int M, size_t k, const float* a, size_t lda, const float* panel, mh_fetch* fetch,
                          float32x4_t acc[MR][NV]) {
    MH_UNROLL(16) for (int r = 0; r < M; r++)
        MH_UNROLL(16) for (int v = 0; v < NV; v++) acc[r][v] = vdupq_n_f32(0.0f);
    mh_fetch f = mh_fetch_begin(fetch);
    for (size_t kk = 0; kk < k; kk++) {
        mh_fetch_step(&f, kk);
        const float* b = panel + kk * NR;
        const float32x4_t b0 = vld1q_f32(b), b1 = vld1q_f32(b + 4);
        const float32x4_t b2 = vld1q_f32(b + 8), b3 = vld1q_f32(b + 12);
        MH_UNROLL(16) for (int r = 0; r < M; r++) {
            const float32x4_t ar = vld1q_dup_f32(a + (size_t)r * lda + kk);
            acc[r][0] = vfmaq_f32(acc[r][0], ar, b0);
            acc[r][1] = vfmaq_f32(acc[r][1], ar, b1);
            acc[r][2] = vfmaq_f32(acc[r][2], ar, b2);
            acc[r][3] = vfmaq_f32(acc[r][3], ar, b3);
        }
    }
    mh_fetch_end(fetch, &f);
}

MH_NO_PRE_RA_SCHED void MH_KNAME(gemm)(size_t m, size_t n, size_t k, const float* a, size_t lda, const float* panel,
                                       const float* bias, float* c, size_t ldc, mh_fetch* fetch) {
    GEMM_SWITCH(m, store_bias, bias)
}

MH_NO_PRE_RA_SCHED void MH_KNAME(gemm_acc)(size_t m, size_t n, size_t k, const float* a, size_t lda,
                                           const float* panel, const float* alpha, float* c, size_t ldc,
                                           mh_fetch* fetch) {
    GEMM_SWITCH(m, store_acc, alpha)
}
