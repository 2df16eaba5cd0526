/*
 * Direct Q.K^T and P.V for blocks of fewer than 6 query rows (decode): K/V rows are read in
 * place in their storage dtype and widened in registers (int8 rows times their scale), so each
 * byte of the cache is read once per KV head, whatever the number of query heads sharing it.
 * Bodies are specialised on the row count R and the dtype: the inner loops hold no dtype
 * branch and, on full vectors, no mask (each K/V vector is one widening load).
 *
 * What holds decode at the memory limit (docs/kernels.md, "Decode kernels"):
 *  - every K/V row is read front to back and the rows in order, so the loads walk the cache
 *    in address order and the hardware prefetchers stream it;
 *  - software prefetch follows kernels/decode_prefetch.h: none on near rows for one or two
 *    query rows (memory-bound), near rows into L2 for grouped heads (core-bound), far rows
 *    (an engine's token-major cache) one key tile ahead into L2;
 *  - qk keeps two FMA chains per row and key (from three rows: d outer over four keys, one
 *    chain each, q loaded once per four keys) and reduces four keys of a row by one shuffle
 *    tree (reduce4), the same tree for every score of a given R, so a score does not depend
 *    on the key's place in the tile; pv holds 256 columns of its row (R = 1), 128 (R = 2) or 64
 *    (R = 3..5) of every row in registers and widens each V vector once for all R rows.
 */
/* The bodies of this ISA's direct kernels, compiled by two files: attention_direct_avx512.c
 * (the entries, every head width) and attention_direct_w64_avx512.c (the copy for width 64);
 * each ends with kernels/x86/attention_direct_entries.h. The width rule is MH_DIRECT_WIDTH
 * (kernel_protos.h). */
#ifndef MH_KERNELS_X86_AVX512_ATTENTION_DIRECT_AVX512_H
#define MH_KERNELS_X86_AVX512_ATTENTION_DIRECT_AVX512_H
#include "kernels/decode_prefetch.h"
#include "kernels/kernel_protos.h"
#include "kernels/x86/avx512/simd_avx512.h"

#define MAXR 5 /* rows < attn_direct_rows = 6 */
#define MAXJ 16
#define DMAJOR_ROWS 3 /* from this many query rows qk runs d outer (dot4_rows) */

/* 16 elements of `dtype` at p, widened to f32 (int8 unscaled): all lanes (masked = 0) or the
 * lanes of m. */
MH_INLINE __m512 load16(const void* p, const mh_dtype dtype, const int masked, __mmask16 m) {
    return masked ? mh_load16(p, dtype, m) : mh_vload_dt(p, dtype);
}

/* The four sums of a0..a3 as one 128-bit vector. */
MH_INLINE __m128 reduce4(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
    const __m512 u0 = _mm512_add_ps(_mm512_shuffle_f32x4(a0, a1, 0x44), _mm512_shuffle_f32x4(a0, a1, 0xee));
    const __m512 u1 = _mm512_add_ps(_mm512_shuffle_f32x4(a2, a3, 0x44), _mm512_shuffle_f32x4(a2, a3, 0xee));
    /* u0 = [a0 q0+q2, a0 q1+q3, a1 q0+q2, a1 q1+q3]; the same for u1 with a2, a3 */
    __m512 w = _mm512_add_ps(_mm512_shuffle_f32x4(u0, u1, 0x88), _mm512_shuffle_f32x4(u0, u1, 0xdd));
    /* w = [a0, a1, a2, a3] as 128-bit partial sums; finish inside each 128-bit lane */
    w = _mm512_add_ps(w, _mm512_permute_ps(w, _MM_SHUFFLE(1, 0, 3, 2)));
    w = _mm512_add_ps(w, _mm512_permute_ps(w, _MM_SHUFFLE(2, 3, 0, 1)));
    const __m512i first = _mm512_setr_epi32(0, 4, 8, 12, 0, 4, 8, 12, 0, 4, 8, 12, 0, 4, 8, 12);
    return _mm512_castps512_ps128(_mm512_permutexvar_ps(first, w));
}

/* q.k of one key row for R query rows, as R vectors of partial sums: two chains over d (even
 * and odd 16-column steps), the same order for every key and every R. */
