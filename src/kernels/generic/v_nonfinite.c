/* v_nonfinite (contract in kernels.h), written once for every ISA: x * 0 is 0 for a finite x
 * and NaN for NaN or inf, so the sum of those products over the block is NaN exactly when it
 * holds one; a row at a time, four vectors at a time in four sums (a whole packed tile read
 * as one row, core/driver_run.c, runs at the loads' rate instead of one add's latency per
 * vector), then single vectors, then the last partial one. */
#include "kernels/generic/simd.h"

/* acc + x * 0 for the vector of dtype values at p. */
MH_INLINE mh_vf add_zeroed(const mh_dtype dtype, mh_vf acc, const void* p) {
    return mh_vadd(acc, mh_vmul(mh_vload_dt(p, dtype), mh_vzero()));
}

MH_INLINE int v_nonfinite(const mh_dtype dtype, size_t c_lo, size_t c_hi, size_t d_lo, size_t d_hi, const mh_rows* v) {
    const size_t vl = MH_VL, n = d_hi - d_lo, full = n - n % vl, quads = n - n % (4 * vl);
    const mh_vf zero = mh_vzero();
    mh_vf acc0 = zero, acc1 = zero, acc2 = zero, acc3 = zero;
    for (size_t c = c_lo; c < c_hi; c++) {
        if (dtype == MH_DTYPE_I8) { /* int8 values are finite: only a scale can be NaN or inf */
            acc0 = mh_vadd(acc0, mh_vset1(v->scale[(ptrdiff_t)c * v->ld_scale] * 0.0f));
            continue;
        }
        const void* row = mh_dtype_at(v->data, dtype, (ptrdiff_t)c * v->ld + (ptrdiff_t)d_lo);
        size_t d = 0;
        for (; d < quads; d += 4 * vl) {
            acc0 = add_zeroed(dtype, acc0, mh_dtype_at(row, dtype, (ptrdiff_t)d));
            acc1 = add_zeroed(dtype, acc1, mh_dtype_at(row, dtype, (ptrdiff_t)(d + vl)));
            acc2 = add_zeroed(dtype, acc2, mh_dtype_at(row, dtype, (ptrdiff_t)(d + 2 * vl)));
            acc3 = add_zeroed(dtype, acc3, mh_dtype_at(row, dtype, (ptrdiff_t)(d + 3 * vl)));
        }
        for (; d < full; d += vl) acc0 = add_zeroed(dtype, acc0, mh_dtype_at(row, dtype, (ptrdiff_t)d));
        if (full < n) acc0 = mh_vadd(acc0, mh_vmul(mh_vload_dt_n(mh_dtype_at(row, dtype, (ptrdiff_t)full), dtype, n - full), zero));
    }
    const float sum = mh_vhsum(mh_vadd(mh_vadd(acc0, acc1), mh_vadd(acc2, acc3)));
    return sum != sum;
}

int MH_KNAME(v_nonfinite)(size_t c_lo, size_t c_hi, size_t d_lo, size_t d_hi, const mh_rows* v) {
    int bad = 0;
    MH_WITH_DTYPE(v->dtype, bad = v_nonfinite, c_lo, c_hi, d_lo, d_hi, v)
    return bad;
}
