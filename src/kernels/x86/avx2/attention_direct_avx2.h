/*
 * Direct Q.K^T and P.V for blocks of fewer than 6 query rows (decode): K/V rows are read in
 * place in their storage dtype and widened in registers (int8 rows times their scale), so each
 * byte of the cache is read once per KV head, whatever the number of query heads sharing it.
 * Bodies are specialised on the row count R and the storage dtype. The memory schedule is the
 * AVX-512 kernels' (attention_direct_avx512.h): rows front to back and in order, software
 * prefetch by kernels/decode_prefetch.h's rule.
 *
 * qk: J keys at a time (R = 1, 2: J = 4; R = 3, 4, 5: J = 1), each key's row read
 * whole with two FMA chains per query row, then the R * J sums reduced together, eight at a
 * time. From four rows a second key's 2R chains beside the first key's R sums outgrow the 16
 * registers (GQA-8 f16 decode, Zen 4: 0.84-0.95x the time with one key); three rows fit two
 * keys, but one key at a time took 0.89-0.94x the time of two (Zen 3, 24 query heads on 8 K/V
 * heads at 32K keys: f16, int8 and f32; eight rows per K/V head, in chunks of 5 and 3,
 * 0.96-0.98x; the same bits). Every score
 * goes through the same FMA order and the same reduction tree (mh_hsum8x8 and mh_hsum4x8 share
 * it), so a score does not depend on R, J or the key's position in the tile.
 *
 * pv: 8 * J output columns at a time (R = 1: J = 8, R = 2: 4, R = 3: 3, R = 4, 5: 2); each V
 * vector is widened once per key and used by every row. Register budget: R * J accumulators
 * + R broadcasts of P + 1 V vector (R <= 4: at most 13), or for R = 5, 10 accumulators + 2 V
 * vectors + 1 broadcast = 13 of 16.
 */
/* The bodies of this ISA's direct kernels, compiled by two files: attention_direct_avx2.c
 * (the entries, every head width) and attention_direct_w64_avx2.c (the copy for width 64);
 * each ends with kernels/x86/attention_direct_entries.h. The width rule is MH_DIRECT_WIDTH
 * (kernel_protos.h). */
#ifndef MH_KERNELS_X86_AVX2_ATTENTION_DIRECT_AVX2_H
#define MH_KERNELS_X86_AVX2_ATTENTION_DIRECT_AVX2_H
#include "kernels/decode_prefetch.h"
#include "kernels/kernel_protos.h"
#include "kernels/x86/avx2/simd_avx2.h"

#define MAXR 5 /* rows < attn_direct_rows = 6 */
#define MAXJ 8

/* q.k of one key row for R query rows, as R vectors of partial sums: two chains over d (even
 * and odd 8-column steps), the same order for every key and every R. */
MH_INLINE void dot_rows(const int R, const mh_dtype dtype, size_t d, const float* q, size_t ldq, const void* krow,
                        __m256* out) {
    __m256 a[MAXR], b[MAXR];
    for (int r = 0; r < R; r++) a[r] = b[r] = _mm256_setzero_ps();
    size_t d0 = 0;
    for (; d0 + 16 <= d; d0 += 16) {
        const __m256 k0 = mh_vload_dt(mh_dtype_at(krow, dtype, (ptrdiff_t)d0), dtype);
        const __m256 k1 = mh_vload_dt(mh_dtype_at(krow, dtype, (ptrdiff_t)d0 + 8), dtype);
        for (int r = 0; r < R; r++) {
            a[r] = _mm256_fmadd_ps(_mm256_loadu_ps(q + (size_t)r * ldq + d0), k0, a[r]);
            b[r] = _mm256_fmadd_ps(_mm256_loadu_ps(q + (size_t)r * ldq + d0 + 8), k1, b[r]);
        }
    }
    if (d0 + 8 <= d) {
        const __m256 k0 = mh_vload_dt(mh_dtype_at(krow, dtype, (ptrdiff_t)d0), dtype);
        for (int r = 0; r < R; r++) a[r] = _mm256_fmadd_ps(_mm256_loadu_ps(q + (size_t)r * ldq + d0), k0, a[r]);
        d0 += 8;
    }
    if (d0 < d) { /* d tail: zero lanes on both sides */
        const size_t nd = d - d0;
        const __m256i mq = mh_mask8(nd);
        const __m256 k1 = mh_vload_dt_n(mh_dtype_at(krow, dtype, (ptrdiff_t)d0), dtype, nd);
        for (int r = 0; r < R; r++)
            b[r] = _mm256_fmadd_ps(_mm256_maskload_ps(q + (size_t)r * ldq + d0, mq), k1, b[r]);
    }
    for (int r = 0; r < R; r++) out[r] = _mm256_add_ps(a[r], b[r]);
}

