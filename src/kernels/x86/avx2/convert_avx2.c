/* f32 -> f16 / bf16 with round to nearest even; tails (n % 8, n % 16) use the scalar
 * conversions, which round the same way. */
#include "kernels/scalar/convert_scalar.h"
#include "kernels/x86/avx2/kernels_avx2.h"
#include "kernels/x86/avx2/simd_avx2.h"

void mh_f32_to_f16__avx2(size_t n, const float* x, uint16_t* y) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i*)(void*)(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) y[i] = mh_f32_to_f16_rne(x[i]);
}

/* Eight f32 to bf16 bit patterns (in 32-bit lanes): round to nearest even; a NaN keeps its
 * top bits and gets the quiet bit instead of being rounded (which could make it inf). */
MH_INLINE __m256i bf16x8(__m256 v) {
    const __m256i u = _mm256_castps_si256(v);
    const __m256i hi = _mm256_srli_epi32(u, 16);
    const __m256i lsb = _mm256_and_si256(hi, _mm256_set1_epi32(1));
    const __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb)), 16);
    const __m256i qnan = _mm256_or_si256(hi, _mm256_set1_epi32(0x40));
    const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
    return _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(r), _mm256_castsi256_ps(qnan), nan));
}

void mh_f32_to_bf16__avx2(size_t n, const float* x, uint16_t* y) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256i lo = bf16x8(_mm256_loadu_ps(x + i)), hi = bf16x8(_mm256_loadu_ps(x + i + 8));
        /* packus works per 128-bit lane: [lo0-3 hi0-3 | lo4-7 hi4-7]; reorder the quarters */
        const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), _MM_SHUFFLE(3, 1, 2, 0));
        _mm256_storeu_si256((__m256i*)(void*)(y + i), packed);
    }
    for (; i < n; i++) y[i] = mh_f32_to_bf16_rne(x[i]);
}
