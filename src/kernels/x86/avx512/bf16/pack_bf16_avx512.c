/*
 * Packing K/V tiles of any storage dtype into the bf16 compute mode's panels, or into bf16
 * rows (rows_bf16; contract in kernels.h, "bf16 compute") on AVX512-BF16, bitwise the results
 * of generic/bf16/pack_bf16.c, which this file replaces for this ISA (cmake/kernels.cmake).
 * Whole vectors load without a mask (simd_avx512.h, mh_load16_n). Rows are widened as the f32
 * packs widen them (int8 times the row's scale in f32), rounded 32 elements at a time
 * (bf16_round_avx512.h; bf16 storage loaded as it is) and laid out in registers:
 *  - K: a key's pair of dims (d, d + 1) is one 32-bit element, so 16 keys x 16 pairs of the
 *    panel [pairs][NR][2] are a 16 x 16 32-bit transpose (transpose_avx512.h) of 16 rows;
 *  - V: two keys' 16 columns side by side in one vector, interleaved by one VPERMW.
 */
#include <string.h>

#include "kernels/kernel_protos.h"
#include "kernels/x86/avx512/bf16/bf16_round_avx512.h"
#include "kernels/x86/avx512/transpose_avx512.h"

#define NR 64
#define PF 8 /* pack_v_bf16 prefetches the rows this many keys ahead */

/* Row c of x: its first element and its int8 scale (1 for the other dtypes). */
MH_INLINE const void* row_at(const mh_dtype dtype, const mh_rows* x, size_t c) {
    return mh_dtype_at(x->data, dtype, (ptrdiff_t)c * x->ld);
}
MH_INLINE __m512 row_scale(const mh_dtype dtype, const mh_rows* x, size_t c) {
    return _mm512_set1_ps(dtype == MH_DTYPE_I8 ? x->scale[(ptrdiff_t)c * x->ld_scale] : 1.0f);
}

/* The cache line of `row` holding element e, requested ahead: a tile's rows lie a whole
 * token's stride apart (token-major K/V), each a short stream of its own, and the packs
 * waited on their misses (prefetching took a tenth off their time in a bf16 prefill, Zen 4). */
MH_INLINE void prefetch(const mh_dtype dtype, const void* row, size_t e) {
    _mm_prefetch((const char*)mh_dtype_at(row, dtype, (ptrdiff_t)e), _MM_HINT_T0);
}

/* Elements [e, e + 16) of `row` below n (0 past it) in f32, int8 times its scale sc. */
MH_INLINE __m512 widen16(const mh_dtype dtype, const void* row, size_t e, size_t n, __m512 sc) {
    const __m512 v = mh_load16_n(mh_dtype_at(row, dtype, (ptrdiff_t)e), dtype, n > e ? n - e : 0);
    return dtype == MH_DTYPE_I8 ? _mm512_mul_ps(v, sc) : v;
}

/* lo and hi, widened from storage `dtype`, rounded to bf16 (lo's in the low half): f16's
 * values skip the subnormal check (bf16_round_avx512.h). */
MH_INLINE __m512i round32(const mh_dtype dtype, __m512 lo, __m512 hi) {
    return dtype == MH_DTYPE_F16 ? mh_bf16x32_f16(lo, hi) : mh_bf16x32(lo, hi);
}

/* Elements [ea, ea + 16) of row a below na, then [eb, eb + 16) of row b below nb, in bf16
 * (0 past na / nb): a's in the low half of the vector. */
MH_INLINE __m512i bf16x32(const mh_dtype dtype, const void* a, size_t ea, size_t na, __m512 sca, const void* b,
                          size_t eb, size_t nb, __m512 scb) {
    if (dtype == MH_DTYPE_BF16)
        return _mm512_inserti64x4(_mm512_castsi256_si512(mh_load16_u16_n(mh_dtype_at(a, dtype, (ptrdiff_t)ea), na > ea ? na - ea : 0)),
                                  mh_load16_u16_n(mh_dtype_at(b, dtype, (ptrdiff_t)eb), nb > eb ? nb - eb : 0), 1);
    return round32(dtype, widen16(dtype, a, ea, na, sca), widen16(dtype, b, eb, nb, scb));
}

/* Keys [c0, c0 + 16) (those below cols; zero rows past them) into their panel, 16 pairs of
 * dims (32 dims, zero past d) per transpose. */
