/* The online-softmax step (contract in kernels.h), written once for every ISA and included by
 * softmax_tile.c (the f32 slot) and bf16/softmax_tile_bf16.c (the bf16 compute mode's slot,
 * which also rounds P to bf16 in the same pass). Full vectors, then the last partial one read
 * with -inf in the lanes past the row (exp gives 0 there, adding nothing to the max or the
 * sum) and written back lane-exactly. A NaN score makes the row's state NaN: through exp and
 * the sum when the max is finite or NaN, explicitly when the max dropped it (a tile of only
 * NaN and -inf), so the row's output is NaN on every ISA. The vector exp is generic/vexp.h
 * (scalar: libm expf). Each row's rescale exp(m - m_new) and its state update wait for a
 * vector of rows (CHUNK at a time), so they cost one vector exp per MH_VL rows instead of a
 * scalar exp per row. */
#ifndef MH_GENERIC_SOFTMAX_STEP_H
#define MH_GENERIC_SOFTMAX_STEP_H
#include "kernels/generic/simd.h"

/* MH_SOFTMAX_ROUND_P(x, y, n): the n probabilities just stored at x rounded to bf16 into y,
 * as round_bf16 rounds them: the storage conversion, unless the file including this header
 * defines a faster one with the same bits (AVX512-BF16's: bf16/softmax_tile_bf16_avx512.c). */
#ifndef MH_SOFTMAX_ROUND_P
#include "kernels/generic/bf16_row.h"
#define MH_SOFTMAX_ROUND_P(x, y, n) mh_row_bf16(n, x, y)
#endif

/* Rows whose state updates go together. */
#define CHUNK 32

/* The max of a row's scores and of m0: two chains (6 x 512 scores, Zen 5: 0.8x the time). */
MH_INLINE float row_max(const float* row, size_t full, size_t tail, float m0) {
    const size_t vl = MH_VL;
    mh_vf vmax = mh_vset1(m0), vmax2 = vmax;
    size_t c = 0;
    for (; c + 2 * vl <= full; c += 2 * vl) {
        vmax = mh_vmax(vmax, mh_vload(row + c));
        vmax2 = mh_vmax(vmax2, mh_vload(row + c + vl));
    }
    if (c < full) vmax = mh_vmax(vmax, mh_vload(row + c));
    if (tail) vmax2 = mh_vmax(vmax2, mh_vload_n(row + full, tail, -INFINITY));
    return mh_vhmax(mh_vmax(vmax, vmax2));
}

/* exp(x - mx) of a row in place (exp(-inf) = 0 for dropped keys), and its sum, added in
 * column order; four vectors at a time through mh_vexp4, or one at a time where the ISA skips
 * full vectors of dropped keys (MH_SOFTMAX_SKIP_DROPPED). With pb, each stored vector also
 * rounded to bf16 into pb while it is in L1 (the stored floats read back: f32_to_bf16's bits). */
MH_INLINE float row_exp(float* row, uint16_t* pb, size_t full, size_t tail, float mx) {
    const size_t vl = MH_VL;
    const mh_vf vmx = mh_vset1(mx);
    mh_vf acc = mh_vzero();
    size_t c = 0;
    for (; !MH_SOFTMAX_SKIP_DROPPED && c + 4 * vl <= full; c += 4 * vl) {
        mh_vf e0 = mh_vsub(mh_vload(row + c), vmx), e1 = mh_vsub(mh_vload(row + c + vl), vmx);
        mh_vf e2 = mh_vsub(mh_vload(row + c + 2 * vl), vmx), e3 = mh_vsub(mh_vload(row + c + 3 * vl), vmx);
        mh_vexp4(&e0, &e1, &e2, &e3);
        mh_vstore(row + c, e0), mh_vstore(row + c + vl, e1);
        mh_vstore(row + c + 2 * vl, e2), mh_vstore(row + c + 3 * vl, e3);
        if (pb) MH_SOFTMAX_ROUND_P(row + c, pb + c, 4 * vl);
        acc = mh_vadd(mh_vadd(mh_vadd(mh_vadd(acc, e0), e1), e2), e3);
    }
    for (; c < full; c += vl) {
        const mh_vf x = mh_vload(row + c);
        if (MH_SOFTMAX_SKIP_DROPPED && mh_vall_neg_inf(x)) {
            mh_vstore(row + c, mh_vzero());
            if (pb) MH_SOFTMAX_ROUND_P(row + c, pb + c, vl);
            continue;
        }
        const mh_vf e = mh_vexp(mh_vsub(x, vmx));
        mh_vstore(row + c, e);
        if (pb) MH_SOFTMAX_ROUND_P(row + c, pb + c, vl);
        acc = mh_vadd(acc, e);
    }
    if (tail) {
        const mh_vf e = mh_vexp(mh_vsub(mh_vload_n(row + full, tail, -INFINITY), vmx));
        mh_vstore_n(row + full, e, tail);
        if (pb) MH_SOFTMAX_ROUND_P(row + full, pb + full, tail);
        acc = mh_vadd(acc, e);
    }
    return mh_vhsum(acc);
}

