/* Online-softmax step (contract in kernels.h), written once for every ISA: full vectors, then
 * the last partial one read with -inf in the lanes past the row (exp gives 0 there, adding
 * nothing to the max or the sum) and written back lane-exactly. A NaN score makes the row's
 * state NaN: through exp and the sum when the max is finite or NaN, explicitly when the max
 * dropped it (a tile of only NaN and -inf), so the row's output is NaN on every ISA. The vector exp is SLEEF's
 * 1-ulp expf (scalar: libm expf); the state update uses scalar expf on every ISA. */
#include "kernels/generic/simd.h"

void MH_KNAME(softmax_tile)(size_t rows, size_t cols, float* s, size_t lds, float* m, float* l,
                            float* alpha) {
    const size_t vl = MH_VL, full = cols - cols % vl, tail = cols - full;
    for (size_t r = 0; r < rows; r++) {
        float* row = s + r * lds;
        mh_vf vmax = mh_vset1(m[r]);
        for (size_t c = 0; c < full; c += vl) vmax = mh_vmax(vmax, mh_vload(row + c));
        if (tail) vmax = mh_vmax(vmax, mh_vload_n(row + full, tail, -INFINITY));
        const float mx = mh_vhmax(vmax);
        if (mx == -INFINITY) { /* nothing kept yet, or only NaN, which the max may drop */
            int nan = 0;
            for (size_t c = 0; c < cols; c++) nan |= row[c] != row[c];
            for (size_t c = 0; c < full; c += vl) mh_vstore(row + c, mh_vzero());
            if (tail) mh_vstore_n(row + full, mh_vzero(), tail);
            alpha[r] = 1.0f;
            if (nan) m[r] = l[r] = alpha[r] = NAN; /* the row's output and probabilities become NaN */
            continue;
        }
        const mh_vf vmx = mh_vset1(mx);
        mh_vf sum = mh_vzero();
        for (size_t c = 0; c < full; c += vl) { /* exp(-inf) = 0 for dropped keys */
            const mh_vf x = mh_vload(row + c);
            if (MH_SOFTMAX_SKIP_DROPPED && mh_vall_neg_inf(x)) {
                mh_vstore(row + c, mh_vzero());
                continue;
            }
            const mh_vf e = mh_vexp(mh_vsub(x, vmx));
            mh_vstore(row + c, e);
            sum = mh_vadd(sum, e);
        }
        if (tail) {
            const mh_vf e = mh_vexp(mh_vsub(mh_vload_n(row + full, tail, -INFINITY), vmx));
            mh_vstore_n(row + full, e, tail);
            sum = mh_vadd(sum, e);
        }
        alpha[r] = expf(m[r] - mx); /* m[r] = -inf on the first kept tile gives 0 */
        l[r] = l[r] * alpha[r] + mh_vhsum(sum);
        m[r] = mx;
    }
}