MH_INLINE void dot_rows(const int R, const mh_dtype dtype, size_t d, const float* q, size_t ldq, const void* krow,
                        __m512* out) {
    __m512 a[MAXR], b[MAXR];
    MH_UNROLL(MAXR) for (int r = 0; r < R; r++) a[r] = b[r] = _mm512_setzero_ps();
    size_t d0 = 0;
    for (; d0 + 32 <= d; d0 += 32) {
        const __m512 k0 = load16(mh_dtype_at(krow, dtype, (ptrdiff_t)d0), dtype, 0, 0);
        const __m512 k1 = load16(mh_dtype_at(krow, dtype, (ptrdiff_t)d0 + 16), dtype, 0, 0);
        MH_UNROLL(MAXR) for (int r = 0; r < R; r++) {
            a[r] = _mm512_fmadd_ps(_mm512_loadu_ps(q + (size_t)r * ldq + d0), k0, a[r]);
            b[r] = _mm512_fmadd_ps(_mm512_loadu_ps(q + (size_t)r * ldq + d0 + 16), k1, b[r]);
        }
    }
    if (d0 + 16 <= d) {
        const __m512 k0 = load16(mh_dtype_at(krow, dtype, (ptrdiff_t)d0), dtype, 0, 0);
        MH_UNROLL(MAXR) for (int r = 0; r < R; r++)
            a[r] = _mm512_fmadd_ps(_mm512_loadu_ps(q + (size_t)r * ldq + d0), k0, a[r]);
        d0 += 16;
    }
    if (d0 < d) { /* d tail: zero lanes on both sides */
        const __mmask16 m = mh_mask16(d, d0);
        const __m512 k1 = load16(mh_dtype_at(krow, dtype, (ptrdiff_t)d0), dtype, 1, m);
        MH_UNROLL(MAXR) for (int r = 0; r < R; r++)
            b[r] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, q + (size_t)r * ldq + d0), k1, b[r]);
    }
    MH_UNROLL(MAXR) for (int r = 0; r < R; r++) out[r] = _mm512_add_ps(a[r], b[r]);
}

/* One 16-column step of dot4_rows: columns [d0, d0 + 16) (with masked, only the lanes of m). */
MH_INLINE void dot4_step(const int R, const mh_dtype dtype, const int masked, __mmask16 m, size_t d0, const float* q,
                         size_t ldq, const void* k, ptrdiff_t ldk, __m512* a0, __m512* a1, __m512* a2, __m512* a3) {
    const __m512 v0 = load16(mh_dtype_at(k, dtype, (ptrdiff_t)d0), dtype, masked, m);
    const __m512 v1 = load16(mh_dtype_at(k, dtype, ldk + (ptrdiff_t)d0), dtype, masked, m);
    const __m512 v2 = load16(mh_dtype_at(k, dtype, 2 * ldk + (ptrdiff_t)d0), dtype, masked, m);
    const __m512 v3 = load16(mh_dtype_at(k, dtype, 3 * ldk + (ptrdiff_t)d0), dtype, masked, m);
    MH_UNROLL(MAXR) for (int r = 0; r < R; r++) {
        const float* qr = q + (size_t)r * ldq + d0;
        const __m512 qv = masked ? _mm512_maskz_loadu_ps(m, qr) : _mm512_loadu_ps(qr);
        a0[r] = _mm512_fmadd_ps(qv, v0, a0[r]);
        a1[r] = _mm512_fmadd_ps(qv, v1, a1[r]);
        a2[r] = _mm512_fmadd_ps(qv, v2, a2[r]);
        a3[r] = _mm512_fmadd_ps(qv, v3, a3[r]);
    }
}

/* q.k of four key rows for R query rows (R >= 3, the core's limit rather than memory's), d
 * outer: each q vector is loaded once for the four keys and each K vector once for the R
 * rows, one FMA chain per row and key. Full steps carry no mask and no branch; the d tail is
 * one masked step (zero lanes on both sides). */
MH_INLINE void dot4_rows(const int R, const mh_dtype dtype, size_t d, const float* q, size_t ldq, const void* k,
                         ptrdiff_t ldk, __m512* a0, __m512* a1, __m512* a2, __m512* a3) {
    MH_UNROLL(MAXR) for (int r = 0; r < R; r++) a0[r] = a1[r] = a2[r] = a3[r] = _mm512_setzero_ps();
    size_t d0 = 0;
    for (; d0 + 16 <= d; d0 += 16) dot4_step(R, dtype, 0, 0, d0, q, ldq, k, ldk, a0, a1, a2, a3);
    if (d0 < d) dot4_step(R, dtype, 1, mh_mask16(d, d0), d0, q, ldq, k, ldk, a0, a1, a2, a3);
}

/* Scores of the `cols` keys of k for R rows, four keys at a time; a last one to three keys go
 * one at a time through the same tree. int8 sums are then scaled by their rows' scales. */
