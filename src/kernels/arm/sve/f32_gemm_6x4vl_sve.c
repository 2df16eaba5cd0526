/*
 * GEMM micro-kernels on packed panels, 6 rows x 4 vectors (NR = 4 * svcntw(): 16 columns at
 * 128-bit SVE, 32 at 256, 64 at 512, 256 at 2048), vector-length agnostic.
 * Register budget (32 z registers): 24 accumulators (6 rows x 4 vectors), 4 for the panel row,
 * 1 for the broadcast of A (LD1RW): 29 of 32. Per k step: 4 panel loads, 6 broadcasts, 24 FMAs.
 * SVE vectors cannot form C arrays, so the accumulators are named c<row><vector> by macros;
 * rows >= M are compiled out of each specialised body (the switch below).
 * Tails: m < 6 by specialisation; n < NR by svwhilelt predicates on every store (and on the
 * bias and C loads), so nothing past column n is read or written.
 */
#include "kernels/kernel_protos.h"
#include "kernels/arm/sve/simd_sve.h"

#define FOR_ROWS(F) F(0) F(1) F(2) F(3) F(4) F(5)

#define DECLARE_ROW(r)                                                            \
    svfloat32_t c##r##0 = svdup_n_f32(0.0f), c##r##1 = svdup_n_f32(0.0f),         \
                c##r##2 = svdup_n_f32(0.0f), c##r##3 = svdup_n_f32(0.0f);

#define FMA_ROW(r)                                                                \
    if (M > r) {                                                                  \
        const svfloat32_t ar = svdup_n_f32(a[(size_t)r * lda + kk]);              \
        c##r##0 = svmla_f32_x(all, c##r##0, ar, b0);                              \
        c##r##1 = svmla_f32_x(all, c##r##1, ar, b1);                              \
        c##r##2 = svmla_f32_x(all, c##r##2, ar, b2);                              \
        c##r##3 = svmla_f32_x(all, c##r##3, ar, b3);                              \
    }

/* Row r, vector v of C (predicate p##v): c = acc + bias, or c = alpha[r] * c + acc. */
#define STORE_ONE(r, v)                                                           \
    if (live##v) {                                                                \
        float* cp = c + (size_t)r * ldc + (size_t)v * vl;                         \
        if (ACC)                                                                  \
            svst1_f32(p##v, cp, svmla_f32_x(p##v, c##r##v, al, svld1_f32(p##v, cp))); \
        else                                                                      \
            svst1_f32(p##v, cp, svadd_f32_x(p##v, c##r##v, bias##v));             \
    }

#define STORE_ROW(r)                                                              \
    if (M > r) {                                                                  \
        const svfloat32_t al = svdup_n_f32(ACC ? alpha[r] : 0.0f);                \
        (void)al;                                                                 \
        STORE_ONE(r, 0) STORE_ONE(r, 1) STORE_ONE(r, 2) STORE_ONE(r, 3)           \
    }

MH_INLINE void gemm_6x4vl(const int M, const int ACC, size_t n, size_t k, const float* a,
                          size_t lda, const float* panel, const float* bias, const float* alpha,
                          float* c, size_t ldc) {
    const svbool_t all = svptrue_b32();
    const size_t vl = svcntw(), nr = MH_SVE_GEMM_NV * vl;
    FOR_ROWS(DECLARE_ROW)
    for (size_t kk = 0; kk < k; kk++) {
        const float* b = panel + kk * nr; /* the whole panel row exists (zero-padded) */
        const svfloat32_t b0 = svld1_vnum_f32(all, b, 0), b1 = svld1_vnum_f32(all, b, 1);
        const svfloat32_t b2 = svld1_vnum_f32(all, b, 2), b3 = svld1_vnum_f32(all, b, 3);
        FOR_ROWS(FMA_ROW)
    }
    /* columns [v * vl, v * vl + vl) that lie below n; a vector with none is skipped */
    const svbool_t p0 = mh_pred(0, n), p1 = mh_pred(vl, n), p2 = mh_pred(2 * vl, n), p3 = mh_pred(3 * vl, n);
    const int live0 = 1, live1 = n > vl, live2 = n > 2 * vl, live3 = n > 3 * vl;
    const svfloat32_t zero = svdup_n_f32(0.0f);
    const svfloat32_t bias0 = !ACC && bias ? svld1_f32(p0, bias) : zero;
    const svfloat32_t bias1 = !ACC && bias && live1 ? svld1_f32(p1, bias + vl) : zero;
    const svfloat32_t bias2 = !ACC && bias && live2 ? svld1_f32(p2, bias + 2 * vl) : zero;
    const svfloat32_t bias3 = !ACC && bias && live3 ? svld1_f32(p3, bias + 3 * vl) : zero;
    FOR_ROWS(STORE_ROW)
}

#define GEMM_CASE(M, ACC) \
    case M: gemm_6x4vl(M, ACC, n, k, a, lda, panel, bias, alpha, c, ldc); break;

void MH_KNAME(gemm)(size_t m, size_t n, size_t k, const float* a, size_t lda,
                                    const float* panel, const float* bias, float* c, size_t ldc) {
    const float* alpha = NULL;
    switch (m) {
        GEMM_CASE(1, 0)
        GEMM_CASE(2, 0)
        GEMM_CASE(3, 0)
        GEMM_CASE(4, 0)
        GEMM_CASE(5, 0)
        GEMM_CASE(6, 0)
    default: break;
    }
}

void MH_KNAME(gemm_acc)(size_t m, size_t n, size_t k, const float* a, size_t lda,
                                        const float* panel, const float* alpha, float* c,
                                        size_t ldc) {
    const float* bias = NULL;
    switch (m) {
        GEMM_CASE(1, 1)
        GEMM_CASE(2, 1)
        GEMM_CASE(3, 1)
        GEMM_CASE(4, 1)
        GEMM_CASE(5, 1)
        GEMM_CASE(6, 1)
    default: break;
    }
}
