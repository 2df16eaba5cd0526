/* The bf16 mode's operand rounding (round_bf16, contract in kernels.h) on AVX512-BF16: 32
 * floats per VCVTNE2PS2BF16 (bf16_round_avx512.h), bitwise f32_to_bf16. Replaces
 * generic/bf16/round_bf16.c for this ISA (cmake/kernels.cmake). */
#include "kernels/kernel_protos.h"
#include "kernels/x86/avx512/bf16/bf16_round_avx512.h"

void MH_KNAME(round_bf16)(size_t n, const float* x, uint16_t* y) {
    size_t i = 0;
    for (; i + 32 <= n; i += 32) _mm512_storeu_si512(y + i, mh_bf16x32(_mm512_loadu_ps(x + i), _mm512_loadu_ps(x + i + 16)));
    if (i < n) { /* masked: reads and writes only the last n - i */
        const size_t r = n - i;
        const __m512i b = mh_bf16x32(_mm512_maskz_loadu_ps(mh_mask16(r, 0), x + i), _mm512_maskz_loadu_ps(mh_mask16(r, 16), x + i + 16));
        _mm512_mask_storeu_epi16(y + i, mh_mask32(r, 0), b);
    }
}
