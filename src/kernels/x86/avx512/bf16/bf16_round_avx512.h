/* f32 to bf16 through AVX512-BF16, bitwise the storage conversion (f32_to_bf16, mh_bf16_rne):
 * VCVTNE2PS2BF16 rounds to nearest even and quiets a NaN as mh_bf16_rne does, but takes a
 * subnormal input as a signed zero (Intel SDM, VCVTNEPS2BF16), so two vectors holding one go
 * the integer way (rare: the tiniest probabilities of P, subnormal K/V values). */
#ifndef MH_BF16_ROUND_AVX512_H
#define MH_BF16_ROUND_AVX512_H
#include "kernels/x86/avx512/simd_avx512.h"

/* Lanes of a 32-lane vector of 16-bit elements starting at element `start` that lie below `n`. */
MH_INLINE __mmask32 mh_mask32(size_t n, size_t start) {
    if (n <= start) return 0;
    const size_t cnt = n - start;
    return cnt >= 32 ? (__mmask32)0xffffffffu : (__mmask32)((1u << cnt) - 1u);
}

/* lo and hi rounded to bf16: lo's 16 in the low half of the result, hi's in the high half. */
MH_INLINE __m512i mh_bf16x32(__m512 lo, __m512 hi) {
    const __mmask16 sub = _mm512_fpclass_ps_mask(lo, 0x20) | _mm512_fpclass_ps_mask(hi, 0x20); /* 0x20: subnormal */
    if (__builtin_expect(sub == 0, 1)) return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi32_epi16(mh_bf16_rne(lo))),
                              _mm512_cvtepi32_epi16(mh_bf16_rne(hi)), 1);
}

/* The same for lanes widened from f16, which are never subnormal in f32 (f16's smallest
 * magnitude, 2^-24, is a normal f32): one VCVTNE2PS2BF16, no check. */
MH_INLINE __m512i mh_bf16x32_f16(__m512 lo, __m512 hi) { return (__m512i)_mm512_cvtne2ps_pbh(hi, lo); }

/* x[0, n) rounded to bf16 into y (round_bf16's bits), 32 at a time. */
MH_INLINE void mh_round_bf16_n(size_t n, const float* x, uint16_t* y) {
    size_t i = 0;
    for (; i + 32 <= n; i += 32) _mm512_storeu_si512(y + i, mh_bf16x32(_mm512_loadu_ps(x + i), _mm512_loadu_ps(x + i + 16)));
    if (i < n) { /* masked: reads and writes only the last n - i */
        const size_t r = n - i;
        const __m512i b = mh_bf16x32(_mm512_maskz_loadu_ps(mh_mask16(r, 0), x + i), _mm512_maskz_loadu_ps(mh_mask16(r, 16), x + i + 16));
        _mm512_mask_storeu_epi16(y + i, mh_mask32(r, 0), b);
    }
}

#endif
