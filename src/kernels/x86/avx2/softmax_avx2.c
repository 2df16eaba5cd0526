/* Online-softmax step with SLEEF's vector expf (1-ulp). Tail lanes are loaded as -inf
 * (maskload + blend), so they add nothing to the max or the sum and are stored nowhere. */
#include <math.h>
#include <sleef.h>

#include "kernels/x86/avx2/kernels_avx2.h"
#include "kernels/x86/avx2/simd_avx2.h"

/* s[c .. c + cnt) with -inf in the lanes past cnt (reads nothing there). */
MH_INLINE __m256 load_tail(const float* s, size_t cnt) {
    const __m256i m = mh_mask8(cnt);
    return _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), _mm256_maskload_ps(s, m), _mm256_castsi256_ps(m));
}

void mh_f32_softmax_tile__avx2(size_t rows, size_t cols, float* s, size_t lds, float* m, float* l,
                               float* alpha) {
    const size_t full = cols & ~(size_t)7, tail = cols - full;
    const __m256i tmask = mh_mask8(tail);
    for (size_t r = 0; r < rows; r++) {
        float* row = s + r * lds;
        __m256 vmax = _mm256_set1_ps(m[r]);
        for (size_t c = 0; c < full; c += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(row + c));
        if (tail) vmax = _mm256_max_ps(vmax, load_tail(row + full, tail));
        const float mx = mh_hmax8(vmax);
        if (mx == -INFINITY) { /* nothing kept yet: keep the state, zero the tile */
            for (size_t c = 0; c < full; c += 8) _mm256_storeu_ps(row + c, _mm256_setzero_ps());
            if (tail) _mm256_maskstore_ps(row + full, tmask, _mm256_setzero_ps());
            alpha[r] = 1.0f;
            continue;
        }
        const __m256 vmx = _mm256_set1_ps(mx);
        __m256 sum = _mm256_setzero_ps();
        for (size_t c = 0; c < full; c += 8) { /* exp(-inf) = 0 for dropped keys */
            const __m256 e = Sleef_expf8_u10avx2(_mm256_sub_ps(_mm256_loadu_ps(row + c), vmx));
            _mm256_storeu_ps(row + c, e);
            sum = _mm256_add_ps(sum, e);
        }
        if (tail) {
            const __m256 e = Sleef_expf8_u10avx2(_mm256_sub_ps(load_tail(row + full, tail), vmx));
            _mm256_maskstore_ps(row + full, tmask, e);
            sum = _mm256_add_ps(sum, e);
        }
        alpha[r] = expf(m[r] - mx); /* m[r] = -inf on the first kept tile gives 0 */
        l[r] = l[r] * alpha[r] + mh_hsum8(sum);
        m[r] = mx;
    }
}
