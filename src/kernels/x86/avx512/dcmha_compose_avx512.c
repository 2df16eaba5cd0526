/* DCMHA composition, 16 keys per vector (contract in kernels.h): the query-side and key-side
 * low-rank projections of a column block stay in registers across the output heads. */
#include "kernels/scalar/kernels_scalar.h"
#include "kernels/x86/avx512/kernels_avx512.h"
#include "kernels/x86/avx512/simd_avx512.h"

/* a'[m] for columns c .. c + 15. */
MH_INLINE __m512 load_a(const float* a, size_t lda, const float* ascale, size_t m, size_t c) {
    const __m512 v = _mm512_loadu_ps(a + m * lda + c);
    return ascale ? _mm512_mul_ps(v, _mm512_set1_ps(ascale[m])) : v;
}

void mh_dcmha_compose__avx512(const mh_compose_factors* f, size_t cols, const float* a, size_t lda,
                              const float* ascale, float* out, size_t ldo) {
    const size_t g = f->g, R = f->rank, ldk = f->ldk, full = cols / 16 * 16;
    for (size_t c = 0; c < full; c += 16) {
        __m512 hq[MH_DCMHA_MAX_RANK], hk[MH_DCMHA_MAX_RANK];
        for (size_t r = 0; r < R; r++) hq[r] = hk[r] = _mm512_setzero_ps();
        for (size_t m = 0; m < g; m++) {
            const __m512 am = load_a(a, lda, ascale, m, c);
            for (size_t r = 0; r < R; r++) {
                hq[r] = _mm512_fmadd_ps(_mm512_set1_ps(f->qw1[r * g + m]), am, hq[r]);
                hk[r] = _mm512_fmadd_ps(_mm512_loadu_ps(f->kw1 + (r * g + m) * ldk + c), am, hk[r]);
            }
        }
        for (size_t n = 0; n < g; n++) {
            const __m512 gate = _mm512_add_ps(_mm512_set1_ps(1.0f + f->qdd[n]),
                                              _mm512_loadu_ps(f->kdd + n * ldk + c));
            __m512 acc = _mm512_mul_ps(load_a(a, lda, ascale, n, c), gate);
            for (size_t r = 0; r < R; r++) acc = _mm512_fmadd_ps(_mm512_set1_ps(f->qw2[r * g + n]), hq[r], acc);
            for (size_t r = 0; r < R; r++)
                acc = _mm512_fmadd_ps(_mm512_loadu_ps(f->kw2 + (r * g + n) * ldk + c), hk[r], acc);
            if (f->wb)
                for (size_t m = 0; m < g; m++)
                    acc = _mm512_fmadd_ps(_mm512_set1_ps(f->wb[m * g + n]), load_a(a, lda, ascale, m, c), acc);
            _mm512_storeu_ps(out + n * ldo + c, acc);
        }
    }
    if (full == cols) return;
    mh_compose_factors tail = *f;
    tail.kw1 += full, tail.kw2 += full, tail.kdd += full;
    mh_dcmha_compose__scalar(&tail, cols - full, a + full, lda, ascale, out + full, ldo);
}
