/*
 * Direct Q.K^T and P.V for blocks of fewer than 6 query rows (decode): K/V rows are read in
 * place in their storage dtype and widened on load, so each byte of the cache is read once per
 * KV head, whatever the number of query heads sharing it.
 */
#include "kernels/i8_rows.h"
#include "kernels/kernel_protos.h"
#include "kernels/x86/avx512/simd_avx512.h"

#define MAXR 5 /* rows < attn_direct_rows = 6 */

/* Sums of four 16-lane vectors, in out[0..3]. */
MH_INLINE void reduce4(__m512 a0, __m512 a1, __m512 a2, __m512 a3, float* out, size_t stride) {
    const __m512 u0 = _mm512_add_ps(_mm512_shuffle_f32x4(a0, a1, 0x44), _mm512_shuffle_f32x4(a0, a1, 0xee));
    const __m512 u1 = _mm512_add_ps(_mm512_shuffle_f32x4(a2, a3, 0x44), _mm512_shuffle_f32x4(a2, a3, 0xee));
    /* u0 = [a0 q0+q2, a0 q1+q3, a1 q0+q2, a1 q1+q3]; same for u1 with a2, a3 */
    __m512 w = _mm512_add_ps(_mm512_shuffle_f32x4(u0, u1, 0x88), _mm512_shuffle_f32x4(u0, u1, 0xdd));
    /* w = [a0, a1, a2, a3] as 128-bit partial sums; finish inside each 128-bit lane */
    w = _mm512_add_ps(w, _mm512_permute_ps(w, _MM_SHUFFLE(1, 0, 3, 2)));
    w = _mm512_add_ps(w, _mm512_permute_ps(w, _MM_SHUFFLE(2, 3, 0, 1)));
    float tmp[16];
    _mm512_storeu_ps(tmp, w);
    out[0] = tmp[0], out[stride] = tmp[4], out[2 * stride] = tmp[8], out[3 * stride] = tmp[12];
}

MH_INLINE void qk_rows(const int R, size_t cols, size_t d, const float* q, size_t ldq, const void* k,
                       ptrdiff_t ldk, mh_dtype dtype, float* s, size_t lds) {
    const size_t row_bytes = d * mh_dtype_size(dtype);
    size_t c = 0;
    for (; c + 4 <= cols; c += 4) {
        for (size_t j = 0; j < 4; j++) /* may run past the tile: a prefetch never faults */
            mh_prefetch_bytes(mh_dtype_at(k, dtype, (ptrdiff_t)(c + MH_PREFETCH_ROWS + j) * ldk), row_bytes);
        __m512 acc[MAXR][4];
        for (int r = 0; r < R; r++)
            for (int j = 0; j < 4; j++) acc[r][j] = _mm512_setzero_ps();
        for (size_t d0 = 0; d0 < d; d0 += 16) {
            const __mmask16 m = mh_mask16(d, d0);
            __m512 kv[4];
            for (int j = 0; j < 4; j++) kv[j] = mh_load16(mh_dtype_at(k, dtype, (ptrdiff_t)(c + (size_t)j) * ldk + (ptrdiff_t)d0), dtype, m);
            for (int r = 0; r < R; r++) {
                const __m512 qv = _mm512_maskz_loadu_ps(m, q + (size_t)r * ldq + d0);
                for (int j = 0; j < 4; j++) acc[r][j] = _mm512_fmadd_ps(qv, kv[j], acc[r][j]);
            }
        }
        for (int r = 0; r < R; r++) reduce4(acc[r][0], acc[r][1], acc[r][2], acc[r][3], s + (size_t)r * lds + c, 1);
    }
    for (; c < cols; c++) {
        __m512 acc[MAXR];
        for (int r = 0; r < R; r++) acc[r] = _mm512_setzero_ps();
        for (size_t d0 = 0; d0 < d; d0 += 16) {
            const __mmask16 m = mh_mask16(d, d0);
            const __m512 kv = mh_load16(mh_dtype_at(k, dtype, (ptrdiff_t)c * ldk + (ptrdiff_t)d0), dtype, m);
            for (int r = 0; r < R; r++)
                acc[r] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, q + (size_t)r * ldq + d0), kv, acc[r]);
        }
        for (int r = 0; r < R; r++) s[(size_t)r * lds + c] = _mm512_reduce_add_ps(acc[r]);
    }
}