/* Rows [0, rows) (rows <= CHUNK) of the tile: probabilities in place, and per row the exponent
 * of its rescale (d: m - m_new, 0 to keep the state, NaN to make it NaN) and its sum. Every
 * row's max first: each row's exps wait on its max's reduction, which the others' then hide
 * (6 rows in L1, Zen 5, with mh_vexp4: 64 scores a row 0.93x the time, 40 scores 0.89x). */
MH_INLINE void rows_exp(size_t rows, size_t cols, float* s, size_t lds, uint16_t* pb, float* m, float* d, float* sum) {
    const size_t vl = MH_VL, full = cols - cols % vl, tail = cols - full;
    float mx[CHUNK];
    for (size_t r = 0; r < rows; r++) mx[r] = row_max(s + r * lds, full, tail, m[r]);
    for (size_t r = 0; r < rows; r++) {
        float* row = s + r * lds;
        uint16_t* pbr = pb ? pb + r * lds : NULL;
        sum[r] = 0.0f;
        if (mx[r] == -INFINITY) { /* nothing kept yet, or only NaN, which the max may drop */
            int nan = 0;
            for (size_t c = 0; c < cols; c++) nan |= row[c] != row[c];
            for (size_t c = 0; c < full; c += vl) mh_vstore(row + c, mh_vzero());
            if (tail) mh_vstore_n(row + full, mh_vzero(), tail);
            for (size_t c = 0; pbr && c < cols; c++) pbr[c] = 0; /* bf16 +0 */
            d[r] = nan ? NAN : 0.0f; /* NaN: the row's output and probabilities become NaN */
            if (nan) m[r] = NAN;
            continue;
        }
        sum[r] = row_exp(row, pbr, full, tail, mx[r]);
        d[r] = m[r] - mx[r]; /* m[r] = -inf on the first kept tile: the rescale is 0 */
        m[r] = mx[r];
    }
}

/* The step (kernels.h) on rows [0, rows) of s, P also rounded into pb (rows lds apart) unless
 * pb is NULL. */
MH_INLINE void softmax_step(size_t rows, size_t cols, float* s, size_t lds, uint16_t* pb, float* m, float* l,
                            float* alpha) {
    const size_t vl = MH_VL;
    float d[CHUNK], sum[CHUNK];
    for (size_t r0 = 0; r0 < rows; r0 += CHUNK) {
        const size_t n = rows - r0 < CHUNK ? rows - r0 : CHUNK;
        rows_exp(n, cols, s + r0 * lds, lds, pb ? pb + r0 * lds : NULL, m + r0, d, sum);
        for (size_t i = 0; i < n; i += vl) { /* alpha = exp(d), l = l * alpha + sum */
            const size_t k = n - i;
            if (k >= vl) {
                const mh_vf a = mh_vexp(mh_vload(d + i));
                mh_vstore(alpha + r0 + i, a);
                mh_vstore(l + r0 + i, mh_vadd(mh_vmul(mh_vload(l + r0 + i), a), mh_vload(sum + i)));
            } else {
                const mh_vf a = mh_vexp(mh_vload_n(d + i, k, 0.0f));
                mh_vstore_n(alpha + r0 + i, a, k);
                mh_vstore_n(l + r0 + i, mh_vadd(mh_vmul(mh_vload_n(l + r0 + i, k, 0.0f), a), mh_vload_n(sum + i, k, 0.0f)), k);
            }
        }
    }
}

#endif
