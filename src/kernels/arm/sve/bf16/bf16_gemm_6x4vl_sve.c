/*
 * bf16 GEMM micro-kernels (SVE BF16, BFDOT), 6 rows x 4 vectors (NR = 4 * svcntw()), f32
 * accumulation, vector-length agnostic. The panel holds k-pairs ([ceil(k/2)][NR][2] bf16:
 * pack_kt_bf16 / pack_v_bf16), so one z register is svcntw() columns x one pair; A's pair (two
 * bf16 of a row) is duplicated as one 32-bit element. BFDOT adds a0*b0 + a1*b1 to each f32
 * lane: per pair step 4 panel loads, 6 duplicates, 24 BFDOTs; accumulators, stores and the
 * row-count switch are the f32 kernel's (gemm_store_sve.h). An odd k's last pair has its
 * second element masked off in both operands (a V key past the row's keys may hold NaN).
 */
#include <string.h>

#include "kernels/kernel_protos.h"
#include "kernels/arm/sve/gemm_store_sve.h"

/* A's pair kp of a row, as one 32-bit element (low half: element 2 kp). */
MH_INLINE uint32_t pair_at(const uint16_t* row, size_t kp) {
    uint32_t u;
    memcpy(&u, row + 2 * kp, sizeof u);
    return u;
}

/* Vector v of a panel pair row; `tail` (a constant) keeps only each pair's first element. */
MH_INLINE svbfloat16_t panel_vec(const uint16_t* b, int64_t v, const int tail) {
    const svuint16_t x = svld1_vnum_u16(svptrue_b16(), b, v);
    return tail ? svreinterpret_bf16_u32(svand_n_u32_x(svptrue_b32(), svreinterpret_u32_u16(x), 0xffffu))
                : svreinterpret_bf16_u16(x);
}

#define DOT_ROW(r)                                                                           \
    if (M > r) {                                                                             \
        const uint32_t pr = pair_at(a + (size_t)r * lda, kp_);                               \
        const svbfloat16_t ar = svreinterpret_bf16_u32(svdup_n_u32(tail_ ? pr & 0xffffu : pr)); \
        c##r##0 = svbfdot_f32(c##r##0, b0, ar);                                              \
        c##r##1 = svbfdot_f32(c##r##1, b1, ar);                                              \
        c##r##2 = svbfdot_f32(c##r##2, b2, ar);                                              \
        c##r##3 = svbfdot_f32(c##r##3, b3, ar);                                              \
    }

/* Pair KP of every row; TAIL (a constant) for an odd k's last pair. */
#define PAIR_STEP(KP, TAIL)                                                                  \
    do {                                                                                     \
        const size_t kp_ = (KP);                                                             \
        const int tail_ = (TAIL);                                                            \
        const uint16_t* b = panel + kp_ * nr * 2; /* the whole panel pair row exists */      \
        const svbfloat16_t b0 = panel_vec(b, 0, TAIL), b1 = panel_vec(b, 1, TAIL);           \
        const svbfloat16_t b2 = panel_vec(b, 2, TAIL), b3 = panel_vec(b, 3, TAIL);           \
        FOR_ROWS(DOT_ROW)                                                                    \
    } while (0)

MH_INLINE void gemm_bf16_6x4vl(const int M, const int ACC, size_t n, size_t k, const uint16_t* a, size_t lda,
                               const uint16_t* panel, const float* bias, const float* alpha, float* c,
                               size_t ldc, mh_fetch* fetch) {
    const size_t vl = svcntw(), nr = MH_SVE_GEMM_NV * vl;
    FOR_ROWS(DECLARE_ROW)
    mh_fetch f = mh_fetch_begin(fetch);
    for (size_t kp = 0; kp < k / 2; kp++) {
        mh_fetch_line(&f);
        PAIR_STEP(kp, 0);
    }
    if (k & 1) {
        mh_fetch_line(&f);
        PAIR_STEP(k / 2, 1);
    }
    mh_fetch_end(fetch, &f);
    STORE_TILE();
}

void MH_KNAME(gemm_bf16)(size_t m, size_t n, size_t k, const uint16_t* a, size_t lda, const uint16_t* panel,
                         float* c, size_t ldc, mh_fetch* fetch) {
    const float *bias = NULL, *alpha = NULL;
    GEMM_SWITCH(gemm_bf16_6x4vl, m, 0)
}

void MH_KNAME(gemm_acc_bf16)(size_t m, size_t n, size_t k, const uint16_t* a, size_t lda, const uint16_t* panel,
                             const float* alpha, float* c, size_t ldc, mh_fetch* fetch) {
    const float* bias = NULL;
    GEMM_SWITCH(gemm_bf16_6x4vl, m, 1)
}
