/* DCMHA composition, vector-length agnostic (contract in kernels.h). Tails are svwhilelt
 * predicates: inactive lanes are neither read nor written. The default rank R = 2 without
 * static weights takes two vectors of keys per step with its eight low-rank projections in
 * registers (eight independent FMA chains over the input heads). Sizeless SVE vectors cannot
 * form arrays, so any other rank or static weights go one vector at a time, the R query-side and
 * R key-side projections of a column block through a stack buffer (in L1). */
#include "kernels/kernel_protos.h"
#include "kernels/arm/sve/simd_sve.h"

#define MAX_LANES 64 /* 2048-bit vectors, the architectural maximum */

/* a'[m] for the active lanes from column c. */
MH_INLINE svfloat32_t load_a(svbool_t pg, const float* a, size_t lda, const float* ascale, size_t m,
                             size_t c) {
    const svfloat32_t v = svld1_f32(pg, a + m * lda + c);
    return ascale ? svmul_n_f32_x(pg, v, ascale[m]) : v;
}

/* Output head n of R = 2 for the active lanes of pg at column c, from the projections
 * hq0, hq1, hk0, hk1. */
MH_INLINE void out_r2(const mh_head_mix_factors* f, const int scaled, svbool_t pg, size_t n, size_t c,
                      svfloat32_t hq0, svfloat32_t hq1, svfloat32_t hk0, svfloat32_t hk1, const float* a,
                      size_t lda, const float* ascale, float* out, size_t ldo) {
    const size_t g = f->g, ldk = f->ldk;
    const float* k2 = f->kw2 + n * ldk + c;
    svfloat32_t an = svld1_f32(pg, a + n * lda + c);
    if (scaled) an = svmul_n_f32_x(pg, an, ascale[n]);
    svfloat32_t acc = svmul_f32_x(pg, an, svadd_n_f32_x(pg, svld1_f32(pg, f->kdd + n * ldk + c), 1.0f + f->qdd[n]));
    acc = svmla_n_f32_x(pg, acc, hq0, f->qw2[n]);
    acc = svmla_n_f32_x(pg, acc, hq1, f->qw2[g + n]);
    acc = svmla_f32_x(pg, acc, svld1_f32(pg, k2), hk0);
    acc = svmla_f32_x(pg, acc, svld1_f32(pg, k2 + g * ldk), hk1);
    svst1_f32(pg, out + n * ldo + c, acc);
}

/* R = 2, no static weights: columns [c, c + 2 VL) (lanes past cols inactive). */
MH_INLINE void step_r2(const mh_head_mix_factors* f, const int scaled, size_t c, size_t cols, const float* a,
                       size_t lda, const float* ascale, float* out, size_t ldo) {
    const size_t g = f->g, ldk = f->ldk, vl = svcntw(), rs = g * ldk; /* rows r and r + 1 of kw1 */
    const svbool_t p0 = mh_pred(c, cols), p1 = mh_pred(c + vl, cols);
    svfloat32_t q00 = svdup_n_f32(0.0f), q01 = q00, q10 = q00, q11 = q00; /* hq[r][v] */
    svfloat32_t k00 = q00, k01 = q00, k10 = q00, k11 = q00;               /* hk[r][v] */
    const float* ap = a + c;
    const float* kp = f->kw1 + c;
    for (size_t m = 0; m < g; m++, ap += lda, kp += ldk) {
        svfloat32_t a0 = svld1_f32(p0, ap), a1 = svld1_f32(p1, ap + vl);
        if (scaled) a0 = svmul_n_f32_x(p0, a0, ascale[m]), a1 = svmul_n_f32_x(p1, a1, ascale[m]);
        const float w0 = f->qw1[m], w1 = f->qw1[g + m];
        q00 = svmla_n_f32_x(p0, q00, a0, w0), q01 = svmla_n_f32_x(p1, q01, a1, w0);
        q10 = svmla_n_f32_x(p0, q10, a0, w1), q11 = svmla_n_f32_x(p1, q11, a1, w1);
        k00 = svmla_f32_x(p0, k00, svld1_f32(p0, kp), a0), k01 = svmla_f32_x(p1, k01, svld1_f32(p1, kp + vl), a1);
        k10 = svmla_f32_x(p0, k10, svld1_f32(p0, kp + rs), a0);
        k11 = svmla_f32_x(p1, k11, svld1_f32(p1, kp + rs + vl), a1);
    }
    for (size_t n = 0; n < g; n++) {
        out_r2(f, scaled, p0, n, c, q00, q10, k00, k10, a, lda, ascale, out, ldo);
        out_r2(f, scaled, p1, n, c + vl, q01, q11, k01, k11, a, lda, ascale, out, ldo);
    }
}

void MH_KNAME(head_mix)(const mh_head_mix_factors* f, size_t cols, const float* a, size_t lda,
                      const float* ascale, float* out, size_t ldo) {
    const size_t g = f->g, R = f->rank, ldk = f->ldk, vl = svcntw();
    if (R == 2 && !f->wb) {
        for (size_t c = 0; c < cols; c += 2 * vl) {
            if (ascale) step_r2(f, 1, c, cols, a, lda, ascale, out, ldo);
            else step_r2(f, 0, c, cols, a, lda, ascale, out, ldo);
        }
        return;
    }
    float h[2 * MH_HEAD_MIX_MAX_RANK * MAX_LANES]; /* [hq r][lanes] then [hk r][lanes] */
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
