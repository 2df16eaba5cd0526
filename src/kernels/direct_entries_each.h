/*
 * The entry points pv_direct and qk_heads (kernels.h) of the ISAs whose token-major decode is
 * not tuned (scalar, NEON, SVE), included at the end of their attention_direct_<isa>.c after
 * the ISA's P.V body `pv_any` (an mh_pv_rows_fn, kernels/i8_rows.h: any row count, V widened
 * from its storage dtype, int8 unscaled). The x86 ISAs have their own
 * (x86/attention_direct_entries.h), whose qk_heads reduces several heads' sums together.
 *  - pv_direct: int8 V through mh_i8_pv (the rows' scales applied where the contract puts
 *    them), every other dtype straight to pv_any;
 *  - qk_heads: the ISA's own qk_direct, one call per key and head, in the order qk_heads reads
 *    (key c of every head before key c + 1): bitwise by qk_direct's contract, a key's score
 *    the same wherever it sits in a call (tests/core/test_kernels.c, "each key alone").
 * Plain C: included by ISA-flagged kernel sources, once each.
 */
#include "kernels/i8_rows.h"
#include "kernels/kernel_protos.h"
#include "util/dtype.h"

void MH_KNAME(pv_direct)(size_t rows, size_t cols, size_t dv, const float* p, size_t ldp, const mh_rows* v,
                         const float* alpha, float* o, size_t ldo) {
    if (v->dtype == MH_DTYPE_I8) mh_i8_pv(pv_any, rows, cols, dv, p, ldp, v, alpha, o, ldo);
    else pv_any(rows, cols, dv, p, ldp, v->data, v->ld, v->dtype, alpha, o, ldo);
}

void MH_KNAME(qk_heads)(size_t heads, size_t cols, size_t d, const float* q, size_t ldq, const mh_rows* k, float* s,
                        size_t lds) {
    for (size_t c = 0; c < cols; c++)
        for (size_t h = 0; h < heads; h++) {
            mh_rows row = k[h];
            row.data = mh_dtype_at(row.data, row.dtype, (ptrdiff_t)c * row.ld);
            if (row.scale) row.scale += (ptrdiff_t)c * row.ld_scale;
            MH_KNAME(qk_direct)(1, 1, d, q + h * ldq, ldq, &row, s + h * lds + c, lds);
        }
}
