/* The stores of the NEON GEMM micro-kernels (f32 and bf16): a 6 x 16 tile of f32 accumulators
 * acc[MR][NV] written to c, only the first n columns (a lane-exact partial path), and the
 * row-count switch (gemm_switch.h). */
#ifndef MH_GEMM_STORE_NEON_H
#define MH_GEMM_STORE_NEON_H
#include "kernels/kernel_protos.h"
#include "kernels/arm/neon/simd_neon.h"

#define MR MH_GEMM_MR
#define NR MH_GEMM_NR
#define NV 4
#define MH_GEMM_ACC float32x4_t
#include "kernels/gemm_switch.h"

/* c = acc + bias (bias NULL: + 0). */
MH_INLINE void store_bias(const int M, size_t n, const float* bias, float* c, size_t ldc,
                          float32x4_t acc[MR][NV]) {
    MH_UNROLL(16) for (int v = 0; v < NV; v++) {
        const size_t cnt = mh_cnt4(n, (size_t)v * 4);
        if (cnt == 0) break;
        const float32x4_t b = bias ? mh_vload_n(bias + v * 4, cnt, 0.0f) : vdupq_n_f32(0.0f);
        MH_UNROLL(16) for (int r = 0; r < M; r++) mh_vstore_n(c + (size_t)r * ldc + v * 4, vaddq_f32(acc[r][v], b), cnt);
    }
}

/* c = alpha[r] * c + acc. */
MH_INLINE void store_acc(const int M, size_t n, const float* alpha, float* c, size_t ldc,
                         float32x4_t acc[MR][NV]) {
    MH_UNROLL(16) for (int r = 0; r < M; r++) {
        const float32x4_t al = vdupq_n_f32(alpha[r]);
        MH_UNROLL(16) for (int v = 0; v < NV; v++) {
            const size_t cnt = mh_cnt4(n, (size_t)v * 4);
            if (cnt == 0) break;
            float* cp = c + (size_t)r * ldc + v * 4;
            mh_vstore_n(cp, vfmaq_f32(acc[r][v], al, mh_vload_n(cp, cnt, 0.0f)), cnt);
        }
    }
}

#endif
