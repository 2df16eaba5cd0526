/* f32 -> f16 / bf16 storage conversions (round to nearest even), written once for every
 * ISA: full vectors, then the vocabulary's partial conversion of the last n % MH_VL. */
#include "kernels/generic/simd.h"

void MH_KNAME(f32_to_f16)(size_t n, const float* x, uint16_t* y) {
    const size_t vl = MH_VL;
    size_t i = 0;
    for (; i + vl <= n; i += vl) mh_vcvt_f16(x + i, y + i);
    if (i < n) mh_vcvt_f16_n(x + i, y + i, n - i);
}

void MH_KNAME(f32_to_bf16)(size_t n, const float* x, uint16_t* y) {
    const size_t vl = MH_VL;
    size_t i = 0;
    for (; i + vl <= n; i += vl) mh_vcvt_bf16(x + i, y + i);
    if (i < n) mh_vcvt_bf16_n(x + i, y + i, n - i);
}
