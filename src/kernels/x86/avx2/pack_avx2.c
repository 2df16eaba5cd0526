/*
 * Packing K/V tiles of any storage dtype into f32 panels of 16 columns.
 * pack_kt moves 8 keys x 8 dims at a time through an in-register 8x8 transpose (24 shuffles
 * for 64 elements); pack_v is a widening copy. Rows are read only up to d (dv) elements:
 * f32 tails use maskload, int8/f16/bf16 tails a small stack copy (mh_vload_dt_n); int8
 * tiles are then scaled (kernels/i8_rows.h).
 */
#include "kernels/i8_rows.h"
#include "kernels/kernel_protos.h"
#include "kernels/x86/avx2/simd_avx2.h"

#define NR 16

/* In-register transpose of an 8 x 8 block: r[i][j] -> r[j][i]. */
MH_INLINE void transpose8(__m256 r[8]) {
    __m256 t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int i = 0; i < 4; i++) {
        r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
        r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
    }
}

/* Keys [c0, c0 + 8) (those below cols; the rest are zero) into their half of panel c0 / 16. */
MH_INLINE void pack_kt_8keys(const mh_dtype dtype, size_t c0, size_t cols, size_t d, const void* k,
                             ptrdiff_t ldk, float* dst) {
    float* panel = dst + (c0 / NR) * d * NR + c0 % NR;
    const size_t nk = cols - c0 < 8 ? cols - c0 : 8;
    const void* rows[8];
    for (size_t i = 0; i < nk; i++) rows[i] = mh_dtype_at(k, dtype, (ptrdiff_t)(c0 + i) * ldk);
    size_t d0 = 0;
    if (nk == 8)
        for (; d0 + 8 <= d; d0 += 8) { /* the steady state: full 8 x 8 blocks */
            __m256 r[8];
            for (int i = 0; i < 8; i++) r[i] = mh_vload_dt(mh_dtype_at(rows[i], dtype, (ptrdiff_t)d0), dtype);
            transpose8(r);
            for (int i = 0; i < 8; i++) _mm256_storeu_ps(panel + (d0 + (size_t)i) * NR, r[i]);
        }
    for (; d0 < d; d0 += 8) { /* a d tail and/or missing keys */
        const size_t nd = d - d0 < 8 ? d - d0 : 8;
        __m256 r[8];
        for (size_t i = 0; i < 8; i++)
            r[i] = i < nk ? mh_vload_dt_n(mh_dtype_at(rows[i], dtype, (ptrdiff_t)d0), dtype, nd)
                          : _mm256_setzero_ps();
        transpose8(r);
        for (size_t i = 0; i < nd; i++) _mm256_storeu_ps(panel + (d0 + i) * NR, r[i]);
    }
}

MH_INLINE void pack_kt(const mh_dtype dtype, size_t cols, size_t d, const void* k, ptrdiff_t ldk,
                       float* dst) {
    size_t c0 = 0;
    for (; c0 < cols; c0 += 8) pack_kt_8keys(dtype, c0, cols, d, k, ldk, dst);
    if (c0 % NR) { /* the last panel's second half holds no key: zero it */
        float* panel = dst + (c0 / NR) * d * NR + c0 % NR;
        for (size_t dd = 0; dd < d; dd++) _mm256_storeu_ps(panel + dd * NR, _mm256_setzero_ps());
    }
}

void MH_KNAME(pack_kt)(size_t cols, size_t d, const mh_rows* k, float* dst) {
    MH_WITH_DTYPE(k->dtype, pack_kt, cols, d, k->data, k->ld, dst)
    if (k->dtype == MH_DTYPE_I8) mh_i8_scale_kt(cols, d, NR, k, dst);
}
