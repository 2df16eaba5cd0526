/* Packing a V tile of any storage dtype into f32 panels of MH_GEMM_NR columns (contract in
 * kernels.h), written once for every ISA: a widening copy, vector by vector; the last panel
 * reads each row only up to dv and is zero past it. The body is specialised on the dtype. */
#include "kernels/generic/simd.h"

MH_INLINE void pack_v(const mh_dtype dtype, size_t cols, size_t dv, const void* v, ptrdiff_t ldv,
                      float* dst) {
    const size_t vl = MH_VL, nr = MH_GEMM_NR, full = dv / nr, n_panels = (dv + nr - 1) / nr;
    for (size_t c = 0; c < cols; c++) {
        const void* row = mh_dtype_at(v, dtype, (ptrdiff_t)c * ldv);
        for (size_t p = 0; p < full; p++) {
            float* out = dst + (p * cols + c) * nr;
            for (size_t j = 0; j < nr; j += vl)
                mh_vstore(out + j, mh_vload_dt(mh_dtype_at(row, dtype, (ptrdiff_t)(p * nr + j)), dtype));
        }
        if (full < n_panels) { /* the last panel: columns past dv are zero */
            float* out = dst + (full * cols + c) * nr;
            for (size_t j = 0; j < nr; j += vl) {
                const size_t start = full * nr + j;
                const void* src = mh_dtype_at(row, dtype, (ptrdiff_t)start);
                mh_vstore(out + j, start + vl <= dv ? mh_vload_dt(src, dtype)
                                   : start < dv     ? mh_vload_dt_n(src, dtype, dv - start)
                                                    : mh_vzero());
            }
        }
    }
}

void MH_KNAME(pack_v)(size_t cols, size_t dv, const void* v, ptrdiff_t ldv, mh_dtype dtype,
                      float* dst) {
    MH_WITH_DTYPE(dtype, pack_v, cols, dv, v, ldv, dst)
}
