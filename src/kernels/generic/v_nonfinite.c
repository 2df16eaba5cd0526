/* v_nonfinite (contract in kernels.h), written once for every ISA: x * 0 is 0 for a finite x
 * and NaN for NaN or inf, so the sum of those products over the block is NaN exactly when it
 * holds one; a row at a time, whole vectors, then the last partial one. */
#include "kernels/generic/simd.h"

MH_INLINE int v_nonfinite(const mh_dtype dtype, size_t c_lo, size_t c_hi, size_t d_lo, size_t d_hi, const mh_rows* v) {
    const size_t vl = MH_VL, n = d_hi - d_lo, full = n - n % vl;
    const mh_vf zero = mh_vzero();
    mh_vf acc = zero;
    for (size_t c = c_lo; c < c_hi; c++) {
        if (dtype == MH_DTYPE_I8) { /* int8 values are finite: only a scale can be NaN or inf */
            acc = mh_vadd(acc, mh_vset1(v->scale[(ptrdiff_t)c * v->ld_scale] * 0.0f));
            continue;
        }
        const void* row = mh_dtype_at(v->data, dtype, (ptrdiff_t)c * v->ld + (ptrdiff_t)d_lo);
        for (size_t d = 0; d < full; d += vl)
            acc = mh_vadd(acc, mh_vmul(mh_vload_dt(mh_dtype_at(row, dtype, (ptrdiff_t)d), dtype), zero));
        if (full < n) acc = mh_vadd(acc, mh_vmul(mh_vload_dt_n(mh_dtype_at(row, dtype, (ptrdiff_t)full), dtype, n - full), zero));
    }
    const float sum = mh_vhsum(acc);
    return sum != sum;
}

int MH_KNAME(v_nonfinite)(size_t c_lo, size_t c_hi, size_t d_lo, size_t d_hi, const mh_rows* v) {
    int bad = 0;
    MH_WITH_DTYPE(v->dtype, bad = v_nonfinite, c_lo, c_hi, d_lo, d_hi, v)
    return bad;
}