void MH_KNAME(qk_direct)(size_t rows, size_t cols, size_t d, const float* q, size_t ldq, const mh_rows* kr,
                         float* s, size_t lds) {
    const void* k = kr->data;
    const ptrdiff_t ldk = kr->ld;
    const mh_dtype dtype = kr->dtype;
    switch (rows) {
    case 1: qk_rows(1, cols, d, q, ldq, k, ldk, dtype, s, lds); break;
    case 2: qk_rows(2, cols, d, q, ldq, k, ldk, dtype, s, lds); break;
    case 3: qk_rows(3, cols, d, q, ldq, k, ldk, dtype, s, lds); break;
    case 4: qk_rows(4, cols, d, q, ldq, k, ldk, dtype, s, lds); break;
    case 5: qk_rows(5, cols, d, q, ldq, k, ldk, dtype, s, lds); break;
    default: break;
    }
    if (dtype == MH_DTYPE_I8) mh_i8_scale_scores(rows, cols, kr, s, lds);
}

/* o (R rows x 64 columns starting at d0) = alpha * o + P.V: 4*R accumulators, 4 V vectors. */
MH_INLINE void pv_rows(const int R, size_t cols, size_t dv, const float* p, size_t ldp, const void* v,
                       ptrdiff_t ldv, mh_dtype dtype, const float* alpha, float* o, size_t ldo) {
    for (size_t d0 = 0; d0 < dv; d0 += 64) {
        __mmask16 m[4];
        __m512 acc[MAXR][4];
        for (int j = 0; j < 4; j++) m[j] = mh_mask16(dv, d0 + 16 * (size_t)j);
        for (int r = 0; r < R; r++) {
            const __m512 al = _mm512_set1_ps(alpha[r]);
            for (int j = 0; j < 4; j++)
                acc[r][j] = _mm512_mul_ps(al, _mm512_maskz_loadu_ps(m[j], o + (size_t)r * ldo + d0 + 16 * (size_t)j));
        }
        for (size_t c = 0; c < cols; c++) {
            if (d0 == 0)
                mh_prefetch_bytes(mh_dtype_at(v, dtype, (ptrdiff_t)(c + MH_PREFETCH_ROWS) * ldv),
                                dv * mh_dtype_size(dtype));
            __m512 vv[4];
            const void* row = mh_dtype_at(v, dtype, (ptrdiff_t)c * ldv + (ptrdiff_t)d0);
            for (int j = 0; j < 4; j++) vv[j] = mh_load16(mh_dtype_at(row, dtype, 16 * j), dtype, m[j]);
            for (int r = 0; r < R; r++) {
                const __m512 pr = _mm512_set1_ps(p[(size_t)r * ldp + c]);
                for (int j = 0; j < 4; j++) acc[r][j] = _mm512_fmadd_ps(pr, vv[j], acc[r][j]);
            }
        }
        for (int r = 0; r < R; r++)
            for (int j = 0; j < 4; j++)
                _mm512_mask_storeu_ps(o + (size_t)r * ldo + d0 + 16 * (size_t)j, m[j], acc[r][j]);
    }
}

static void pv_any(size_t rows, size_t cols, size_t dv, const float* p, size_t ldp, const void* v,
                   ptrdiff_t ldv, mh_dtype dtype, const float* alpha, float* o, size_t ldo) {
    switch (rows) {
    case 1: pv_rows(1, cols, dv, p, ldp, v, ldv, dtype, alpha, o, ldo); break;
    case 2: pv_rows(2, cols, dv, p, ldp, v, ldv, dtype, alpha, o, ldo); break;
    case 3: pv_rows(3, cols, dv, p, ldp, v, ldv, dtype, alpha, o, ldo); break;
    case 4: pv_rows(4, cols, dv, p, ldp, v, ldv, dtype, alpha, o, ldo); break;
    case 5: pv_rows(5, cols, dv, p, ldp, v, ldv, dtype, alpha, o, ldo); break;
    default: break;
    }
}

void MH_KNAME(pv_direct)(size_t rows, size_t cols, size_t dv, const float* p, size_t ldp, const mh_rows* v,
                         const float* alpha, float* o, size_t ldo) {
    if (v->dtype == MH_DTYPE_I8) mh_i8_pv(pv_any, rows, cols, dv, p, ldp, v, alpha, o, ldo);
    else pv_any(rows, cols, dv, p, ldp, v->data, v->ld, v->dtype, alpha, o, ldo);
}
