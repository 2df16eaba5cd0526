/* The driver's K/V tiles as the kernels read them (mh_rows; declared in driver.h). */
#include "core/driver.h"

#include "util/dtype.h"

mh_rows mh_drv_rows(const mh_drv_stage* st, const mh_tensor* x, const mh_kv_pages* pg, mh_dtype dt, size_t b, size_t h,
                    int64_t j0) {
    if (pg) { /* batch row b's sequence, then the block holding key j0 (core/kv_pages.h) */
        int64_t blk;
        mh_kv_pages_find(pg->table, pg->per_seq, pg->block_size, pg->seq ? pg->seq[b] : (int64_t)b, j0, &blk, &j0);
        b = (size_t)blk;
    }
    mh_rows r = {.data = mh_dtype_at(x->data, dt, (ptrdiff_t)b * x->stride_batch + (ptrdiff_t)h * x->stride_head +
                                                      (ptrdiff_t)j0 * x->stride_token),
                 .ld = x->stride_token,
                 .dtype = dt,
                 .prefetch = st->k->decode_prefetch};
    if (dt == MH_DTYPE_I8)
        r.scale = x->scale + (ptrdiff_t)b * x->scale_stride_batch + (ptrdiff_t)h * x->scale_stride_head +
                  (ptrdiff_t)j0 * x->scale_stride_token,
        r.ld_scale = x->scale_stride_token;
    return r;
}
