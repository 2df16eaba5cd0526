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
#include "kernels/arm/sve/gemm_store_sve.h"

#define FMA_ROW(r)                                                                \
    if (M > r) {                                                                  \
        const svfloat32_t ar = svdup_n_f32(a[(size_t)r * lda + kk]);              \
        c##r##0 = svmla_f32_x(all, c##r##0, ar, b0);                              \
        c##r##1 = svmla_f32_x(all, c##r##1, ar, b1);                              \
        c##r##2 = svmla_f32_x(all, c##r##2, ar, b2);                              \
        c##r##3 = svmla_f32_x(all, c##r##3, ar, b3);                              \
    }

MH_INLINE void gemm_6x4vl(const int M, const int ACC, size_t n, size_t k, const float* a,
                          size_t lda, const float* panel, const float* bias, const float* alpha,
                          float* c, size_t ldc, mh_fetch* fetch) {
    const svbool_t all = svptrue_b32();
    const size_t vl = svcntw(), nr = MH_SVE_GEMM_NV * vl;
    FOR_ROWS(DECLARE_ROW)
    mh_fetch f = mh_fetch_begin(fetch);
    for (size_t kk = 0; kk < k; kk++) {
        mh_fetch_step(&f, kk);
        const float* b = panel + kk * nr; /* the whole panel row exists (zero-padded) */
        const svfloat32_t b0 = svld1_vnum_f32(all, b, 0), b1 = svld1_vnum_f32(all, b, 1);
        const svfloat32_t b2 = svld1_vnum_f32(all, b, 2), b3 = svld1_vnum_f32(all, b, 3);
        FOR_ROWS(FMA_ROW)
    }
    mh_fetch_end(fetch, &f);
    STORE_TILE();
}

void MH_KNAME(gemm)(size_t m, size_t n, size_t k, const float* a, size_t lda, const float* panel, const float* bias,
                    float* c, size_t ldc, mh_fetch* fetch) {
    const float* alpha = NULL;
    GEMM_SWITCH(gemm_6x4vl, m, 0)
}

void MH_KNAME(gemm_acc)(size_t m, size_t n, size_t k, const float* a, size_t lda, const float* panel,
                        const float* alpha, float* c, size_t ldc, mh_fetch* fetch) {
    const float* bias = NULL;
    GEMM_SWITCH(gemm_6x4vl, m, 1)
}
