/* f32 -> f16 / bf16 / int8 storage conversions (round to nearest even), written once for every
 * ISA: full vectors, then the vocabulary's partial conversion of the last n % MH_VL. */
#include <math.h>
#include <string.h>

#include "kernels/generic/bf16_row.h"
#include "kernels/generic/simd.h"

void MH_KNAME(f32_to_f16)(size_t n, const float* x, uint16_t* y) {
    const size_t vl = MH_VL;
    size_t i = 0;
    for (; i + vl <= n; i += vl) mh_vcvt_f16(x + i, y + i);
    if (i < n) mh_vcvt_f16_n(x + i, y + i, n - i);
}

void MH_KNAME(f32_to_bf16)(size_t n, const float* x, uint16_t* y) { mh_row_bf16(n, x, y); }

/* f32 -> symmetric int8 of one row (contract in kernels.h): max |x| and a non-finite check in
 * one pass (x * 0 is NaN exactly for NaN and inf, and a NaN survives the sum), then x / scale
 * rounded to nearest even. */
void MH_KNAME(f32_to_i8)(size_t n, const float* x, int8_t* q, float* scale) {
    const size_t vl = MH_VL;
    const mh_vf zero = mh_vzero();
    mh_vf mx = zero, nf = zero;
    size_t i = 0;
    for (; i + vl <= n; i += vl) {
        const mh_vf v = mh_vload(x + i);
        mx = mh_vmax(mx, mh_vabs(v)), nf = mh_vadd(nf, mh_vmul(v, zero));
    }
    if (i < n) {
        const mh_vf v = mh_vload_n(x + i, n - i, 0.0f);
        mx = mh_vmax(mx, mh_vabs(v)), nf = mh_vadd(nf, mh_vmul(v, zero));
    }
    const float bad = mh_vhsum(nf), s = mh_vhmax(mx) / 127.0f;
    if (bad != 0.0f || s == 0.0f) { /* non-finite (bad is NaN), or all zero */
        *scale = bad != 0.0f ? NAN : 0.0f;
        memset(q, 0, n);
        return;
    }
    const mh_vf sv = mh_vset1(s);
    *scale = s;
    for (i = 0; i + vl <= n; i += vl) mh_vstore_i8(q + i, mh_vdiv(mh_vload(x + i), sv));
    if (i < n) mh_vstore_i8_n(q + i, mh_vdiv(mh_vload_n(x + i, n - i, 0.0f), sv), n - i);
}