MH_INLINE void qk_rows(const mh_dtype dtype, const int R, size_t cols, size_t d, const float* q, size_t ldq,
                       const mh_rows* k, float* s, size_t lds) {
    const float* ks = k->scale;
    const ptrdiff_t ldk = k->ld, lks = k->ld_scale;
    size_t c = 0;
    for (; c + 4 <= cols; c += 4) {
        for (size_t j = 0; j < 4; j++) mh_decode_prefetch(k, dtype, c + j, d, (size_t)R);
        __m512 a0[MAXR], a1[MAXR], a2[MAXR], a3[MAXR];
        if (R >= DMAJOR_ROWS) {
            dot4_rows(R, dtype, d, q, ldq, mh_dtype_at(k->data, dtype, (ptrdiff_t)c * ldk), ldk, a0, a1, a2, a3);
        } else {
            dot_rows(R, dtype, d, q, ldq, mh_dtype_at(k->data, dtype, (ptrdiff_t)c * ldk), a0);
            dot_rows(R, dtype, d, q, ldq, mh_dtype_at(k->data, dtype, (ptrdiff_t)(c + 1) * ldk), a1);
            dot_rows(R, dtype, d, q, ldq, mh_dtype_at(k->data, dtype, (ptrdiff_t)(c + 2) * ldk), a2);
            dot_rows(R, dtype, d, q, ldq, mh_dtype_at(k->data, dtype, (ptrdiff_t)(c + 3) * ldk), a3);
        }
        __m128 sc = _mm_set1_ps(1.0f);
        if (dtype == MH_DTYPE_I8)
            sc = _mm_setr_ps(ks[(ptrdiff_t)c * lks], ks[(ptrdiff_t)(c + 1) * lks], ks[(ptrdiff_t)(c + 2) * lks],
                             ks[(ptrdiff_t)(c + 3) * lks]);
        MH_UNROLL(MAXR) for (int r = 0; r < R; r++) {
            const __m128 sum = reduce4(a0[r], a1[r], a2[r], a3[r]);
            _mm_storeu_ps(s + (size_t)r * lds + c, dtype == MH_DTYPE_I8 ? _mm_mul_ps(sum, sc) : sum);
        }
    }
    for (; c < cols; c++) { /* the order of a group of four (R >= DMAJOR_ROWS: the row four times) */
        __m512 a0[MAXR], t1[MAXR], t2[MAXR], t3[MAXR];
        if (R >= DMAJOR_ROWS)
            dot4_rows(R, dtype, d, q, ldq, mh_dtype_at(k->data, dtype, (ptrdiff_t)c * ldk), 0, a0, t1, t2, t3);
        else
            dot_rows(R, dtype, d, q, ldq, mh_dtype_at(k->data, dtype, (ptrdiff_t)c * ldk), a0);
        const __m128 sc = _mm_set_ss(dtype == MH_DTYPE_I8 ? ks[(ptrdiff_t)c * lks] : 1.0f);
        MH_UNROLL(MAXR) for (int r = 0; r < R; r++) {
            const __m128 sum = reduce4(a0[r], a0[r], a0[r], a0[r]);
            _mm_store_ss(s + (size_t)r * lds + c, dtype == MH_DTYPE_I8 ? _mm_mul_ss(sum, sc) : sum);
        }
    }
}

/* qk_heads (kernels.h): key c of every head, four heads at a time through the tree that
 * takes four keys of one head in qk_rows (R = 1: dot_rows, reduce4), so each score has the bits
 * of qk_direct's. */
