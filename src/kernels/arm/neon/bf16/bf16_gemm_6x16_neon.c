/*
 * bf16 GEMM micro-kernels (Arm FEAT_BF16, BFDOT), 6 rows x 16 columns, f32 accumulation.
 * The panel holds k-pairs ([ceil(k/2)][16][2] bf16: pack_kt_bf16 / pack_v_bf16), so one q
 * register is 4 columns x one pair; A's pair (two bf16 of a row) is duplicated as one 32-bit
 * element. BFDOT adds a0*b0 + a1*b1 to each f32 lane: per pair step 4 panel loads, 6
 * duplicates, 24 BFDOTs. Registers as the f32 kernel: 24 accumulators + 4 panel + 1. An odd
 * k's last pair has its second element masked off in both operands (a V key past the row's
 * keys may hold NaN).
 */
#include <string.h>

#include "kernels/kernel_protos.h"
#include "kernels/arm/neon/gemm_store_neon.h"

/* A's pair kp of a row, as one 32-bit element (low half: element 2 kp). */
MH_INLINE uint32_t pair_at(const uint16_t* row, size_t kp) {
    uint32_t u;
    memcpy(&u, row + 2 * kp, sizeof u);
    return u;
}

/* One pair step; `tail` (a constant) keeps only the first element of the pair. */
MH_INLINE void step(const int M, const int tail, size_t kp, const uint16_t* a, size_t lda, const uint16_t* panel,
                    float32x4_t acc[MR][NV]) {
    const uint32x4_t keep = vdupq_n_u32(tail ? 0xffffu : 0xffffffffu);
    const uint16_t* b = panel + kp * NR * 2;
    bfloat16x8_t bv[NV];
    MH_UNROLL(16) for (int v = 0; v < NV; v++) {
        uint32x4_t x = vreinterpretq_u32_u16(vld1q_u16(b + v * 8));
        if (tail) x = vandq_u32(x, keep);
        bv[v] = vreinterpretq_bf16_u32(x);
    }
    MH_UNROLL(16) for (int r = 0; r < M; r++) {
        const uint32_t p = pair_at(a + (size_t)r * lda, kp);
        const bfloat16x8_t ar = vreinterpretq_bf16_u32(vdupq_n_u32(tail ? p & 0xffffu : p));
        MH_UNROLL(16) for (int v = 0; v < NV; v++) acc[r][v] = vbfdotq_f32(acc[r][v], ar, bv[v]);
    }
}

MH_INLINE void accumulate(const int M, size_t k, const uint16_t* a, size_t lda, const uint16_t* panel,
                          mh_fetch* fetch, float32x4_t acc[MR][NV]) {
    MH_UNROLL(16) for (int r = 0; r < M; r++)
        MH_UNROLL(16) for (int v = 0; v < NV; v++) acc[r][v] = vdupq_n_f32(0.0f);
    mh_fetch f = mh_fetch_begin(fetch);
    for (size_t kp = 0; kp < k / 2; kp++) {
        mh_fetch_line(&f);
        step(M, 0, kp, a, lda, panel, acc);
    }
    if (k & 1) {
        mh_fetch_line(&f);
        step(M, 1, k / 2, a, lda, panel, acc);
    }
    mh_fetch_end(fetch, &f);
}

MH_NO_PRE_RA_SCHED void MH_KNAME(gemm_bf16)(size_t m, size_t n, size_t k, const uint16_t* a, size_t lda,
                                            const uint16_t* panel, float* c, size_t ldc, mh_fetch* fetch) {
    const float* bias = NULL;
    GEMM_SWITCH(m, store_bias, bias)
}

MH_NO_PRE_RA_SCHED void MH_KNAME(gemm_acc_bf16)(size_t m, size_t n, size_t k, const uint16_t* a, size_t lda,
                                                const uint16_t* panel, const float* alpha, float* c, size_t ldc,
                                                mh_fetch* fetch) {
    GEMM_SWITCH(m, store_acc, alpha)
}
