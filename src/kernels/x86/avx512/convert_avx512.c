/* f32 -> f16 / bf16 with round to nearest even. */
#include "kernels/x86/avx512/kernels_avx512.h"
#include "kernels/x86/avx512/simd_avx512.h"

void mh_f32_to_f16__avx512(size_t n, const float* x, uint16_t* y) {
    for (size_t i = 0; i < n; i += 16) {
        const __mmask16 m = mh_mask16(n, i);
        const __m256i h = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, x + i), _MM_FROUND_TO_NEAREST_INT);
        _mm256_mask_storeu_epi16(y + i, m, h);
    }
}

void mh_f32_to_bf16__avx512(size_t n, const float* x, uint16_t* y) {
    const __m512i bias = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1);
    for (size_t i = 0; i < n; i += 16) {
        const __mmask16 m = mh_mask16(n, i);
        const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
        const __m512i u = _mm512_castps_si512(v);
        const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), one);
        __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(bias, lsb)), 16);
        /* NaN: keep the top bits and set the quiet bit instead of rounding */
        const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40)));
        _mm256_mask_storeu_epi16(y + i, m, _mm512_cvtepi32_epi16(r));
    }
}
