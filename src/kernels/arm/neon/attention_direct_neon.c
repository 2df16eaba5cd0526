/*
 * Direct Q.K^T and P.V for blocks of fewer than 6 query rows (decode): K/V rows are read in
 * place in their storage dtype and widened on load, so each byte of the cache is read once per
 * KV head, whatever the number of query heads sharing it.
 * Register budgets (32 q registers): qk keeps R x 4 accumulators (4 keys per step, <= 20),
 * 4 K vectors and 1 Q vector (<= 25); pv keeps R x 4 accumulators (16 output columns), 4 V
 * vectors and 1 broadcast probability (<= 25).
 * Tails: the last d (or dv) chunk of fewer than 4 elements is read and written lane-exactly.
 */
#include "kernels/i8_rows.h"
#include "kernels/kernel_protos.h"
#include "kernels/arm/neon/simd_neon.h"

#define MAXR 5 /* rows < attn_direct_rows = 6 */

/* acc[r][j] += q[r][d0 .. d0 + nd) * K[c + j][d0 .. d0 + nd) for J keys. */
MH_INLINE void qk_step(const int R, const int J, size_t nd, size_t c, size_t d0, const float* q,
                       size_t ldq, const void* k, ptrdiff_t ldk, mh_dtype dtype,
                       float32x4_t acc[MAXR][4]) {
    float32x4_t kv[4];
    MH_UNROLL(16) for (int j = 0; j < J; j++)
        kv[j] = mh_vload_dt_n(mh_dtype_at(k, dtype, (ptrdiff_t)(c + (size_t)j) * ldk + (ptrdiff_t)d0), dtype, nd);
    MH_UNROLL(16) for (int r = 0; r < R; r++) {
        const float32x4_t qv = mh_vload_n(q + (size_t)r * ldq + d0, nd, 0.0f);
        MH_UNROLL(16) for (int j = 0; j < J; j++) acc[r][j] = vfmaq_f32(acc[r][j], qv, kv[j]);
    }
}

MH_INLINE void qk_rows(const int R, size_t cols, size_t d, const float* q, size_t ldq, const void* k,
                       ptrdiff_t ldk, mh_dtype dtype, float* s, size_t lds) {
    const size_t d_full = d & ~(size_t)3;
    size_t c = 0;
    for (; c + 4 <= cols; c += 4) {
        float32x4_t acc[MAXR][4];
        MH_UNROLL(16) for (int r = 0; r < R; r++)
            MH_UNROLL(16) for (int j = 0; j < 4; j++) acc[r][j] = vdupq_n_f32(0.0f);
        for (size_t d0 = 0; d0 < d_full; d0 += 4) qk_step(R, 4, 4, c, d0, q, ldq, k, ldk, dtype, acc);
        if (d_full < d) qk_step(R, 4, d - d_full, c, d_full, q, ldq, k, ldk, dtype, acc);
        MH_UNROLL(16) for (int r = 0; r < R; r++) /* pairwise sums: lane j = sum of acc[r][j] */
            vst1q_f32(s + (size_t)r * lds + c, vpaddq_f32(vpaddq_f32(acc[r][0], acc[r][1]),
                                                          vpaddq_f32(acc[r][2], acc[r][3])));
    }
    for (; c < cols; c++) {
        float32x4_t acc[MAXR][4];
        MH_UNROLL(16) for (int r = 0; r < R; r++) acc[r][0] = vdupq_n_f32(0.0f);
        for (size_t d0 = 0; d0 < d_full; d0 += 4) qk_step(R, 1, 4, c, d0, q, ldq, k, ldk, dtype, acc);
        if (d_full < d) qk_step(R, 1, d - d_full, c, d_full, q, ldq, k, ldk, dtype, acc);
        MH_UNROLL(16) for (int r = 0; r < R; r++) s[(size_t)r * lds + c] = vaddvq_f32(acc[r][0]);
    }
}

MH_ROWS_FNS(qk_rows, (size_t cols, size_t d, const float* q, size_t ldq, const void* k, ptrdiff_t ldk, mh_dtype dtype,
             float* s, size_t lds),
            (cols, d, q, ldq, k, ldk, dtype, s, lds))

