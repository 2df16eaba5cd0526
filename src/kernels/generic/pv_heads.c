/* pv_heads (contract in kernels.h), written once for every ISA: key c of every head before key
 * c + 1 of any, so a token-major cache is read in address order, one stream the hardware
 * prefetchers follow (docs/kernels.md, "Decode kernels"). A head's group sums cannot stay in
 * registers across the other heads' rows, so they live in acc; each lane takes the steps of
 * every ISA's pv_direct (kernels.h): the group's sum from -0 by p * V fused multiply-adds in
 * key order (int8: p times the row's scale first), then o = a * o + sum, fused, a = alpha for
 * the call's first group and 1 for the later ones. Same lanes, same steps: the same bits. */
#include "kernels/decode_prefetch.h"
#include "kernels/generic/simd.h"

/* acc[0, dv) = p * row + (first ? -0 : acc), full vectors then the last partial one. */
MH_INLINE void fma_row(const mh_dtype dtype, size_t dv, int first, float pc, const void* row, float* acc) {
    const size_t vl = MH_VL, full = dv - dv % vl;
    const mh_vf pr = mh_vset1(pc), neg0 = mh_vset1(-0.0f);
    for (size_t d = 0; d < full; d += vl) {
        const mh_vf v = mh_vload_dt(mh_dtype_at(row, dtype, (ptrdiff_t)d), dtype);
        mh_vstore(acc + d, mh_vfma(pr, v, first ? neg0 : mh_vload(acc + d)));
    }
    if (full < dv) {
        const size_t n = dv - full;
        const mh_vf v = mh_vload_dt_n(mh_dtype_at(row, dtype, (ptrdiff_t)full), dtype, n);
        mh_vstore_n(acc + full, mh_vfma(pr, v, first ? neg0 : mh_vload_n(acc + full, n, 0.0f)), n);
    }
}

/* o[0, dv) = a * o + acc, full vectors then the last partial one. */
MH_INLINE void add_group(size_t dv, float a, const float* acc, float* o) {
    const size_t vl = MH_VL, full = dv - dv % vl;
    const mh_vf va = mh_vset1(a);
    for (size_t d = 0; d < full; d += vl) mh_vstore(o + d, mh_vfma(va, mh_vload(o + d), mh_vload(acc + d)));
    if (full < dv) {
        const size_t n = dv - full;
        mh_vstore_n(o + full, mh_vfma(va, mh_vload_n(o + full, n, 0.0f), mh_vload_n(acc + full, n, 0.0f)), n);
    }
}

MH_INLINE void pv_heads(const mh_dtype dtype, size_t heads, size_t cols, size_t dv, const float* p, size_t ldp,
                        const mh_rows* v, const float* alpha, float* o, size_t ldo, float* acc) {
    size_t c = 0;
    do { /* at least once, so alpha applies even with no key */
        const size_t start = c, end = mh_pv_group_end(c, cols);
        for (; c < end; c++)
            for (size_t h = 0; h < heads; h++) {
                const mh_rows* x = &v[h];
                const void* row = mh_dtype_at(x->data, dtype, (ptrdiff_t)c * x->ld);
                const float pc = p[h * ldp + c];
                mh_heads_prefetch(dtype, row, dv);
                fma_row(dtype, dv, c == start, dtype == MH_DTYPE_I8 ? pc * x->scale[(ptrdiff_t)c * x->ld_scale] : pc,
                        row, acc + h * dv);
            }
        for (size_t h = 0; h < heads; h++) {
            if (start == end) /* no key: the sum is -0 */
                for (size_t d = 0; d < dv; d++) acc[h * dv + d] = -0.0f;
            add_group(dv, start == 0 ? alpha[h] : 1.0f, acc + h * dv, o + h * ldo);
        }
    } while (c < cols);
}

void MH_KNAME(pv_heads)(size_t heads, size_t cols, size_t dv, const float* p, size_t ldp, const mh_rows* v,
                        const float* alpha, float* o, size_t ldo, float* acc) {
    if (heads == 0) return;
    MH_DIRECT_WIDTH(dv, dw, MH_WITH_DTYPE(v[0].dtype, pv_heads, heads, cols, dw, p, ldp, v, alpha, o, ldo, acc))
}
