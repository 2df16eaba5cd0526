/* Configure-time probe: can this compiler build AVX512-BF16 code (VDPBF16PS)? */
#include <immintrin.h>
int main(void) {
    __m512 acc = _mm512_setzero_ps();
    const __m512i x = _mm512_set1_epi32(0x3f803f80);
    acc = _mm512_dpbf16_ps(acc, (__m512bh)x, (__m512bh)x);
    return (int)_mm512_reduce_add_ps(acc);
}