MH_INLINE void qk_heads_rows(const mh_dtype dtype, size_t heads, size_t cols, size_t d, const float* q, size_t ldq,
                             const mh_rows* k, float* s, size_t lds) {
    for (size_t c = 0; c < cols; c++) {
        size_t h = 0;
        for (; h + 4 <= heads; h += 4) {
            __m512 a[4];
            float sc[4] = {1.0f, 1.0f, 1.0f, 1.0f}, out[4];
            MH_UNROLL(4) for (int j = 0; j < 4; j++) {
                const mh_rows* x = &k[h + (size_t)j];
                const void* row = mh_dtype_at(x->data, dtype, (ptrdiff_t)c * x->ld);
                mh_heads_prefetch(dtype, row, d);
                dot_rows(1, dtype, d, q + (h + (size_t)j) * ldq, ldq, row, &a[j]);
                if (dtype == MH_DTYPE_I8) sc[j] = x->scale[(ptrdiff_t)c * x->ld_scale];
            }
            const __m128 sum = reduce4(a[0], a[1], a[2], a[3]);
            _mm_storeu_ps(out, dtype == MH_DTYPE_I8 ? _mm_mul_ps(sum, _mm_loadu_ps(sc)) : sum);
            MH_UNROLL(4) for (int j = 0; j < 4; j++) s[(h + (size_t)j) * lds + c] = out[j];
        }
        for (; h < heads; h++) {
            const mh_rows* x = &k[h];
            const void* row = mh_dtype_at(x->data, dtype, (ptrdiff_t)c * x->ld);
            mh_heads_prefetch(dtype, row, d);
            __m512 a;
            dot_rows(1, dtype, d, q + h * ldq, ldq, row, &a);
            const __m128 sum = reduce4(a, a, a, a);
            const __m128 sc = _mm_set_ss(dtype == MH_DTYPE_I8 ? x->scale[(ptrdiff_t)c * x->ld_scale] : 1.0f);
            s[h * lds + c] = _mm_cvtss_f32(dtype == MH_DTYPE_I8 ? _mm_mul_ss(sum, sc) : sum);
        }
    }
}

MH_INLINE void qk_r(const int R, size_t cols, size_t d, const float* q, size_t ldq, const mh_rows* k, float* s,
                    size_t lds) {
    MH_DIRECT_WIDTH(d, dk, MH_WITH_DTYPE(k->dtype, qk_rows, R, cols, dk, q, ldq, k, s, lds))
}

MH_ROWS_FNS(qk_r, (size_t cols, size_t d, const float* q, size_t ldq, const mh_rows* k, float* s, size_t lds),
            (cols, d, q, ldq, k, s, lds))


/* One group of keys [c, end) (MH_PV_GROUP of them, kernels.h, or the call's last) over columns
 * [d0, d0 + 16J): o[r, ..] = a[r] * o + sum_c p[r, c] * V[c][..] (int8: p times the row's scale
 * first), the group's sum from -0 in registers, then added to o with a = alpha for the call's
 * first group (c = 0), 1 for the later ones; with masked, only the columns below dv are read
 * and written. */
MH_INLINE void pv_group(const int R, const int J, const mh_dtype dtype, const int masked, size_t dv, int first,
                        size_t c, size_t end, size_t d0, const float* p, size_t ldp, const mh_rows* v,
                        const float* alpha, float* o, size_t ldo) {
    __m512 acc[MAXR][MAXJ];
    __mmask16 m[MAXJ];
    MH_UNROLL(MAXJ) for (int j = 0; j < J; j++) m[j] = mh_mask16(dv, d0 + 16 * (size_t)j);
    const int lead = c == 0;
    MH_UNROLL(MAXR) for (int r = 0; r < R; r++)
        MH_UNROLL(MAXJ) for (int j = 0; j < J; j++) acc[r][j] = _mm512_set1_ps(-0.0f);
    for (; c < end; c++) {
        if (first) /* the whole row, for this and the later passes */
            mh_decode_prefetch(v, dtype, c, dv, (size_t)R);
        const void* row = mh_dtype_at(v->data, dtype, (ptrdiff_t)c * v->ld + (ptrdiff_t)d0);
        const float sc = dtype == MH_DTYPE_I8 ? v->scale[(ptrdiff_t)c * v->ld_scale] : 1.0f;
        __m512 pr[MAXR];
        MH_UNROLL(MAXR) for (int r = 0; r < R; r++)
            pr[r] = _mm512_set1_ps(dtype == MH_DTYPE_I8 ? p[(size_t)r * ldp + c] * sc : p[(size_t)r * ldp + c]);
        MH_UNROLL(MAXJ) for (int j = 0; j < J; j++) {
            const __m512 vj = load16(mh_dtype_at(row, dtype, 16 * j), dtype, masked, m[j]);
            MH_UNROLL(MAXR) for (int r = 0; r < R; r++) acc[r][j] = _mm512_fmadd_ps(pr[r], vj, acc[r][j]);
        }
    }
    MH_UNROLL(MAXR) for (int r = 0; r < R; r++) {
        const __m512 al = _mm512_set1_ps(lead ? alpha[r] : 1.0f);
        float* orow = o + (size_t)r * ldo + d0;
        MH_UNROLL(MAXJ) for (int j = 0; j < J; j++) {
            if (masked)
                _mm512_mask_storeu_ps(orow + 16 * j, m[j],
                                      _mm512_fmadd_ps(al, _mm512_maskz_loadu_ps(m[j], orow + 16 * j), acc[r][j]));
            else
                _mm512_storeu_ps(orow + 16 * j, _mm512_fmadd_ps(al, _mm512_loadu_ps(orow + 16 * j), acc[r][j]));
        }
    }
}

