/* Online-softmax step with SLEEF's vector expf (1-ulp). */
#include <math.h>
#include <sleef.h>

#include "kernels/x86/avx512/kernels_avx512.h"
#include "kernels/x86/avx512/simd_avx512.h"

void mh_f32_softmax_tile__avx512(size_t rows, size_t cols, float* s, size_t lds, float* m, float* l,
                                 float* alpha) {
    for (size_t r = 0; r < rows; r++) {
        float* row = s + r * lds;
        __m512 vmax = _mm512_set1_ps(m[r]);
        for (size_t c = 0; c < cols; c += 16)
            vmax = _mm512_max_ps(vmax, _mm512_mask_loadu_ps(vmax, mh_mask16(cols, c), row + c));
        const float mx = _mm512_reduce_max_ps(vmax);
        if (mx == -INFINITY) { /* nothing kept yet: keep the state, zero the tile */
            for (size_t c = 0; c < cols; c += 16)
                _mm512_mask_storeu_ps(row + c, mh_mask16(cols, c), _mm512_setzero_ps());
            alpha[r] = 1.0f;
            continue;
        }
        const __m512 vmx = _mm512_set1_ps(mx);
        __m512 sum = _mm512_setzero_ps();
        for (size_t c = 0; c < cols; c += 16) {
            const __mmask16 mask = mh_mask16(cols, c);
            /* exp(-inf) = 0 for dropped keys; masked-off lanes are stored nowhere and summed as 0 */
            const __m512 e = Sleef_expf16_u10avx512f(_mm512_sub_ps(_mm512_maskz_loadu_ps(mask, row + c), vmx));
            _mm512_mask_storeu_ps(row + c, mask, e);
            sum = _mm512_mask_add_ps(sum, mask, sum, e);
        }
        alpha[r] = expf(m[r] - mx);
        l[r] = l[r] * alpha[r] + _mm512_reduce_add_ps(sum);
        m[r] = mx;
    }
}
