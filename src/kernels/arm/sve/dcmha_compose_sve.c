/* DCMHA composition, one vector of keys at a time, vector-length agnostic (contract in
 * kernels.h). Sizeless SVE vectors cannot form arrays, so the R query-side and R key-side
 * low-rank projections of a column block go through a stack buffer (in L1). Tails are
 * svwhilelt predicates: inactive lanes are neither read nor written. */
#include "kernels/arm/sve/kernels_sve.h"
#include "kernels/arm/sve/simd_sve.h"

#define MAX_LANES 64 /* 2048-bit vectors, the architectural maximum */

/* a'[m] for the active lanes from column c. */
MH_INLINE svfloat32_t load_a(svbool_t pg, const float* a, size_t lda, const float* ascale, size_t m,
                             size_t c) {
    const svfloat32_t v = svld1_f32(pg, a + m * lda + c);
    return ascale ? svmul_n_f32_x(pg, v, ascale[m]) : v;
}

void mh_dcmha_compose__sve(const mh_compose_factors* f, size_t cols, const float* a, size_t lda,
                           const float* ascale, float* out, size_t ldo) {
    const size_t g = f->g, R = f->rank, ldk = f->ldk, vl = svcntw();
    float h[2 * MH_DCMHA_MAX_RANK * MAX_LANES]; /* [hq r][lanes] then [hk r][lanes] */
    for (size_t c = 0; c < cols; c += vl) {
        const svbool_t pg = mh_pred(c, cols);
        for (size_t r = 0; r < R; r++) {
            svfloat32_t hq = svdup_n_f32(0.0f), hk = svdup_n_f32(0.0f);
            for (size_t m = 0; m < g; m++) {
                const svfloat32_t am = load_a(pg, a, lda, ascale, m, c);
                hq = svmla_n_f32_x(pg, hq, am, f->qw1[r * g + m]);
                hk = svmla_f32_x(pg, hk, svld1_f32(pg, f->kw1 + (r * g + m) * ldk + c), am);
            }
            svst1_f32(pg, h + r * vl, hq);
            svst1_f32(pg, h + (R + r) * vl, hk);
        }
        for (size_t n = 0; n < g; n++) {
            const svfloat32_t gate = svadd_n_f32_x(pg, svld1_f32(pg, f->kdd + n * ldk + c), 1.0f + f->qdd[n]);
            svfloat32_t acc = svmul_f32_x(pg, load_a(pg, a, lda, ascale, n, c), gate);
            for (size_t r = 0; r < R; r++)
                acc = svmla_n_f32_x(pg, acc, svld1_f32(pg, h + r * vl), f->qw2[r * g + n]);
            for (size_t r = 0; r < R; r++)
                acc = svmla_f32_x(pg, acc, svld1_f32(pg, f->kw2 + (r * g + n) * ldk + c),
                                  svld1_f32(pg, h + (R + r) * vl));
            if (f->wb)
                for (size_t m = 0; m < g; m++)
                    acc = svmla_n_f32_x(pg, acc, load_a(pg, a, lda, ascale, m, c), f->wb[m * g + n]);
            svst1_f32(pg, out + n * ldo + c, acc);
        }
    }
}
