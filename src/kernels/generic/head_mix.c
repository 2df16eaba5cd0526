/* DCMHA composition (the cross-head mix, contract beside mh_head_mix_factors in kernels.h),
 * written once for every ISA. Per lane, every ISA computes the same chain of FMAs as the
 * scalar reference, so the column blocking below does not change a bit.
 *
 * Rank 2 (the default, with or without static weights and the input scale) takes two vectors
 * of keys per step: its eight low-rank projections hq[r][v] / hk[r][v] are named locals (SVE
 * vectors cannot form arrays), eight independent FMA chains over the input heads that stay in
 * registers across the output heads. Other ranks go one vector at a time, two ranks per pass
 * over the input heads, their projections through a stack buffer (in L1). Full steps use plain loads; only the last vector of the last
 * step is partial (`_n` loads and stores), except where the vocabulary sets
 * MH_HEAD_MIX_SCALAR_TAIL (NEON: the last cols % 4 columns go to the scalar kernel, as they
 * always have). */
#include "kernels/generic/simd.h"

#define MAX_LANES 64 /* the widest vector: 2048-bit SVE */

/* One vector of a step from p: full, or its first `ln` lanes (0 elsewhere) when it is the
 * last vector (v = NV - 1) of a partial step. */
#define LOAD(p, v) (PART && (v) == NV - 1 ? mh_vload_n((p), ln, 0.0f) : mh_vload(p))
#define STORE(p, v, x)                                   \
    do {                                                 \
        if (PART && (v) == NV - 1) mh_vstore_n(p, x, ln); \
        else mh_vstore(p, x);                            \
    } while (0)

/* a[m][c ..] scaled by ascale[m] when SCALED. */
#define LOAD_A(p, v, m) (SCALED ? mh_vmul(LOAD(p, v), mh_vset1(ascale[m])) : LOAD(p, v))

/* Output head n of vector v from its projections hq0, hq1, hk0, hk1 (rank 2). */
#define R2_OUT(v, hq0, hq1, hk0, hk1)                                                                 \
    do {                                                                                             \
        const size_t o = (size_t)(v) * MH_VL;                                                        \
        mh_vf acc = mh_vmul(LOAD_A(ap + o, v, n), mh_vadd(q1, LOAD(kd + o, v)));                     \
        acc = mh_vfma(mh_vset1(f->qw2[n]), hq0, acc);                                                \
        acc = mh_vfma(mh_vset1(f->qw2[g + n]), hq1, acc);                                            \
        acc = mh_vfma(LOAD(k2 + o, v), hk0, acc);                                                    \
        acc = mh_vfma(LOAD(k2 + rs + o, v), hk1, acc);                                               \
        if (MIXED)                                                                                   \
            for (size_t m = 0; m < g; m++)                                                           \
                acc = mh_vfma(mh_vset1(f->wb[m * g + n]), LOAD_A(a + m * lda + c + o, v, m), acc);   \
        STORE(op + o, v, acc);                                                                       \
    } while (0)

/* Rank 2: columns [c, c + NV * VL); the last vector has `ln` lanes when PART. */
MH_INLINE void step_r2(const int NV, const int PART, const int SCALED, const int MIXED, size_t ln,
                       const mh_head_mix_factors* f, size_t c, const float* a, size_t lda,
                       const float* ascale, float* out, size_t ldo) {
    const size_t g = f->g, ldk = f->ldk, rs = g * ldk; /* rows r and r + 1 of kw1 / kw2 */
    mh_vf q00 = mh_vzero(), q01 = q00, q10 = q00, q11 = q00;     /* hq[r][v] */
    mh_vf k00 = q00, k01 = q00, k10 = q00, k11 = q00;           /* hk[r][v] */
    const float* ap = a + c;
    const float* kp = f->kw1 + c;
    for (size_t m = 0; m < g; m++, ap += lda, kp += ldk) {
        const mh_vf w0 = mh_vset1(f->qw1[m]), w1 = mh_vset1(f->qw1[g + m]);
        const mh_vf a0 = LOAD_A(ap, 0, m);
        q00 = mh_vfma(w0, a0, q00), q10 = mh_vfma(w1, a0, q10);
        k00 = mh_vfma(LOAD(kp, 0), a0, k00), k10 = mh_vfma(LOAD(kp + rs, 0), a0, k10);
        if (NV > 1) {
            const mh_vf a1 = LOAD_A(ap + MH_VL, 1, m);
            q01 = mh_vfma(w0, a1, q01), q11 = mh_vfma(w1, a1, q11);
            k01 = mh_vfma(LOAD(kp + MH_VL, 1), a1, k01), k11 = mh_vfma(LOAD(kp + rs + MH_VL, 1), a1, k11);
        }
    }
    ap = a + c;
    const float* k2 = f->kw2 + c;
    const float* kd = f->kdd + c;
    float* op = out + c;
    for (size_t n = 0; n < g; n++, ap += lda, k2 += ldk, kd += ldk, op += ldo) {
        const mh_vf q1 = mh_vset1(1.0f + f->qdd[n]);
        R2_OUT(0, q00, q10, k00, k10);
        if (NV > 1) R2_OUT(1, q01, q11, k01, k11);
    }
}

