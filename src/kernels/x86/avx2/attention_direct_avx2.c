/*
 * Direct Q.K^T and P.V for blocks of fewer than 6 query rows (decode): K/V rows are read in
 * place in their storage dtype and widened on load, so each byte of the cache is read once per
 * KV head, whatever the number of query heads sharing it. Bodies are specialised on the row
 * count R and the storage dtype.
 *
 * qk: J keys at a time (R = 1, 2, 3: J = 4; R = 4, 5: J = 2), an R x J block of ymm
 * accumulators over d (Q read as FMA memory operands), then the R * J sums reduced together,
 * eight at a time. Register budget: R * J accumulators (at most 12) + 1 widened K vector.
 * Every score goes through the same FMA order and the same reduction tree (mh_hsum8x8 and
 * mh_hsum4x8 share it), so a score does not depend on R, J or the key's position in the tile.
 *
 * pv: 8 * J output columns at a time (R = 1: J = 8, R = 2: 4, R = 3: 3, R = 4, 5: 2); each V
 * vector is widened once per key and used by every row. Register budget: R * J accumulators
 * + R broadcasts of P + 1 V vector (R <= 4: at most 13), or for R = 5, 10 accumulators + 2 V
 * vectors + 1 broadcast = 13 of 16.
 *
 * Both prefetch the K/V rows PF_KEYS keys ahead (rows inside the tile only): in token-major
 * caches rows are far apart, and pv walks each row in several column chunks.
 */
#include "kernels/i8_rows.h"
#include "kernels/kernel_protos.h"
#include "kernels/x86/avx2/simd_avx2.h"

#define MAXR 5 /* rows < attn_direct_rows = 6 */
#define MAXJ 8
#define PF_KEYS 16 /* software prefetch distance, in keys (rows of the tile only) */

/* s[r * lds + j] for j < J: scores of the J keys starting at key row `krow0`. */
MH_INLINE void qk_keys(const int R, const int J, const mh_dtype dtype, size_t d,
                       const float* q, size_t ldq, const void* krow0, ptrdiff_t ldk, float* s,
                       size_t lds) {
    __m256 acc[MAXR][MAXJ];
    const void* kr[MAXJ];
    for (int j = 0; j < J; j++) kr[j] = mh_dtype_at(krow0, dtype, (ptrdiff_t)j * ldk);
    for (int r = 0; r < R; r++)
        for (int j = 0; j < J; j++) acc[r][j] = _mm256_setzero_ps();
    size_t d0 = 0;
    for (; d0 + 8 <= d; d0 += 8)
        for (int j = 0; j < J; j++) {
            const __m256 kv = mh_vload_dt(mh_dtype_at(kr[j], dtype, (ptrdiff_t)d0), dtype);
            for (int r = 0; r < R; r++)
                acc[r][j] = _mm256_fmadd_ps(_mm256_loadu_ps(q + (size_t)r * ldq + d0), kv, acc[r][j]);
        }
    if (d0 < d) { /* d tail: zero lanes on both sides */
        const size_t nd = d - d0;
        const __m256i mq = mh_mask8(nd);
        for (int j = 0; j < J; j++) {
            const __m256 kv = mh_vload_dt_n(mh_dtype_at(kr[j], dtype, (ptrdiff_t)d0), dtype, nd);
            for (int r = 0; r < R; r++)
                acc[r][j] = _mm256_fmadd_ps(_mm256_maskload_ps(q + (size_t)r * ldq + d0, mq), kv, acc[r][j]);
        }
    }
    /* Reduce the R x J accumulators together, eight (then four, two, one) at a time: fewer
     * shuffles than one reduction per row, and the same tree for every score. */
#define ACC(f) acc[(f) / J][(f) % J]
    float red[MAXR * MAXJ];
    int f = 0;
    for (; f + 8 <= R * J; f += 8)
        _mm256_storeu_ps(red + f, mh_hsum8x8(ACC(f), ACC(f + 1), ACC(f + 2), ACC(f + 3), ACC(f + 4),
                                             ACC(f + 5), ACC(f + 6), ACC(f + 7)));
    for (; f + 4 <= R * J; f += 4) _mm_storeu_ps(red + f, mh_hsum4x8(ACC(f), ACC(f + 1), ACC(f + 2), ACC(f + 3)));
    for (; f + 2 <= R * J; f += 2)
        _mm_storel_pi((__m64*)(void*)(red + f), mh_hsum4x8(ACC(f), ACC(f + 1), ACC(f), ACC(f + 1)));
    for (; f < R * J; f++) _mm_store_ss(red + f, mh_hsum4x8(ACC(f), ACC(f), ACC(f), ACC(f)));
#undef ACC
    for (int r = 0; r < R; r++)
        for (int j = 0; j < J; j++) s[(size_t)r * lds + (size_t)j] = red[r * J + j];
}

