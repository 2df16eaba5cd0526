/* DCMHA composition, 4 keys per vector (contract in kernels.h). Two vectors of keys per step:
 * the sums over the input heads are chains of dependent FMAs, and two blocks give the core
 * twice as many independent chains. The query-side and key-side low-rank projections of a
 * block stay in registers across the output heads. A step walks the heads with pointers bumped
 * by lda/ldk; R = 2 without static weights is specialised (with and without the input scale).
 * NEON has no masked loads: the last columns (fewer than 4) go to the scalar kernel. */
#include "kernels/arm/neon/simd_neon.h"
#include "kernels/kernel_protos.h"

#define V 2 /* vectors per step */

/* Columns [c, c + 4 * nv), rank R, the input scaled by ascale when `scaled`, static weights
 * when `mixed` (constants where inlined with them). */
MH_INLINE void block(const mh_head_mix_factors* f, const size_t R, const int scaled, const int mixed, const int nv,
                     size_t c, const float* a, size_t lda, const float* ascale, float* out, size_t ldo) {
    const size_t g = f->g, ldk = f->ldk, rstride = g * ldk; /* rows r and r + 1 of kw1/kw2 */
    float32x4_t hq[MH_HEAD_MIX_MAX_RANK][V], hk[MH_HEAD_MIX_MAX_RANK][V];
    for (size_t r = 0; r < R; r++)
        for (int v = 0; v < nv; v++) hq[r][v] = hk[r][v] = vdupq_n_f32(0.0f);
    const float* ap = a + c;
    const float* kp = f->kw1 + c;
    for (size_t m = 0; m < g; m++, ap += lda, kp += ldk) {
        float32x4_t am[V];
        for (int v = 0; v < nv; v++) {
            am[v] = vld1q_f32(ap + 4 * v);
            if (scaled) am[v] = vmulq_n_f32(am[v], ascale[m]);
        }
        for (size_t r = 0; r < R; r++) {
            const float qw = f->qw1[r * g + m];
            for (int v = 0; v < nv; v++) {
                hq[r][v] = vfmaq_n_f32(hq[r][v], am[v], qw);
                hk[r][v] = vfmaq_f32(hk[r][v], vld1q_f32(kp + r * rstride + 4 * v), am[v]);
            }
        }
    }
    ap = a + c;
    const float* k2 = f->kw2 + c;
    const float* kd = f->kdd + c;
    float* op = out + c;
    for (size_t n = 0; n < g; n++, ap += lda, k2 += ldk, kd += ldk, op += ldo) {
        const float32x4_t q1 = vdupq_n_f32(1.0f + f->qdd[n]);
        for (int v = 0; v < nv; v++) {
            float32x4_t an = vld1q_f32(ap + 4 * v);
            if (scaled) an = vmulq_n_f32(an, ascale[n]);
            float32x4_t acc = vmulq_f32(an, vaddq_f32(q1, vld1q_f32(kd + 4 * v)));
            for (size_t r = 0; r < R; r++) acc = vfmaq_n_f32(acc, hq[r][v], f->qw2[r * g + n]);
            for (size_t r = 0; r < R; r++) acc = vfmaq_f32(acc, vld1q_f32(k2 + r * rstride + 4 * v), hk[r][v]);
            if (mixed)
                for (size_t m = 0; m < g; m++) {
                    float32x4_t am = vld1q_f32(a + m * lda + c + 4 * v);
                    if (scaled) am = vmulq_n_f32(am, ascale[m]);
                    acc = vfmaq_n_f32(acc, am, f->wb[m * g + n]);
                }
            vst1q_f32(op + 4 * v, acc);
        }
    }
}

/* Whole vectors of columns: steps of V vectors, then one step of the rest. */
MH_INLINE void columns(const mh_head_mix_factors* f, const size_t R, const int scaled, const int mixed, size_t full,
                       const float* a, size_t lda, const float* ascale, float* out, size_t ldo) {
    const size_t step = V * 4;
    size_t c = 0;
    for (; c + step <= full; c += step) block(f, R, scaled, mixed, V, c, a, lda, ascale, out, ldo);
    if (c < full) block(f, R, scaled, mixed, (int)((full - c) / 4), c, a, lda, ascale, out, ldo);
}

void MH_KNAME(head_mix)(const mh_head_mix_factors* f, size_t cols, const float* a, size_t lda,
                       const float* ascale, float* out, size_t ldo) {
    const size_t full = cols / 4 * 4;
    if (f->rank == 2 && !f->wb) {
        if (ascale) columns(f, 2, 1, 0, full, a, lda, ascale, out, ldo);
        else columns(f, 2, 0, 0, full, a, lda, ascale, out, ldo);
    } else {
        columns(f, f->rank, ascale != NULL, f->wb != NULL, full, a, lda, ascale, out, ldo);
    }
    if (full == cols) return;
    mh_head_mix_factors tail = *f;
    tail.kw1 += full, tail.kw2 += full, tail.kdd += full;
    mh_head_mix__scalar(&tail, cols - full, a + full, lda, ascale, out + full, ldo);
}
