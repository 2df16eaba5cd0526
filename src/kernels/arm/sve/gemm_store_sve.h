/* What the SVE GEMM micro-kernels (f32 and bf16) share: their accumulators c<row><vector>
 * (SVE vectors cannot form C arrays), the store of the 6 x 4vl tile and the row-count switch. */
#ifndef MH_GEMM_STORE_SVE_H
#define MH_GEMM_STORE_SVE_H
#include "kernels/arm/sve/simd_sve.h"

#define FOR_ROWS(F) F(0) F(1) F(2) F(3) F(4) F(5)

#define DECLARE_ROW(r)                                                            \
    svfloat32_t c##r##0 = svdup_n_f32(0.0f), c##r##1 = svdup_n_f32(0.0f),         \
                c##r##2 = svdup_n_f32(0.0f), c##r##3 = svdup_n_f32(0.0f);

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

/* Writes the tile (rows < M, columns < n) from c<r><v>: c = acc + bias, or with ACC
 * c = alpha[r] * c + acc. Needs n, vl, ACC, M, bias, alpha, c, ldc in scope. */
#define STORE_TILE()    \
    do {                                                                      \
        /* columns [v * vl, v * vl + vl) that lie below n; a vector with none is skipped */ \
        const svbool_t p0 = mh_pred(0, n), p1 = mh_pred(vl, n), p2 = mh_pred(2 * vl, n), p3 = mh_pred(3 * vl, n); \
        const int live0 = 1, live1 = n > vl, live2 = n > 2 * vl, live3 = n > 3 * vl;      \
        const svfloat32_t zero = svdup_n_f32(0.0f);                                       \
        const svfloat32_t bias0 = !ACC && bias ? svld1_f32(p0, bias) : zero;              \
        const svfloat32_t bias1 = !ACC && bias && live1 ? svld1_f32(p1, bias + vl) : zero; \
        const svfloat32_t bias2 = !ACC && bias && live2 ? svld1_f32(p2, bias + 2 * vl) : zero; \
        const svfloat32_t bias3 = !ACC && bias && live3 ? svld1_f32(p3, bias + 3 * vl) : zero; \
        FOR_ROWS(STORE_ROW)                                                               \
    } while (0)

/* The body of a micro-kernel: FN(M, ACC, n, k, a, lda, panel, bias, alpha, c, ldc, fetch)
 * specialised per row count m = 1..6. */
#define GEMM_CASE(FN, M, ACC) \
    case M: FN(M, ACC, n, k, a, lda, panel, bias, alpha, c, ldc, fetch); break;
#define GEMM_SWITCH(FN, m, ACC)    \
    switch (m) {                   \
        GEMM_CASE(FN, 1, ACC)      \
        GEMM_CASE(FN, 2, ACC)      \
        GEMM_CASE(FN, 3, ACC)      \
        GEMM_CASE(FN, 4, ACC)      \
        GEMM_CASE(FN, 5, ACC)      \
        GEMM_CASE(FN, 6, ACC)      \
    default: break;                \
    }

#endif