/* The w vectors [d0, d0 + 16w) of the row (1 <= w <= 15, fewer than a full pass) in one pass: w
 * a constant in each case (its accumulators in registers), the cases past the row count's
 * budget (jmax) compiled away. */
#define PV_PART(W) \
    case W: \
        if (W < jmax) pv_group(R, W, dtype, 0, dv, first, c, end, d0, p, ldp, v, alpha, o, ldo); \
        break;
MH_INLINE void pv_part(const int R, const int jmax, const mh_dtype dtype, size_t w, size_t dv, int first, size_t c,
                       size_t end, size_t d0, const float* p, size_t ldp, const mh_rows* v, const float* alpha,
                       float* o, size_t ldo) {
    switch (w) {
        PV_PART(1) PV_PART(2) PV_PART(3) PV_PART(4) PV_PART(5) PV_PART(6) PV_PART(7) PV_PART(8)
        PV_PART(9) PV_PART(10) PV_PART(11) PV_PART(12) PV_PART(13) PV_PART(14) PV_PART(15)
        default: break;
    }
}
#undef PV_PART

/* 16 * J columns per pass: 256 for R = 1 (16 accumulators: a row of Gemma's head dim 256 in one
 * pass, against two of 128: MHA f16 decode at 16K keys, H16, 0.72x the time from DRAM, 0.91x
 * from L3, 0.94x from L2; int8 0.85x from DRAM), 128 for R = 2, 64 for R = 3..5. What is left of
 * the row after its full passes, fewer than J whole vectors (head dims 64, 80, 96, 160, ... at R
 * = 1), goes in one pass of exactly its vectors, and a last part-vector (a head dim that is not
 * a multiple of 16) in a masked pass of one. A pass of J vectors over a 64-wide row widened and
 * multiplied half its vectors for nothing and read the next row's lines through its masked
 * loads (MHA f16 decode at 32K keys, H16 D64, Zen 5: 12.9 ms, 3.5x the time of its bytes at the
 * read bandwidth). One pass of the rest instead of passes of 128, 64, 32 and 16 columns (stop
 * 61, MHA decode at 32K keys, H16, Zen 5): D96 0.85x the time with f16, 0.94x with int8; D80
 * 0.97x and 0.91x; D112 0.85x; at 16K keys D160 0.76x, D192 0.82x; two rows per K/V head at D96
 * 0.84x; four rows (passes of 64) 0.99x; 64 and 128 dims run as before. Each group of keys goes
 * through all the passes before the next group, as on AVX2 (the same time here). Columns are
 * independent sums, so neither the passes nor their order change a bit. */
MH_INLINE void pv_rows(const mh_dtype dtype, const int R, size_t cols, size_t dv, const float* p, size_t ldp,
                       const mh_rows* v, const float* alpha, float* o, size_t ldo) {
    const int J = R == 1 ? 16 : R == 2 ? 8 : 4;
    size_t c = 0;
    do { /* at least once, so alpha applies even with no key */
        const size_t end = mh_pv_group_end(c, cols);
        size_t d0 = 0;
        for (; d0 + 16 * (size_t)J <= dv; d0 += 16 * (size_t)J)
            pv_group(R, J, dtype, 0, dv, d0 == 0, c, end, d0, p, ldp, v, alpha, o, ldo);
        const size_t w = (dv - d0) / 16; /* whole vectors left, fewer than J */
        if (w) pv_part(R, J, dtype, w, dv, d0 == 0, c, end, d0, p, ldp, v, alpha, o, ldo), d0 += 16 * w;
        if (d0 < dv) pv_group(R, 1, dtype, 1, dv, d0 == 0, c, end, d0, p, ldp, v, alpha, o, ldo);
        c = end;
    } while (c < cols);
}

MH_INLINE void pv_r(const int R, size_t cols, size_t dv, const float* p, size_t ldp, const mh_rows* v,
                    const float* alpha, float* o, size_t ldo) {
    MH_DIRECT_WIDTH(dv, dw, MH_WITH_DTYPE(v->dtype, pv_rows, R, cols, dw, p, ldp, v, alpha, o, ldo))
}

MH_ROWS_FNS(pv_r, (size_t cols, size_t dv, const float* p, size_t ldp, const mh_rows* v, const float* alpha, float* o,
             size_t ldo),
            (cols, dv, p, ldp, v, alpha, o, ldo))

#endif
