/*
 * qk_heads (kernels.h) from an ISA's own qk_direct, one call per key and head: bitwise by
 * qk_direct's contract, a key's score the same wherever it sits in a call (tests/core/
 * test_kernels.c, "each key alone"). For the ISAs whose token-major decode is not tuned
 * (scalar, NEON, SVE); the x86 ones reduce several heads' sums together
 * (attention_direct_<isa>.h, qk_heads_rows). Plain C: included by ISA-flagged kernel sources.
 */
#ifndef MH_KERNELS_QK_HEADS_EACH_H
#define MH_KERNELS_QK_HEADS_EACH_H
#include "kernels/kernels.h"
#include "util/dtype.h"

typedef void (*mh_qk_direct_fn)(size_t rows, size_t cols, size_t d, const float* q, size_t ldq, const mh_rows* k,
                                float* s, size_t lds);

static inline void mh_qk_heads_each(mh_qk_direct_fn qk, size_t heads, size_t cols, size_t d, const float* q,
                                    size_t ldq, const mh_rows* k, float* s, size_t lds) {
    for (size_t c = 0; c < cols; c++)
        for (size_t h = 0; h < heads; h++) {
            mh_rows row = k[h];
            row.data = mh_dtype_at(row.data, row.dtype, (ptrdiff_t)c * row.ld);
            if (row.scale) row.scale += (ptrdiff_t)c * row.ld_scale;
            qk(1, 1, d, q + h * ldq, ldq, &row, s + h * lds + c, lds);
        }
}

#endif
