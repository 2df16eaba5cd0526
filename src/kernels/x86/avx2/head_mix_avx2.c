/* DCMHA composition, 8 keys per vector (contract in kernels.h). Up to two vectors of keys per
 * step: the sums over the input heads are chains of dependent FMAs, and two blocks give the
 * core twice as many independent chains. The query-side and key-side low-rank projections of a
 * block stay in registers across the output heads. A step walks the heads with pointers bumped
 * by lda/ldk, and the last, partial vector uses masked loads and stores, so no column goes to
 * scalar code. The default rank R = 2 without static weights is specialised (with and without
 * the input scale), so its loops hold only constants and registers. */
#include "kernels/kernel_protos.h"
#include "kernels/x86/avx2/simd_avx2.h"

#define V 2 /* vectors per step */

/* Columns [c, c + 8 * nv), the final vector's lanes limited by the mask `last`; rank R, the
 * input scaled by ascale when `scaled`, static weights when `mixed` (constants where inlined
 * with them). */
MH_INLINE void block(const mh_head_mix_factors* f, const size_t R, const int scaled, const int mixed, const int nv,
                     const __m256i last, size_t c, const float* a, size_t lda, const float* ascale, float* out,
                     size_t ldo) {
    const size_t g = f->g, ldk = f->ldk, rstride = g * ldk; /* rows r and r + 1 of kw1/kw2 */
    __m256i mk[V];
    for (int v = 0; v < V; v++) mk[v] = v == nv - 1 ? last : _mm256_set1_epi32(-1);
    __m256 hq[MH_HEAD_MIX_MAX_RANK][V], hk[MH_HEAD_MIX_MAX_RANK][V];
    for (size_t r = 0; r < R; r++)
        for (int v = 0; v < nv; v++) hq[r][v] = hk[r][v] = _mm256_setzero_ps();
    const float* ap = a + c;
    const float* kp = f->kw1 + c;
    for (size_t m = 0; m < g; m++, ap += lda, kp += ldk) {
        __m256 am[V];
        for (int v = 0; v < nv; v++) {
            am[v] = _mm256_maskload_ps(ap + 8 * v, mk[v]);
            if (scaled) am[v] = _mm256_mul_ps(am[v], _mm256_set1_ps(ascale[m]));
        }
        for (size_t r = 0; r < R; r++) {
            const __m256 qw = _mm256_set1_ps(f->qw1[r * g + m]);
            for (int v = 0; v < nv; v++) {
                hq[r][v] = _mm256_fmadd_ps(qw, am[v], hq[r][v]);
                hk[r][v] = _mm256_fmadd_ps(_mm256_maskload_ps(kp + r * rstride + 8 * v, mk[v]), am[v], hk[r][v]);
            }
        }
    }
    ap = a + c;
    const float* k2 = f->kw2 + c;
    const float* kd = f->kdd + c;
    float* op = out + c;
    for (size_t n = 0; n < g; n++, ap += lda, k2 += ldk, kd += ldk, op += ldo) {
        const __m256 q1 = _mm256_set1_ps(1.0f + f->qdd[n]);
        for (int v = 0; v < nv; v++) {
            __m256 an = _mm256_maskload_ps(ap + 8 * v, mk[v]);
            if (scaled) an = _mm256_mul_ps(an, _mm256_set1_ps(ascale[n]));
            __m256 acc = _mm256_mul_ps(an, _mm256_add_ps(q1, _mm256_maskload_ps(kd + 8 * v, mk[v])));
            for (size_t r = 0; r < R; r++) acc = _mm256_fmadd_ps(_mm256_set1_ps(f->qw2[r * g + n]), hq[r][v], acc);
            for (size_t r = 0; r < R; r++)
                acc = _mm256_fmadd_ps(_mm256_maskload_ps(k2 + r * rstride + 8 * v, mk[v]), hk[r][v], acc);
            if (mixed)
                for (size_t m = 0; m < g; m++) {
                    __m256 am = _mm256_maskload_ps(a + m * lda + c + 8 * v, mk[v]);
                    if (scaled) am = _mm256_mul_ps(am, _mm256_set1_ps(ascale[m]));
                    acc = _mm256_fmadd_ps(_mm256_set1_ps(f->wb[m * g + n]), am, acc);
                }
            _mm256_maskstore_ps(op + 8 * v, mk[v], acc);
        }
    }
}

/* All columns: full steps of V vectors, then one step of the rest (the last vector masked). */
MH_INLINE void columns(const mh_head_mix_factors* f, const size_t R, const int scaled, const int mixed, size_t cols,
                       const float* a, size_t lda, const float* ascale, float* out, size_t ldo) {
    const size_t step = V * 8;
    size_t c = 0;
    for (; c + step <= cols; c += step) block(f, R, scaled, mixed, V, _mm256_set1_epi32(-1), c, a, lda, ascale, out, ldo);
    const size_t rest = cols - c;
    if (rest == 0) return;
    const int nv = (int)((rest + 7) / 8);
    block(f, R, scaled, mixed, nv, mh_mask8(rest - (size_t)(nv - 1) * 8), c, a, lda, ascale, out, ldo);
}

void MH_KNAME(head_mix)(const mh_head_mix_factors* f, size_t cols, const float* a, size_t lda,
                       const float* ascale, float* out, size_t ldo) {
    if (f->rank == 2 && !f->wb) {
        if (ascale) columns(f, 2, 1, 0, cols, a, lda, ascale, out, ldo);
        else columns(f, 2, 0, 0, cols, a, lda, ascale, out, ldo);
        return;
    }
    columns(f, f->rank, ascale != NULL, f->wb != NULL, cols, a, lda, ascale, out, ldo);
}