/* red[f] = the sum of ACC(f)'s lanes for f < n (ACC: a macro naming accumulator f at the call
 * site), eight (then four, two, one) at a time: fewer shuffles than one reduction per sum, and
 * the same tree for every sum. A macro, not a function over an array, so qk_keys compiles to
 * the code it had before qk_heads shared the tree (a flat array handed to a function changed
 * it). */
#define REDUCE_SUMS(n, red)                                                                                   \
    {                                                                                                         \
        int f = 0;                                                                                            \
        for (; f + 8 <= (n); f += 8)                                                                          \
            _mm256_storeu_ps((red) + f, mh_hsum8x8(ACC(f), ACC(f + 1), ACC(f + 2), ACC(f + 3), ACC(f + 4),    \
                                                   ACC(f + 5), ACC(f + 6), ACC(f + 7)));                      \
        for (; f + 4 <= (n); f += 4) _mm_storeu_ps((red) + f, mh_hsum4x8(ACC(f), ACC(f + 1), ACC(f + 2), ACC(f + 3))); \
        for (; f + 2 <= (n); f += 2)                                                                          \
            _mm_storel_pi((__m64*)(void*)((red) + f), mh_hsum4x8(ACC(f), ACC(f + 1), ACC(f), ACC(f + 1)));    \
        for (; f < (n); f++) _mm_store_ss((red) + f, mh_hsum4x8(ACC(f), ACC(f), ACC(f), ACC(f)));              \
    }

/* s[r * lds + j] for j < J: scores of the J keys from key c of k (int8: times their scales). */
MH_INLINE void qk_keys(const int R, const int J, const mh_dtype dtype, size_t d, const float* q, size_t ldq,
                       const mh_rows* k, size_t c, float* s, size_t lds) {
    const void* krow0 = mh_dtype_at(k->data, dtype, (ptrdiff_t)c * k->ld);
    const ptrdiff_t ldk = k->ld;
    __m256 acc[MAXR][MAXJ];
    for (int j = 0; j < J; j++) {
        __m256 key[MAXR];
        dot_rows(R, dtype, d, q, ldq, mh_dtype_at(krow0, dtype, (ptrdiff_t)j * ldk), key);
        for (int r = 0; r < R; r++) acc[r][j] = key[r];
    }
    /* the R x J accumulators reduced together */
    float red[MAXR * MAXJ];
#define ACC(f) acc[(f) / J][(f) % J]
    REDUCE_SUMS(R * J, red)
#undef ACC
    for (int j = 0; j < J; j++) {
        const float sc = dtype == MH_DTYPE_I8 ? k->scale[(ptrdiff_t)(c + (size_t)j) * k->ld_scale] : 1.0f;
        for (int r = 0; r < R; r++)
            s[(size_t)r * lds + c + (size_t)j] = dtype == MH_DTYPE_I8 ? red[r * J + j] * sc : red[r * J + j];
    }
}

/* qk_heads (kernels.h): key c of every head, eight heads at a time through REDUCE_SUMS' tree,
 * which every score of qk_keys takes, so each has the bits of qk_direct's. */
MH_INLINE void qk_heads_rows(const mh_dtype dtype, size_t heads, size_t cols, size_t d, const float* q, size_t ldq,
                             const mh_rows* k, float* s, size_t lds) {
    for (size_t c = 0; c < cols; c++)
        for (size_t h0 = 0; h0 < heads; h0 += MAXJ) {
            const int n = heads - h0 < MAXJ ? (int)(heads - h0) : MAXJ;
            __m256 acc[MAXJ];
            float red[MAXJ];
            for (int j = n; j < MAXJ; j++) acc[j] = _mm256_setzero_ps(); /* never reduced; quiets GCC */
            for (int j = 0; j < n; j++) {
                const mh_rows* x = &k[h0 + (size_t)j];
                const void* row = mh_dtype_at(x->data, dtype, (ptrdiff_t)c * x->ld);
                mh_heads_prefetch(dtype, row, d);
                dot_rows(1, dtype, d, q + (h0 + (size_t)j) * ldq, ldq, row, &acc[j]);
            }
#define ACC(f) acc[f]
            REDUCE_SUMS(n, red)
#undef ACC
            for (int j = 0; j < n; j++) {
                const mh_rows* x = &k[h0 + (size_t)j];
                s[(h0 + (size_t)j) * lds + c] =
                    dtype == MH_DTYPE_I8 ? red[j] * x->scale[(ptrdiff_t)c * x->ld_scale] : red[j];
            }
        }
}

