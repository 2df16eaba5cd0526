/* f32 -> bf16 of a row (round to nearest even), inline: full vectors through the ISA's
 * vocabulary, then its partial conversion of the last n % MH_VL. The storage conversion
 * (convert.c, f32_to_bf16) and the softmax's rounding of P (softmax_step.h) both run it. */
#ifndef MH_GENERIC_BF16_ROW_H
#define MH_GENERIC_BF16_ROW_H
#include "kernels/generic/simd.h"

MH_INLINE void mh_row_bf16(size_t n, const float* x, uint16_t* y) {
    size_t i = 0;
    for (; i + MH_VL <= n; i += MH_VL) mh_vcvt_bf16(x + i, y + i);
    if (i < n) mh_vcvt_bf16_n(x + i, y + i, n - i);
}

#endif
