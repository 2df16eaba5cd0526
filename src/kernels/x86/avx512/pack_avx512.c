/* Packing K/V tiles of any storage dtype into f32 panels of 64 columns. */
#include <string.h>

#include "kernels/kernel_protos.h"
#include "kernels/x86/avx512/simd_avx512.h"
#include "kernels/x86/avx512/transpose_avx512.h"

#define NR 64

/* In-register transpose of a 16 x 16 block of 16-bit elements, one row per ymm: in each
 * 128-bit lane an 8 x 8 transpose of each group of 8 rows (unpacks of 16, 32, 64 bits), then
 * the groups' lanes joined: column j (16 rows) into r[j]. 64 ymm shuffles, which a core that
 * splits zmm shuffles in two (Zen 4) runs at twice the rate of mh_transpose16's. */
MH_INLINE void transpose16x16_epi16(__m256i r[16]) {
    __m256i c[16];
    for (int g = 0; g < 16; g += 8) {
        __m256i a[8], b[8];
        for (int i = 0; i < 8; i += 2) {
            a[i] = _mm256_unpacklo_epi16(r[g + i], r[g + i + 1]);
            a[i + 1] = _mm256_unpackhi_epi16(r[g + i], r[g + i + 1]);
        }
        for (int h = 0; h < 8; h += 4) { /* rows g+h .. g+h+3: columns (0,1) (2,3) (4,5) (6,7) */
            b[h] = _mm256_unpacklo_epi32(a[h], a[h + 2]);
            b[h + 1] = _mm256_unpackhi_epi32(a[h], a[h + 2]);
            b[h + 2] = _mm256_unpacklo_epi32(a[h + 1], a[h + 3]);
            b[h + 3] = _mm256_unpackhi_epi32(a[h + 1], a[h + 3]);
        }
        for (int k = 0; k < 4; k++) { /* column 2k, 2k + 1 of the 8 rows (lane 1: 8 + 2k, 9 + 2k) */
            c[g + 2 * k] = _mm256_unpacklo_epi64(b[k], b[k + 4]);
            c[g + 2 * k + 1] = _mm256_unpackhi_epi64(b[k], b[k + 4]);
        }
    }
    for (int k = 0; k < 8; k++) {
        r[k] = _mm256_permute2x128_si256(c[k], c[8 + k], 0x20);
        r[8 + k] = _mm256_permute2x128_si256(c[k], c[8 + k], 0x31);
    }
}

/* 16 f16 / bf16 storage elements (a ymm) widened exactly to f32. */
MH_INLINE __m512 widen16(const mh_dtype dtype, __m256i h) {
    return dtype == MH_DTYPE_F16 ? _mm512_cvtph_ps(h) : _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* pack_kt16 for 16-bit storage: the block transposed before it is widened (half the bytes to
 * move, ymm shuffles). */
MH_INLINE void pack_kt16_half(const mh_dtype dtype, size_t c0, size_t nk, size_t d, const mh_rows* kr, float* panel) {
    for (size_t d0 = 0; d0 < d; d0 += 16) {
        const __mmask16 dm = mh_mask16(d, d0);
        __m256i r[16];
        for (size_t i = 0; i < 16; i++)
            r[i] = i < nk ? _mm256_maskz_loadu_epi16(dm, mh_dtype_at(kr->data, dtype, (ptrdiff_t)(c0 + i) * kr->ld + (ptrdiff_t)d0))
                          : _mm256_setzero_si256();
        transpose16x16_epi16(r);
        const size_t nd = d - d0 < 16 ? d - d0 : 16;
        for (size_t i = 0; i < nd; i++) _mm512_storeu_ps(panel + (d0 + i) * NR, widen16(dtype, r[i]));
    }
}

/* Keys [c0, c0 + 16) (those below cols) into their panel: 16 x 16 blocks widened, transposed
 * and, for int8, multiplied by the keys' scales (one vector of scales per transposed row). */
MH_INLINE void pack_kt16(const mh_dtype dtype, size_t c0, size_t cols, size_t d, const mh_rows* kr, float* dst) {
    float* panel = dst + (c0 / NR) * d * NR + c0 % NR;
    const size_t nk = cols - c0 < 16 ? cols - c0 : 16;
    if (dtype == MH_DTYPE_F16 || dtype == MH_DTYPE_BF16) {
        pack_kt16_half(dtype, c0, nk, d, kr, panel);
        return;
    }
    __m512 sc = _mm512_set1_ps(1.0f);
    if (dtype == MH_DTYPE_I8) {
        float s[16] = {0};
        for (size_t i = 0; i < nk; i++) s[i] = kr->scale[(ptrdiff_t)(c0 + i) * kr->ld_scale];
        sc = _mm512_loadu_ps(s);
    }
    for (size_t d0 = 0; d0 < d; d0 += 16) {
        const int full = d0 + 16 <= d;
        const __mmask16 dm = mh_mask16(d, d0);
        __m512 r[16];
        for (size_t i = 0; i < 16; i++)
            r[i] = i < nk ? full ? mh_vload_dt(mh_dtype_at(kr->data, dtype, (ptrdiff_t)(c0 + i) * kr->ld + (ptrdiff_t)d0), dtype)
                               : mh_load16(mh_dtype_at(kr->data, dtype, (ptrdiff_t)(c0 + i) * kr->ld + (ptrdiff_t)d0), dtype, dm)
                          : _mm512_setzero_ps();
        mh_transpose16(r);
        const size_t nd = d - d0 < 16 ? d - d0 : 16;
        for (size_t i = 0; i < nd; i++)
            _mm512_storeu_ps(panel + (d0 + i) * NR, dtype == MH_DTYPE_I8 ? _mm512_mul_ps(r[i], sc) : r[i]);
    }
}

MH_INLINE void pack_kt(const mh_dtype dtype, size_t cols, size_t d, const mh_rows* kr, float* dst) {
    const size_t groups = (cols + 15) / 16, padded = (cols + NR - 1) / NR * NR;
    for (size_t c0 = 0; c0 < groups * 16; c0 += 16) pack_kt16(dtype, c0, cols, d, kr, dst);
    for (size_t c0 = groups * 16; c0 < padded; c0 += 16) { /* zero the rest of the last panel */
        float* panel = dst + (c0 / NR) * d * NR + c0 % NR;
        for (size_t dd = 0; dd < d; dd++) _mm512_storeu_ps(panel + dd * NR, _mm512_setzero_ps());
    }
}

void MH_KNAME(pack_kt)(size_t cols, size_t d, const mh_rows* kr, float* dst) {
    MH_WITH_DTYPE(kr->dtype, pack_kt, cols, d, kr, dst)
}