/* Any rank: columns [c, c + VL) (the first `ln` when PART), the R query-side and R key-side
 * projections through h (in L1). */
MH_INLINE void step_any(const int PART, const int SCALED, const int MIXED, size_t ln,
                        const mh_head_mix_factors* f, size_t c, const float* a, size_t lda,
                        const float* ascale, float* out, size_t ldo) {
    enum { NV = 1 };
    const size_t g = f->g, R = f->rank, ldk = f->ldk, vl = MH_VL;
    float h[2 * MH_HEAD_MIX_MAX_RANK * MAX_LANES]; /* [hq r][lanes] then [hk r][lanes] */
    for (size_t r = 0; r < R; r += 2) { /* ranks r and r + 1 share the loads of a */
        const int two = r + 1 < R;
        const size_t r1 = two ? r + 1 : r;
        mh_vf hq0 = mh_vzero(), hk0 = hq0, hq1 = hq0, hk1 = hq0;
        for (size_t m = 0; m < g; m++) {
            const mh_vf am = LOAD_A(a + m * lda + c, 0, m);
            hq0 = mh_vfma(mh_vset1(f->qw1[r * g + m]), am, hq0);
            hk0 = mh_vfma(LOAD(f->kw1 + (r * g + m) * ldk + c, 0), am, hk0);
            hq1 = mh_vfma(mh_vset1(f->qw1[r1 * g + m]), am, hq1);
            hk1 = mh_vfma(LOAD(f->kw1 + (r1 * g + m) * ldk + c, 0), am, hk1);
        }
        mh_vstore(h + r * vl, hq0);
        mh_vstore(h + (R + r) * vl, hk0);
        if (two) mh_vstore(h + r1 * vl, hq1), mh_vstore(h + (R + r1) * vl, hk1);
    }
    for (size_t n = 0; n < g; n++) {
        const mh_vf gate = mh_vadd(mh_vset1(1.0f + f->qdd[n]), LOAD(f->kdd + n * ldk + c, 0));
        mh_vf acc = mh_vmul(LOAD_A(a + n * lda + c, 0, n), gate);
        for (size_t r = 0; r < R; r++) acc = mh_vfma(mh_vset1(f->qw2[r * g + n]), mh_vload(h + r * vl), acc);
        for (size_t r = 0; r < R; r++)
            acc = mh_vfma(LOAD(f->kw2 + (r * g + n) * ldk + c, 0), mh_vload(h + (R + r) * vl), acc);
        if (MIXED)
            for (size_t m = 0; m < g; m++)
                acc = mh_vfma(mh_vset1(f->wb[m * g + n]), LOAD_A(a + m * lda + c, 0, m), acc);
        STORE(out + n * ldo + c, 0, acc);
    }
}

/* Columns [0, cols): full steps, then one step of the rest (its last vector partial). */
MH_INLINE void columns(const int R2, const int SCALED, const int MIXED, const mh_head_mix_factors* f,
                       size_t cols, const float* a, size_t lda, const float* ascale, float* out,
                       size_t ldo) {
    const size_t vl = MH_VL, step = (R2 ? 2 : 1) * vl;
    size_t c = 0;
    for (; c + step <= cols; c += step)
        if (R2) step_r2(2, 0, SCALED, MIXED, 0, f, c, a, lda, ascale, out, ldo);
        else step_any(0, SCALED, MIXED, 0, f, c, a, lda, ascale, out, ldo);
    const size_t rest = cols - c;
    if (rest == 0) return;
    if (R2 && rest > vl) /* one full vector and a partial one */
        step_r2(2, 1, SCALED, MIXED, rest - vl, f, c, a, lda, ascale, out, ldo);
    else if (R2 && rest == vl)
        step_r2(1, 0, SCALED, MIXED, 0, f, c, a, lda, ascale, out, ldo);
    else if (R2)
        step_r2(1, 1, SCALED, MIXED, rest, f, c, a, lda, ascale, out, ldo);
    else /* rest < vl */
        step_any(1, SCALED, MIXED, rest, f, c, a, lda, ascale, out, ldo);
}

#define COLUMNS(R2, S, M) columns(R2, S, M, f, cols, a, lda, ascale, out, ldo)

void MH_KNAME(head_mix)(const mh_head_mix_factors* f, size_t cols, const float* a, size_t lda,
                        const float* ascale, float* out, size_t ldo) {
    const size_t all = cols;
#if MH_HEAD_MIX_SCALAR_TAIL
    cols = cols / MH_VL * MH_VL;
#endif
    const int r2 = f->rank == 2;
    if (r2 && f->wb) {
        if (ascale) COLUMNS(1, 1, 1);
        else COLUMNS(1, 0, 1);
    } else if (r2) {
        if (ascale) COLUMNS(1, 1, 0);
        else COLUMNS(1, 0, 0);
    } else {
        columns(0, ascale != NULL, f->wb != NULL, f, cols, a, lda, ascale, out, ldo);
    }
    if (cols == all) return;
    mh_head_mix_factors tail = *f; /* only with MH_HEAD_MIX_SCALAR_TAIL */
    tail.kw1 += cols, tail.kw2 += cols, tail.kdd += cols;
    mh_head_mix__scalar(&tail, all - cols, a + cols, lda, ascale, out + cols, ldo);
}
