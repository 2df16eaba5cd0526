/* The driver's K/V tiles as the kernels read them (mh_rows), and the finiteness check its P.V
 * uses on them (declared in driver.h). */
#include "core/driver.h"

#include "util/dtype.h"

mh_rows mh_drv_rows(const mh_tensor* x, const mh_kv_pages* pg, mh_dtype dt, size_t b, size_t h, int64_t j0) {
    if (pg) { /* batch row b's sequence, then the block holding key j0 (core/kv_pages.h) */
        int64_t blk;
        mh_kv_pages_find(pg->table, pg->per_seq, pg->block_size, pg->seq ? pg->seq[b] : (int64_t)b, j0, &blk, &j0);
        b = (size_t)blk;
    }
    mh_rows r = {.data = mh_dtype_at(x->data, dt, (ptrdiff_t)b * x->stride_batch + (ptrdiff_t)h * x->stride_head +
                                                      (ptrdiff_t)j0 * x->stride_token),
                 .ld = x->stride_token,
                 .dtype = dt};
    if (dt == MH_DTYPE_I8)
        r.scale = x->scale + (ptrdiff_t)b * x->scale_stride_batch + (ptrdiff_t)h * x->scale_stride_head +
                  (ptrdiff_t)j0 * x->scale_stride_token,
        r.ld_scale = x->scale_stride_token;
    return r;
}

int mh_drv_v_nonfinite(const mh_rows* v, size_t c_lo, size_t c_hi, size_t d_lo, size_t d_hi) {
    const mh_dtype dt = v->dtype;
    if (dt == MH_DTYPE_I8) { /* int8 values are finite: only a scale can be NaN or inf */
        for (size_t c = c_lo; c < c_hi; c++)
            if (v->scale[(ptrdiff_t)c * v->ld_scale] * 0.0f != 0.0f) return 1;
        return 0;
    }
    const uint16_t exp16 = dt == MH_DTYPE_F16 ? 0x7c00u : 0x7f80u; /* f16 / bf16 exponent bits */
    for (size_t c = c_lo; c < c_hi; c++) {
        const void* row = mh_dtype_at(v->data, dt, (ptrdiff_t)c * v->ld);
        for (size_t d = d_lo; d < d_hi; d++) {
            if (dt == MH_DTYPE_F32 ? ((const float*)row)[d] * 0.0f != 0.0f
                                   : (((const uint16_t*)row)[d] & exp16) == exp16)
                return 1;
        }
    }
    return 0;
}