MH_INLINE void qk_rows(const int R, const int J, const mh_dtype dtype, size_t cols, size_t d,
                       const float* q, size_t ldq, const void* k, ptrdiff_t ldk, float* s, size_t lds) {
    const size_t row_bytes = d * mh_dtype_size(dtype);
    size_t c = 0;
    for (; c + (size_t)J <= cols; c += (size_t)J) {
        for (size_t cp = c + PF_KEYS; cp < c + PF_KEYS + (size_t)J && cp < cols; cp++)
            mh_prefetch_bytes(mh_dtype_at(k, dtype, (ptrdiff_t)cp * ldk), row_bytes);
        qk_keys(R, J, dtype, d, q, ldq, mh_dtype_at(k, dtype, (ptrdiff_t)c * ldk), ldk, s + c, lds);
    }
    for (; c < cols; c++) /* the same FMA order and reduction tree, one key at a time */
        qk_keys(R, 1, dtype, d, q, ldq, mh_dtype_at(k, dtype, (ptrdiff_t)c * ldk), ldk, s + c, lds);
}

#define QK_ROWS(R, J)                                                                         \
    case R:                                                                                   \
        switch (dtype) {                                                                      \
        case MH_DTYPE_F16: qk_rows(R, J, MH_DTYPE_F16, cols, d, q, ldq, k, ldk, s, lds); break; \
        case MH_DTYPE_BF16: qk_rows(R, J, MH_DTYPE_BF16, cols, d, q, ldq, k, ldk, s, lds); break; \
        case MH_DTYPE_I8: qk_rows(R, J, MH_DTYPE_I8, cols, d, q, ldq, k, ldk, s, lds); break;     \
        default: qk_rows(R, J, MH_DTYPE_F32, cols, d, q, ldq, k, ldk, s, lds); break;         \
        }                                                                                     \
        break;

void MH_KNAME(qk_direct)(size_t rows, size_t cols, size_t d, const float* q, size_t ldq, const mh_rows* kr,
                         float* s, size_t lds) {
    const void* k = kr->data;
    const ptrdiff_t ldk = kr->ld;
    const mh_dtype dtype = kr->dtype;
    switch (rows) {
        QK_ROWS(1, 4)
        QK_ROWS(2, 4)
        QK_ROWS(3, 4)
        QK_ROWS(4, 2)
        QK_ROWS(5, 2)
    default: break;
    }
    if (dtype == MH_DTYPE_I8) mh_i8_scale_scores(rows, cols, kr, s, lds);
}

/* o[r, d0 .. d0 + 8J) = alpha[r] * o + sum_c p[r, c] * V[c][d0 ..]: vectors j < J - 1 are
 * full, vector J - 1 has `last` (1..8) lanes; nothing past them is read or written. */