MH_INLINE void qk_rows(const mh_dtype dtype, const int R, const int J, size_t cols, size_t d, const float* q,
                       size_t ldq, const mh_rows* k, float* s, size_t lds) {
    size_t c = 0;
    for (; c + (size_t)J <= cols; c += (size_t)J) {
        for (size_t j = 0; j < (size_t)J; j++) mh_decode_prefetch(k, dtype, c + j, d, (size_t)R);
        qk_keys(R, J, dtype, d, q, ldq, k, c, s, lds);
    }
    for (; c < cols; c++) /* the same FMA order and reduction tree, one key at a time */
        qk_keys(R, 1, dtype, d, q, ldq, k, c, s, lds);
}

/* J keys per block: R = 1, 2: 4; R = 3, 4, 5: 1. */
MH_INLINE void qk_r(const int R, size_t cols, size_t d, const float* q, size_t ldq, const mh_rows* k, float* s,
                    size_t lds) {
    MH_DIRECT_WIDTH(d, dk, MH_WITH_DTYPE(k->dtype, qk_rows, R, R <= 2 ? 4 : 1, cols, dk, q, ldq, k, s, lds))
}

MH_ROWS_FNS(qk_r, (size_t cols, size_t d, const float* q, size_t ldq, const mh_rows* k, float* s, size_t lds),
            (cols, d, q, ldq, k, s, lds))


/* One group of keys [c, end) (MH_PV_GROUP of them, kernels.h, or the call's last) over columns
 * [d0, d0 + 8J): o[r, ..] = a[r] * o + sum_c p[r, c] * V[c][..], the group's sum from -0 in
 * registers, then added to o with a = alpha for the call's first group (c = 0), 1 for the later
 * ones. Vectors j < J - 1 are full, vector J - 1 has `last` (1..8) lanes; nothing past them is
 * read or written. */
MH_INLINE void pv_group(const int R, const int J, const mh_dtype dtype, size_t last, int first, size_t dv, size_t c,
                        size_t end, size_t d0, const float* p, size_t ldp, const mh_rows* v, const float* alpha,
                        float* o, size_t ldo) {
    __m256 acc[MAXR][MAXJ];
    const __m256i mlast = mh_mask8(last);
    const int lead = c == 0;
    for (int r = 0; r < R; r++)
        for (int j = 0; j < J; j++) acc[r][j] = _mm256_set1_ps(-0.0f);
    for (; c < end; c++) {
        if (first) { /* the whole row, for this and the later passes */
            mh_decode_prefetch(v, dtype, c, dv, (size_t)R);
            if (8 * (size_t)J < dv) mh_decode_prefetch_rest(v, dtype, c, 8 * (size_t)J, dv);
        }
        const void* row = mh_dtype_at(v->data, dtype, (ptrdiff_t)c * v->ld + (ptrdiff_t)d0);
        const float sc = dtype == MH_DTYPE_I8 ? v->scale[(ptrdiff_t)c * v->ld_scale] : 1.0f;
        if (R <= 4) { /* R broadcasts, then each V vector is used as soon as it is loaded */
            __m256 pr[MAXR];
            for (int r = 0; r < R; r++)
                pr[r] = _mm256_set1_ps(dtype == MH_DTYPE_I8 ? p[(size_t)r * ldp + c] * sc : p[(size_t)r * ldp + c]);
            for (int j = 0; j < J; j++) {
                const void* src = mh_dtype_at(row, dtype, 8 * j);
                const __m256 vj = j < J - 1 ? mh_vload_dt(src, dtype) : mh_vload_dt_n(src, dtype, last);
                for (int r = 0; r < R; r++) acc[r][j] = _mm256_fmadd_ps(pr[r], vj, acc[r][j]);
            }
        } else { /* R = 5: the J V vectors first, then one broadcast at a time */
            __m256 vv[MAXJ];
            for (int j = 0; j < J - 1; j++) vv[j] = mh_vload_dt(mh_dtype_at(row, dtype, 8 * j), dtype);
            vv[J - 1] = mh_vload_dt_n(mh_dtype_at(row, dtype, 8 * (J - 1)), dtype, last);
            for (int r = 0; r < R; r++) {
                const __m256 pr =
                    _mm256_set1_ps(dtype == MH_DTYPE_I8 ? p[(size_t)r * ldp + c] * sc : p[(size_t)r * ldp + c]);
                for (int j = 0; j < J; j++) acc[r][j] = _mm256_fmadd_ps(pr, vv[j], acc[r][j]);
            }
        }
    }
    for (int r = 0; r < R; r++) { /* o = alpha * o + the group's sum (alpha 1 after the first group) */
        const __m256 al = _mm256_set1_ps(lead ? alpha[r] : 1.0f);
        float* orow = o + (size_t)r * ldo + d0;
        for (int j = 0; j < J - 1; j++)
            _mm256_storeu_ps(orow + 8 * j, _mm256_fmadd_ps(al, _mm256_loadu_ps(orow + 8 * j), acc[r][j]));
        float* ol = orow + 8 * (J - 1);
        if (last == 8)
            _mm256_storeu_ps(ol, _mm256_fmadd_ps(al, _mm256_loadu_ps(ol), acc[r][J - 1]));
        else
            _mm256_maskstore_ps(ol, mlast, _mm256_fmadd_ps(al, _mm256_maskload_ps(ol, mlast), acc[r][J - 1]));
    }
}

