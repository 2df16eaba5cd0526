/*
 * The row scales of int8 K/V tiles (mh_rows, kernels.h), applied the same way by every ISA's
 * direct and packing kernels. The SIMD vocabulary widens int8 exactly (as it widens f16/bf16),
 * and these steps, which only int8 tiles reach, multiply by the scales where the contract
 * puts them, so the f32/f16/bf16 paths are untouched. Plain C: included by ISA-flagged kernel
 * sources.
 */
#ifndef MH_KERNELS_I8_ROWS_H
#define MH_KERNELS_I8_ROWS_H
#include <stddef.h>

#include "kernels/kernels.h"
#include "util/dtype.h"

/* qk_direct: s[r][c] = scale_c * s[r][c], once the dot on the int8 values is complete. */
static inline void mh_i8_scale_scores(size_t rows, size_t cols, const mh_rows* k, float* s, size_t lds) {
    for (size_t c = 0; c < cols; c++) {
        const float sc = k->scale[(ptrdiff_t)c * k->ld_scale];
        for (size_t r = 0; r < rows; r++) s[r * lds + c] *= sc;
    }
}

/* pack_kt: every packed value of key c (panel c / nr, column c % nr) times scale_c. */
static inline void mh_i8_scale_kt(size_t cols, size_t d, size_t nr, const mh_rows* k, float* dst) {
    for (size_t c = 0; c < cols; c++) {
        const float sc = k->scale[(ptrdiff_t)c * k->ld_scale];
        float* col = dst + (c / nr) * d * nr + c % nr;
        for (size_t dd = 0; dd < d; dd++) col[dd * nr] *= sc;
    }
}

/* An ISA's P.V over rows widened from storage `dtype` (its pv_direct before the row scales):
 * o[r] = alpha[r] * o[r] + sum_c p[r][c] * V[c]. */
typedef void (*mh_pv_rows_fn)(size_t rows, size_t cols, size_t dv, const float* p, size_t ldp,
                              const void* v, ptrdiff_t ldv, mh_dtype dtype, const float* alpha,
                              float* o, size_t ldo);

#define MH_I8_PV_ROWS 8  /* rows per call of the body */
#define MH_I8_PV_KEYS 64 /* keys per call of the body */
_Static_assert(MH_I8_PV_KEYS % MH_PV_GROUP == 0, "chunks split pv_direct's sum between its groups only");

/* pv_direct on int8 V: the body runs on chunks of keys whose probabilities were first
 * multiplied by their rows' scales (p * scale_c, the contract's order) into a small stack
 * block; the first chunk applies alpha, the later ones 1. A chunk is whole groups of the
 * body's two-level sum (MH_PV_GROUP, kernels.h), so each o element sees the same groups, in the
 * same order, as one call over all keys would. */
static inline void mh_i8_pv(mh_pv_rows_fn body, size_t rows, size_t cols, size_t dv, const float* p,
                            size_t ldp, const mh_rows* v, const float* alpha, float* o, size_t ldo) {
    static const float ones[MH_I8_PV_ROWS] = {1, 1, 1, 1, 1, 1, 1, 1};
    float ps[MH_I8_PV_ROWS * MH_I8_PV_KEYS];
    for (size_t r0 = 0; r0 < rows; r0 += MH_I8_PV_ROWS) {
        const size_t nr = rows - r0 < MH_I8_PV_ROWS ? rows - r0 : MH_I8_PV_ROWS;
        size_t c0 = 0;
        do { /* at least once, so alpha applies even with no key */
            const size_t nc = cols - c0 < MH_I8_PV_KEYS ? cols - c0 : MH_I8_PV_KEYS;
            for (size_t c = 0; c < nc; c++) {
                const float sc = v->scale[(ptrdiff_t)(c0 + c) * v->ld_scale];
                for (size_t r = 0; r < nr; r++) ps[r * MH_I8_PV_KEYS + c] = p[(r0 + r) * ldp + c0 + c] * sc;
            }
            body(nr, nc, dv, ps, MH_I8_PV_KEYS, mh_dtype_at(v->data, MH_DTYPE_I8, (ptrdiff_t)c0 * v->ld), v->ld,
                 MH_DTYPE_I8, c0 ? ones : alpha + r0, o + r0 * ldo, ldo);
            c0 += nc;
        } while (c0 < cols);
    }
}

#endif