MH_INLINE void pv_cols(const int R, const int J, const mh_dtype dtype, size_t last, size_t pf_bytes, size_t cols,
                       size_t d0, const float* p, size_t ldp, const void* v, ptrdiff_t ldv,
                       const float* alpha, float* o, size_t ldo) {
    __m256 acc[MAXR][MAXJ];
    const __m256i mlast = mh_mask8(last);
    for (int r = 0; r < R; r++) {
        const __m256 al = _mm256_broadcast_ss(alpha + r);
        const float* orow = o + (size_t)r * ldo + d0;
        for (int j = 0; j < J - 1; j++) acc[r][j] = _mm256_mul_ps(al, _mm256_loadu_ps(orow + 8 * j));
        acc[r][J - 1] = _mm256_mul_ps(al, last == 8 ? _mm256_loadu_ps(orow + 8 * (J - 1))
                                                    : _mm256_maskload_ps(orow + 8 * (J - 1), mlast));
    }
    for (size_t c = 0; c < cols; c++) {
        const void* row = mh_dtype_at(v, dtype, (ptrdiff_t)c * ldv + (ptrdiff_t)d0);
        if (pf_bytes && c + PF_KEYS < cols) /* the whole row ahead, for this and the later chunks */
            mh_prefetch_bytes(mh_dtype_at(v, dtype, (ptrdiff_t)(c + PF_KEYS) * ldv), pf_bytes);
        if (R <= 4) { /* R broadcasts, then each V vector is used as soon as it is loaded */
            __m256 pr[MAXR];
            for (int r = 0; r < R; r++) pr[r] = _mm256_broadcast_ss(p + (size_t)r * ldp + c);
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
                const __m256 pr = _mm256_broadcast_ss(p + (size_t)r * ldp + c);
                for (int j = 0; j < J; j++) acc[r][j] = _mm256_fmadd_ps(pr, vv[j], acc[r][j]);
            }
        }
    }
    for (int r = 0; r < R; r++) {
        float* orow = o + (size_t)r * ldo + d0;
        for (int j = 0; j < J - 1; j++) _mm256_storeu_ps(orow + 8 * j, acc[r][j]);
        if (last == 8)
            _mm256_storeu_ps(orow + 8 * (J - 1), acc[r][J - 1]);
        else
            _mm256_maskstore_ps(orow + 8 * (J - 1), mlast, acc[r][J - 1]);
    }
}

MH_INLINE void pv_rows(const int R, const int J, const mh_dtype dtype, size_t cols, size_t dv,
                       const float* p, size_t ldp, const void* v, ptrdiff_t ldv,
                       const float* alpha, float* o, size_t ldo) {
    const size_t row_bytes = dv * mh_dtype_size(dtype);
    size_t d0 = 0;
    for (; d0 + 8 * (size_t)J <= dv; d0 += 8 * (size_t)J)
        pv_cols(R, J, dtype, 8, d0 ? 0 : row_bytes, cols, d0, p, ldp, v, ldv, alpha, o, ldo);
    for (; d0 < dv; d0 += 8) /* fewer than J vectors left: one at a time */
        pv_cols(R, 1, dtype, mh_lanes8(dv, d0), d0 ? 0 : row_bytes, cols, d0, p, ldp, v, ldv, alpha, o, ldo);
}

#define PV_ROWS(R, J)                                                                             \
    case R:                                                                                       \
        switch (dtype) {                                                                          \
        case MH_DTYPE_F16: pv_rows(R, J, MH_DTYPE_F16, cols, dv, p, ldp, v, ldv, alpha, o, ldo); break; \
        case MH_DTYPE_BF16: pv_rows(R, J, MH_DTYPE_BF16, cols, dv, p, ldp, v, ldv, alpha, o, ldo); break; \
        case MH_DTYPE_I8: pv_rows(R, J, MH_DTYPE_I8, cols, dv, p, ldp, v, ldv, alpha, o, ldo); break;     \
        default: pv_rows(R, J, MH_DTYPE_F32, cols, dv, p, ldp, v, ldv, alpha, o, ldo); break;   \
        }                                                                                         \
        break;

static void pv_any(size_t rows, size_t cols, size_t dv, const float* p, size_t ldp, const void* v,
                   ptrdiff_t ldv, mh_dtype dtype, const float* alpha, float* o, size_t ldo) {
    switch (rows) {
        PV_ROWS(1, 8)
        PV_ROWS(2, 4)
        PV_ROWS(3, 3)
        PV_ROWS(4, 2)
        PV_ROWS(5, 2)
    default: break;
    }
}

void MH_KNAME(pv_direct)(size_t rows, size_t cols, size_t dv, const float* p, size_t ldp, const mh_rows* v,
                         const float* alpha, float* o, size_t ldo) {
    if (v->dtype == MH_DTYPE_I8) mh_i8_pv(pv_any, rows, cols, dv, p, ldp, v, alpha, o, ldo);
    else pv_any(rows, cols, dv, p, ldp, v->data, v->ld, v->dtype, alpha, o, ldo);
}
