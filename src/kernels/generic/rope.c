/* QK-norm and rotary position embeddings of projected q/k rows (contract in kernels.h),
 * written once for every ISA. Per row: each head's RMSNorm, then the cos/sin of a chunk of
 * pairs (one vector sincos per MH_VL pairs, shared by all heads of the row) and that chunk's
 * rotation in every head. The interleaved layout loads 2*MH_VL elements and splits them into
 * the pairs' x (even) and y (odd) elements, so both layouts run on full vectors. */
#include "kernels/generic/simd.h"

/* Pairs whose cos/sin are computed at once: a multiple of every MH_VL (SVE's at most 64). */
#define ROPE_CHUNK 64

/* A full vector, or the first n (< MH_VL) elements with 0 in the other lanes. */
MH_INLINE mh_vf load_upto(const float* p, size_t n) {
    return n >= MH_VL ? mh_vload(p) : mh_vload_n(p, n, 0.0f);
}
MH_INLINE void store_upto(float* p, mh_vf v, size_t n) {
    if (n >= MH_VL) mh_vstore(p, v);
    else mh_vstore_n(p, v, n);
}

/* x[0, d) = (x * (1 / sqrt(mean(x^2) + eps))) * w, as Qwen3's RMSNorm in f32. */
static void rms_norm(float* x, size_t d, const float* w, float eps) {
    mh_vf acc = mh_vzero();
    for (size_t i = 0; i < d; i += MH_VL) {
        const mh_vf v = load_upto(x + i, d - i);
        acc = mh_vfma(v, v, acc);
    }
    const mh_vf inv = mh_vset1(1.0f / sqrtf(mh_vhsum(acc) / (float)d + eps));
    for (size_t i = 0; i < d; i += MH_VL)
        store_upto(x + i, mh_vmul(mh_vmul(load_upto(x + i, d - i), inv), load_upto(w + i, d - i)), d - i);
}

/* (x, y) -> (x c - y s, x s + y c), each product rounded (PyTorch's q*cos + rotate_half(q)*sin). */
MH_INLINE void turn(mh_vf* x, mh_vf* y, mh_vf c, mh_vf s) {
    const mh_vf nx = mh_vsub(mh_vmul(*x, c), mh_vmul(*y, s));
    *y = mh_vadd(mh_vmul(*y, c), mh_vmul(*x, s));
    *x = nx;
}

/* Pairs [i0, i0 + n) of one head h (d wide), cos/sin of pair i0 + i at cs[i], sn[i]. */
static void rotate_chunk(const mh_rope_args* a, float* h, size_t i0, size_t n, const float* cs,
                         const float* sn) {
    for (size_t i = 0; i < n; i += MH_VL) {
        const size_t m = n - i; /* pairs left, used up to MH_VL */
        const mh_vf c = mh_vload(cs + i), s = mh_vload(sn + i);
        mh_vf x, y;
        if (!a->interleaved) {
            float *px = h + i0 + i, *py = px + a->rot / 2;
            x = load_upto(px, m), y = load_upto(py, m);
            turn(&x, &y, c, s);
            store_upto(px, x, m), store_upto(py, y, m);
        } else {
            float* p = h + 2 * (i0 + i);
            const size_t e = m >= MH_VL ? 2 * MH_VL : 2 * m; /* elements of these pairs */
            const size_t e1 = e > MH_VL ? e - MH_VL : 0;
            mh_vf lo = load_upto(p, e), hi = load_upto(p + MH_VL, e1);
            mh_vdeinterleave(lo, hi, &x, &y);
            turn(&x, &y, c, s);
            mh_vinterleave(x, y, &lo, &hi);
            store_upto(p, lo, e), store_upto(p + MH_VL, hi, e1);
        }
    }
}

void MH_KNAME(rope)(const mh_rope_args* a, size_t rows, const int64_t* pos, float* x, size_t ldx) {
    const size_t half = a->rot / 2;
    float cs[ROPE_CHUNK], sn[ROPE_CHUNK];
    for (size_t r = 0; r < rows; r++) {
        float* row = x + r * ldx;
        for (size_t h = 0; a->norm && h < a->heads; h++) rms_norm(row + h * a->d, a->d, a->norm, a->eps);
        const mh_vf p = mh_vset1((float)pos[r]);
        for (size_t i0 = 0; i0 < half; i0 += ROPE_CHUNK) {
            const size_t n = half - i0 < ROPE_CHUNK ? half - i0 : ROPE_CHUNK;
            for (size_t i = 0; i < n; i += MH_VL) { /* lanes past n: angle 0, never used */
                mh_vf s, c;
                mh_vsincos(mh_vmul(p, load_upto(a->inv_freq + i0 + i, n - i)), &s, &c);
                mh_vstore(sn + i, s), mh_vstore(cs + i, c);
            }
            for (size_t h = 0; h < a->heads; h++) rotate_chunk(a, row + h * a->d, i0, n, cs, sn);
        }
    }
}