MH_INLINE void pack_kt16(const mh_dtype dtype, size_t c0, size_t cols, size_t d, const mh_rows* kr, uint16_t* dst) {
    const size_t pairs = (d + 1) / 2, nk = c0 >= cols ? 0 : cols - c0 < 16 ? cols - c0 : 16;
    uint16_t* panel = dst + ((c0 / NR) * pairs * NR + c0 % NR) * 2;
    for (size_t p0 = 0; p0 < pairs; p0 += 16) {
        __m512 r[16];
        MH_UNROLL(16) for (size_t i = 0; i < 16; i++) {
            if (i >= nk) {
                r[i] = _mm512_setzero_ps();
                continue;
            }
            const void* row = row_at(dtype, kr, c0 + i);
            const __m512 sc = row_scale(dtype, kr, c0 + i);
            if (c0 + 16 + i < cols) /* the same elements of the next 16 keys */
                prefetch(dtype, row_at(dtype, kr, c0 + 16 + i), 2 * p0), prefetch(dtype, row_at(dtype, kr, c0 + 16 + i), 2 * p0 + 16);
            r[i] = _mm512_castsi512_ps(bf16x32(dtype, row, 2 * p0, d, sc, row, 2 * p0 + 16, d, sc));
        }
        if (nk) mh_transpose16(r);
        const size_t np = pairs - p0 < 16 ? pairs - p0 : 16;
        MH_UNROLL(16) for (size_t j = 0; j < np; j++) _mm512_storeu_ps(panel + (p0 + j) * NR * 2, r[j]);
    }
}

MH_INLINE void pack_kt_bf16(const mh_dtype dtype, size_t cols, size_t d, const mh_rows* kr, uint16_t* dst) {
    const size_t padded = (cols + NR - 1) / NR * NR;
    for (size_t c0 = 0; c0 < padded; c0 += 16) pack_kt16(dtype, c0, cols, d, kr, dst);
}

/* Keys c and c + 1 (zero when c + 1 is cols, the pad of an odd cols): each panel's columns
 * (zero past dv), 16 at a time, as [row c's 16 | row c + 1's 16] permuted to 16 pairs. */
MH_INLINE void pack_v_bf16(const mh_dtype dtype, size_t cols, size_t dv, const mh_rows* v, uint16_t* dst) {
    const size_t pairs = (cols + 1) / 2, n_panels = (dv + NR - 1) / NR;
    const __m512i zip = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6,
                                         21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    for (size_t c = 0; c < cols; c += 2) {
        const int two = c + 1 < cols;
        const void *r0 = row_at(dtype, v, c), *r1 = two ? row_at(dtype, v, c + 1) : r0;
        const __m512 s0 = row_scale(dtype, v, c), s1 = two ? row_scale(dtype, v, c + 1) : s0;
        for (size_t p = 0; p < n_panels; p++) {
            uint16_t* out = dst + (p * pairs + c / 2) * NR * 2;
            for (size_t j = 0; j < NR; j += 16) {
                const size_t e = p * NR + j;
                if (c + PF + 1 < cols) /* the same columns PF keys on */
                    prefetch(dtype, row_at(dtype, v, c + PF), e), prefetch(dtype, row_at(dtype, v, c + PF + 1), e);
                const __m512i x = bf16x32(dtype, r0, e, dv, s0, r1, e, two ? dv : 0, s1);
                _mm512_storeu_si512(out + 2 * j, _mm512_permutexvar_epi16(zip, x));
            }
        }
    }
}

/* Rows [0, cols) of x in bf16, row c at dst + c * width (bf16 storage copied as it is): 32
 * elements per rounding, loaded and stored without masks but for a row's tail (simd_avx512.h,
 * mh_load16_n; the masked loads' branch in the loop of whole vectors cost MHA bf16 decode on
 * an f16 cache 1.17x the time). */
MH_INLINE void rows_bf16(const mh_dtype dtype, size_t cols, size_t width, const mh_rows* x, uint16_t* dst) {
    for (size_t c = 0; c < cols; c++) {
        const void* r = row_at(dtype, x, c);
        if (dtype == MH_DTYPE_BF16) {
            memcpy(dst + c * width, r, width * sizeof(uint16_t));
            continue;
        }
        const __m512 sc = row_scale(dtype, x, c);
        size_t e = 0;
        for (; e + 32 <= width; e += 32) {
            __m512 lo = mh_vload_dt(mh_dtype_at(r, dtype, (ptrdiff_t)e), dtype);
            __m512 hi = mh_vload_dt(mh_dtype_at(r, dtype, (ptrdiff_t)e + 16), dtype);
            if (dtype == MH_DTYPE_I8) lo = _mm512_mul_ps(lo, sc), hi = _mm512_mul_ps(hi, sc);
            _mm512_storeu_si512(dst + c * width + e, round32(dtype, lo, hi));
        }
        if (e < width)
            _mm512_mask_storeu_epi16(dst + c * width + e, mh_mask32(width, e),
                                     bf16x32(dtype, r, e, width, sc, r, e + 16, width, sc));
    }
}

void MH_KNAME(pack_kt_bf16)(size_t cols, size_t d, const mh_rows* kr, uint16_t* dst) {
    MH_WITH_DTYPE(kr->dtype, pack_kt_bf16, cols, d, kr, dst)
}

void MH_KNAME(pack_v_bf16)(size_t cols, size_t dv, const mh_rows* v, uint16_t* dst) {
    MH_WITH_DTYPE(v->dtype, pack_v_bf16, cols, dv, v, dst)
}

void MH_KNAME(rows_bf16)(size_t cols, size_t width, const mh_rows* x, uint16_t* dst) {
    MH_WITH_DTYPE(x->dtype, rows_bf16, cols, width, x, dst)
}
