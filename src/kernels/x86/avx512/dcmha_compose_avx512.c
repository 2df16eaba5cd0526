/* DCMHA composition, 16 keys per vector (contract in kernels.h). Two vectors of keys per step:
 * the sums over the input heads are chains of dependent FMAs, and two blocks give the core
 * twice as many independent chains. The query-side and key-side low-rank projections of a
 * block stay in registers across the output heads (the default rank R = 2 is specialised so
 * its arrays are registers, not stack). */
#include "kernels/scalar/kernels_scalar.h"
#include "kernels/x86/avx512/kernels_avx512.h"
#include "kernels/x86/avx512/simd_avx512.h"

#define V 2 /* vectors per step (then single vectors, then the scalar tail) */

/* a'[m] for the V vectors from column c. */
MH_INLINE __m512 load_a(const float* a, size_t lda, const float* ascale, size_t m, size_t c) {
    const __m512 v = _mm512_loadu_ps(a + m * lda + c);
    return ascale ? _mm512_mul_ps(v, _mm512_set1_ps(ascale[m])) : v;
}

/* Columns [c, c + nv * 16), nv <= V, with rank R (constants where inlined with them). */
MH_INLINE void block(const mh_compose_factors* f, size_t R, size_t nv, size_t c, const float* a, size_t lda,
                     const float* ascale, float* out, size_t ldo) {
    const size_t g = f->g, ldk = f->ldk;
    __m512 hq[MH_DCMHA_MAX_RANK][V], hk[MH_DCMHA_MAX_RANK][V];
    for (size_t r = 0; r < R; r++)
        for (size_t v = 0; v < nv; v++) hq[r][v] = hk[r][v] = _mm512_setzero_ps();
    for (size_t m = 0; m < g; m++)
        for (size_t v = 0; v < nv; v++) {
            const size_t cv = c + v * 16;
            const __m512 am = load_a(a, lda, ascale, m, cv);
            for (size_t r = 0; r < R; r++) {
                hq[r][v] = _mm512_fmadd_ps(_mm512_set1_ps(f->qw1[r * g + m]), am, hq[r][v]);
                hk[r][v] = _mm512_fmadd_ps(_mm512_loadu_ps(f->kw1 + (r * g + m) * ldk + cv), am, hk[r][v]);
            }
        }
    for (size_t n = 0; n < g; n++)
        for (size_t v = 0; v < nv; v++) {
            const size_t cv = c + v * 16;
            const __m512 gate = _mm512_add_ps(_mm512_set1_ps(1.0f + f->qdd[n]), _mm512_loadu_ps(f->kdd + n * ldk + cv));
            __m512 acc = _mm512_mul_ps(load_a(a, lda, ascale, n, cv), gate);
            for (size_t r = 0; r < R; r++) acc = _mm512_fmadd_ps(_mm512_set1_ps(f->qw2[r * g + n]), hq[r][v], acc);
            for (size_t r = 0; r < R; r++)
                acc = _mm512_fmadd_ps(_mm512_loadu_ps(f->kw2 + (r * g + n) * ldk + cv), hk[r][v], acc);
            if (f->wb)
                for (size_t m = 0; m < g; m++)
                    acc = _mm512_fmadd_ps(_mm512_set1_ps(f->wb[m * g + n]), load_a(a, lda, ascale, m, cv), acc);
            _mm512_storeu_ps(out + n * ldo + cv, acc);
        }
}

void mh_dcmha_compose__avx512(const mh_compose_factors* f, size_t cols, const float* a, size_t lda,
                              const float* ascale, float* out, size_t ldo) {
    const size_t step = V * 16, pairs = cols / step * step, full = cols / 16 * 16;
    for (size_t c = 0; c < pairs; c += step) {
        if (f->rank == 2) block(f, 2, V, c, a, lda, ascale, out, ldo);
        else block(f, f->rank, V, c, a, lda, ascale, out, ldo);
    }
    for (size_t c = pairs; c < full; c += 16) block(f, f->rank, 1, c, a, lda, ascale, out, ldo);
    if (full == cols) return;
    mh_compose_factors tail = *f;
    tail.kw1 += full, tail.kw2 += full, tail.kdd += full;
    mh_dcmha_compose__scalar(&tail, cols - full, a + full, lda, ascale, out + full, ldo);
}
