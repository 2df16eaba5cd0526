/* Packing a V tile of any storage dtype into f32 panels of MH_GEMM_NR columns (contract in
 * kernels.h), written once for every ISA: a widening copy, vector by vector; the last panel
 * reads each row only up to dv and is zero past it. The body is specialised on the dtype, so
 * only the int8 body multiplies by the row's scale. */
#include "kernels/generic/simd.h"

/* A row's widened vector, times the row's scale for int8 (dtype is a constant here). */
MH_INLINE mh_vf scaled(const mh_dtype dtype, mh_vf x, mh_vf sc) { return dtype == MH_DTYPE_I8 ? mh_vmul(x, sc) : x; }

MH_INLINE void pack_v(const mh_dtype dtype, size_t cols, size_t dv, const mh_rows* v, float* dst) {
    const size_t vl = MH_VL, nr = MH_GEMM_NR, full = dv / nr, n_panels = (dv + nr - 1) / nr;
    for (size_t c = 0; c < cols; c++) {
        const void* row = mh_dtype_at(v->data, dtype, (ptrdiff_t)c * v->ld);
        const mh_vf sc = mh_vset1(dtype == MH_DTYPE_I8 ? v->scale[(ptrdiff_t)c * v->ld_scale] : 1.0f);
        for (size_t p = 0; p < full; p++) {
            float* out = dst + (p * cols + c) * nr;
            for (size_t j = 0; j < nr; j += vl)
                mh_vstore(out + j, scaled(dtype, mh_vload_dt(mh_dtype_at(row, dtype, (ptrdiff_t)(p * nr + j)), dtype), sc));
        }
        if (full < n_panels) { /* the last panel: columns past dv are zero */
            float* out = dst + (full * cols + c) * nr;
            for (size_t j = 0; j < nr; j += vl) {
                const size_t start = full * nr + j;
                const void* src = mh_dtype_at(row, dtype, (ptrdiff_t)start);
                mh_vstore(out + j, start + vl <= dv ? scaled(dtype, mh_vload_dt(src, dtype), sc)
                                   : start < dv     ? scaled(dtype, mh_vload_dt_n(src, dtype, dv - start), sc)
                                                    : mh_vzero());
            }
        }
    }
}

void MH_KNAME(pack_v)(size_t cols, size_t dv, const mh_rows* v, float* dst) {
    MH_WITH_DTYPE(v->dtype, pack_v, cols, dv, v, dst)
}