/* Each group of keys goes through all the column passes before the next group, so the later
 * passes find its V rows in L1, where the first brought them (mh_decode_prefetch_rest); against
 * each pass over all the call's keys in turn, MHA decode at 32K keys, 128 dims (two passes of
 * 64), Zen 5: f16 0.93-0.95x the time (in L2 0.96x), int8 0.96-0.97x, GQA-8 int8 0.96x.
 * Columns are independent sums, so neither the passes nor their order change a bit. */
MH_INLINE void pv_rows(const mh_dtype dtype, const int R, const int J, size_t cols, size_t dv, const float* p,
                       size_t ldp, const mh_rows* v, const float* alpha, float* o, size_t ldo) {
    size_t c = 0;
    do { /* at least once, so alpha applies even with no key */
        const size_t end = mh_pv_group_end(c, cols);
        size_t d0 = 0;
        for (; d0 + 8 * (size_t)J <= dv; d0 += 8 * (size_t)J)
            pv_group(R, J, dtype, 8, d0 == 0, dv, c, end, d0, p, ldp, v, alpha, o, ldo);
        /* fewer than J vectors left (head dims 80, 96, ...): passes of 4 and 2 vectors while
         * they fit, then one at a time (Phi-3's 96 at R = 1: 64 + 32 columns, not 64 + 4 x 8) */
        if (J > 4 && d0 + 32 <= dv)
            pv_group(R, 4, dtype, 8, d0 == 0, dv, c, end, d0, p, ldp, v, alpha, o, ldo), d0 += 32;
        if (J > 2 && d0 + 16 <= dv)
            pv_group(R, 2, dtype, 8, d0 == 0, dv, c, end, d0, p, ldp, v, alpha, o, ldo), d0 += 16;
        for (; d0 < dv; d0 += 8)
            pv_group(R, 1, dtype, mh_lanes8(dv, d0), d0 == 0, dv, c, end, d0, p, ldp, v, alpha, o, ldo);
        c = end;
    } while (c < cols);
}

/* 8 * J columns per pass: R = 1: J = 8, R = 2: 4, R = 3: 3, R = 4, 5: 2. */
MH_INLINE void pv_r(const int R, size_t cols, size_t dv, const float* p, size_t ldp, const mh_rows* v,
                    const float* alpha, float* o, size_t ldo) {
    MH_DIRECT_WIDTH(dv, dw,
                  MH_WITH_DTYPE(v->dtype, pv_rows, R, R == 1 ? 8 : R == 2 ? 4 : R == 3 ? 3 : 2, cols, dw, p, ldp, v,
                                alpha, o, ldo))
}

MH_ROWS_FNS(pv_r, (size_t cols, size_t dv, const float* p, size_t ldp, const mh_rows* v, const float* alpha, float* o,
             size_t ldo),
            (cols, dv, p, ldp, v, alpha, o, ldo))

#endif