void MH_KNAME(qk_direct)(size_t rows, size_t cols, size_t d, const float* q, size_t ldq, const mh_rows* kr,
                         float* s, size_t lds) {
    const void* k = kr->data;
    const ptrdiff_t ldk = kr->ld;
    const mh_dtype dtype = kr->dtype;
    MH_WITH_ROWS(rows, qk_rows, cols, d, q, ldq, k, ldk, dtype, s, lds)
    if (dtype == MH_DTYPE_I8) mh_i8_scale_scores(rows, cols, kr, s, lds);
}

/* o (R rows x up to 16 columns starting at d0) = alpha * o + P.V, the sum in groups of
 * MH_PV_GROUP keys (kernels.h). FULL: all 16 columns exist. */
MH_INLINE void pv_chunk(const int R, const int FULL, size_t d0, size_t cols, size_t dv,
                        const float* p, size_t ldp, const void* v, ptrdiff_t ldv, mh_dtype dtype,
                        const float* alpha, float* o, size_t ldo) {
    size_t cnt[4];
    float32x4_t acc[MAXR][4];
    MH_UNROLL(16) for (int j = 0; j < 4; j++) cnt[j] = FULL ? 4 : mh_cnt4(dv, d0 + 4 * (size_t)j);
    size_t c = 0;
    do { /* at least once, so alpha applies even with no key */
        const int lead = c == 0;
        const size_t end = mh_pv_group_end(c, cols);
        MH_UNROLL(16) for (int r = 0; r < R; r++)
            MH_UNROLL(16) for (int j = 0; j < 4; j++) acc[r][j] = vdupq_n_f32(-0.0f);
        for (; c < end; c++) {
            float32x4_t vv[4];
            const void* row = mh_dtype_at(v, dtype, (ptrdiff_t)c * ldv + (ptrdiff_t)d0);
            MH_UNROLL(16) for (int j = 0; j < 4; j++) {
                const void* src = mh_dtype_at(row, dtype, 4 * j);
                vv[j] = FULL ? mh_vload_dt(src, dtype) : cnt[j] ? mh_vload_dt_n(src, dtype, cnt[j]) : vdupq_n_f32(0.0f);
            }
            MH_UNROLL(16) for (int r = 0; r < R; r++) {
                const float32x4_t pr = vld1q_dup_f32(p + (size_t)r * ldp + c);
                MH_UNROLL(16) for (int j = 0; j < 4; j++) acc[r][j] = vfmaq_f32(acc[r][j], pr, vv[j]);
            }
        }
        MH_UNROLL(16) for (int r = 0; r < R; r++) { /* o = alpha * o + the group's sum */
            const float32x4_t al = vdupq_n_f32(lead ? alpha[r] : 1.0f);
            MH_UNROLL(16) for (int j = 0; j < 4; j++) {
                float* oj = o + (size_t)r * ldo + d0 + 4 * (size_t)j;
                if (cnt[j]) mh_vstore_n(oj, vfmaq_f32(acc[r][j], al, mh_vload_n(oj, cnt[j], 0.0f)), cnt[j]);
            }
        }
    } while (c < cols);
}

MH_INLINE void pv_rows(const int R, size_t cols, size_t dv, const float* p, size_t ldp, const void* v,
                       ptrdiff_t ldv, mh_dtype dtype, const float* alpha, float* o, size_t ldo) {
    size_t d0 = 0;
    for (; d0 + 16 <= dv; d0 += 16) pv_chunk(R, 1, d0, cols, dv, p, ldp, v, ldv, dtype, alpha, o, ldo);
    if (d0 < dv) pv_chunk(R, 0, d0, cols, dv, p, ldp, v, ldv, dtype, alpha, o, ldo);
}

MH_ROWS_FNS(pv_rows, (size_t cols, size_t dv, const float* p, size_t ldp, const void* v, ptrdiff_t ldv, mh_dtype dtype,
             const float* alpha, float* o, size_t ldo),
            (cols, dv, p, ldp, v, ldv, dtype, alpha, o, ldo))

static void pv_any(size_t rows, size_t cols, size_t dv, const float* p, size_t ldp, const void* v,
                   ptrdiff_t ldv, mh_dtype dtype, const float* alpha, float* o, size_t ldo) {
    MH_WITH_ROWS(rows, pv_rows, cols, dv, p, ldp, v, ldv, dtype, alpha, o, ldo)
}

#include "kernels/direct_entries_each.h"
