/* Online-softmax step (contract in kernels.h), written once for every ISA: full vectors, then
 * the last partial one read with -inf in the lanes past the row (exp gives 0 there, adding
 * nothing to the max or the sum) and written back lane-exactly. A NaN score makes the row's
 * state NaN: through exp and the sum when the max is finite or NaN, explicitly when the max
 * dropped it (a tile of only NaN and -inf), so the row's output is NaN on every ISA. The vector
 * exp is generic/vexp.h (scalar: libm expf). Each row's rescale exp(m - m_new) and its state
 * update wait for a vector of rows (CHUNK at a time), so they cost one vector exp per MH_VL
 * rows instead of a scalar exp per row. */
#include "kernels/generic/simd.h"

/* Rows whose state updates go together. */
#define CHUNK 32

/* Rows [0, rows) (rows <= CHUNK) of the tile: probabilities in place, and per row the exponent
 * of its rescale (d: m - m_new, 0 to keep the state, NaN to make it NaN) and its sum. */
MH_INLINE void rows_exp(size_t rows, size_t cols, float* s, size_t lds, float* m, float* d, float* sum) {
    const size_t vl = MH_VL, full = cols - cols % vl, tail = cols - full;
    for (size_t r = 0; r < rows; r++) {
        float* row = s + r * lds;
        mh_vf vmax = mh_vset1(m[r]), vmax2 = vmax;
        size_t c = 0;
        for (; c + 2 * vl <= full; c += 2 * vl) { /* two chains (6 x 512 scores, Zen 5: 0.8x the time) */
            vmax = mh_vmax(vmax, mh_vload(row + c));
            vmax2 = mh_vmax(vmax2, mh_vload(row + c + vl));
        }
        if (c < full) vmax = mh_vmax(vmax, mh_vload(row + c));
        if (tail) vmax2 = mh_vmax(vmax2, mh_vload_n(row + full, tail, -INFINITY));
        const float mx = mh_vhmax(mh_vmax(vmax, vmax2));
        sum[r] = 0.0f;
        if (mx == -INFINITY) { /* nothing kept yet, or only NaN, which the max may drop */
            int nan = 0;
            for (size_t c = 0; c < cols; c++) nan |= row[c] != row[c];
            for (size_t c = 0; c < full; c += vl) mh_vstore(row + c, mh_vzero());
            if (tail) mh_vstore_n(row + full, mh_vzero(), tail);
            d[r] = nan ? NAN : 0.0f; /* NaN: the row's output and probabilities become NaN */
            if (nan) m[r] = NAN;
            continue;
        }
        const mh_vf vmx = mh_vset1(mx);
        mh_vf acc = mh_vzero();
        for (size_t c = 0; c < full; c += vl) { /* exp(-inf) = 0 for dropped keys */
            const mh_vf x = mh_vload(row + c);
            if (MH_SOFTMAX_SKIP_DROPPED && mh_vall_neg_inf(x)) {
                mh_vstore(row + c, mh_vzero());
                continue;
            }
            const mh_vf e = mh_vexp(mh_vsub(x, vmx));
            mh_vstore(row + c, e);
            acc = mh_vadd(acc, e);
        }
        if (tail) {
            const mh_vf e = mh_vexp(mh_vsub(mh_vload_n(row + full, tail, -INFINITY), vmx));
            mh_vstore_n(row + full, e, tail);
            acc = mh_vadd(acc, e);
        }
        d[r] = m[r] - mx; /* m[r] = -inf on the first kept tile: the rescale is 0 */
        sum[r] = mh_vhsum(acc);
        m[r] = mx;
    }
}

void MH_KNAME(softmax_tile)(size_t rows, size_t cols, float* s, size_t lds, float* m, float* l,
                            float* alpha) {
    const size_t vl = MH_VL;
    float d[CHUNK], sum[CHUNK];
    for (size_t r0 = 0; r0 < rows; r0 += CHUNK) {
        const size_t n = rows - r0 < CHUNK ? rows - r0 : CHUNK;
        rows_exp(n, cols, s + r0 * lds, lds, m + r0, d, sum);
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
