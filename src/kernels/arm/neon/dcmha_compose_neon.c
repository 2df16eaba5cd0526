/* DCMHA composition, 4 keys per vector (contract in kernels.h): the query-side and key-side
 * low-rank projections of a column block stay in registers across the output heads. */
#include "kernels/arm/neon/kernels_neon.h"
#include "kernels/arm/neon/simd_neon.h"
#include "kernels/scalar/kernels_scalar.h"

/* a'[m] for columns c .. c + 3. */
MH_INLINE float32x4_t load_a(const float* a, size_t lda, const float* ascale, size_t m, size_t c) {
    const float32x4_t v = vld1q_f32(a + m * lda + c);
    return ascale ? vmulq_n_f32(v, ascale[m]) : v;
}

void mh_dcmha_compose__neon(const mh_compose_factors* f, size_t cols, const float* a, size_t lda,
                            const float* ascale, float* out, size_t ldo) {
    const size_t g = f->g, R = f->rank, ldk = f->ldk, full = cols / 4 * 4;
    for (size_t c = 0; c < full; c += 4) {
        float32x4_t hq[MH_DCMHA_MAX_RANK], hk[MH_DCMHA_MAX_RANK];
        for (size_t r = 0; r < R; r++) hq[r] = hk[r] = vdupq_n_f32(0.0f);
        for (size_t m = 0; m < g; m++) {
            const float32x4_t am = load_a(a, lda, ascale, m, c);
            for (size_t r = 0; r < R; r++) {
                hq[r] = vfmaq_n_f32(hq[r], am, f->qw1[r * g + m]);
                hk[r] = vfmaq_f32(hk[r], vld1q_f32(f->kw1 + (r * g + m) * ldk + c), am);
            }
        }
        for (size_t n = 0; n < g; n++) {
            const float32x4_t gate = vaddq_f32(vdupq_n_f32(1.0f + f->qdd[n]), vld1q_f32(f->kdd + n * ldk + c));
            float32x4_t acc = vmulq_f32(load_a(a, lda, ascale, n, c), gate);
            for (size_t r = 0; r < R; r++) acc = vfmaq_n_f32(acc, hq[r], f->qw2[r * g + n]);
            for (size_t r = 0; r < R; r++) acc = vfmaq_f32(acc, vld1q_f32(f->kw2 + (r * g + n) * ldk + c), hk[r]);
            if (f->wb)
                for (size_t m = 0; m < g; m++)
                    acc = vfmaq_n_f32(acc, load_a(a, lda, ascale, m, c), f->wb[m * g + n]);
            vst1q_f32(out + n * ldo + c, acc);
        }
    }
    if (full == cols) return;
    mh_compose_factors tail = *f;
    tail.kw1 += full, tail.kw2 += full, tail.kdd += full;
    mh_dcmha_compose__scalar(&tail, cols - full, a + full, lda, ascale, out + full, ldo);
}
