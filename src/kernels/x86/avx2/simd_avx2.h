/* The AVX2 SIMD vocabulary (the names every simd_<isa>.h defines, docs/kernels.md "SIMD
 * vocabulary") and this ISA's own helpers: tail masks and a combined horizontal reduction.
 * Only included by files compiled with the AVX2 flags (-mavx2 -mfma -mf16c -mno-avx512f). */
#ifndef MH_SIMD_AVX2_H
#define MH_SIMD_AVX2_H
#include <immintrin.h>
#include <math.h>
#include <sleef.h>
#include <stdint.h>
#include <string.h>

#include "kernels/scalar/convert_scalar.h"
#include "multihead.h"
#include "util/dtype.h"

#define MH_INLINE static inline __attribute__((always_inline))

/* GEMM micro-tile (f32_gemm_6x16_avx2.c). */
#define MH_GEMM_MR 6
#define MH_GEMM_NR 16

typedef __m256 mh_vf;
#define MH_VL ((size_t)8)
/* Full vectors of dropped keys are not skipped by softmax_tile (see simd_neon.h). */
#define MH_SOFTMAX_SKIP_DROPPED 0
/* head_mix: the last, partial vector is masked (simd_neon.h). */
#define MH_HEAD_MIX_SCALAR_TAIL 0

/* Lanes of the 8-lane vector starting at element `start` that lie below `n`, 0..8. */
MH_INLINE size_t mh_lanes8(size_t n, size_t start) {
    if (n <= start) return 0;
    return n - start >= 8 ? 8 : n - start;
}

/* A maskload/maskstore mask with the first `cnt` (0..8) lanes set. */
MH_INLINE __m256i mh_mask8(size_t cnt) {
    static const int32_t tbl[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    return _mm256_loadu_si256((const __m256i*)(const void*)(tbl + 8 - cnt));
}

/* Eight 16-bit storage elements widened to f32 (f16 through F16C, bf16 by a shift). */
MH_INLINE __m256 mh_widen8(__m128i h, mh_dtype dtype) {
    if (dtype == MH_DTYPE_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* Eight int8 elements (the low 8 bytes of b) sign-extended to f32, exactly. */
MH_INLINE __m256 mh_widen8_i8(__m128i b) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b)); }

/* 8 full elements of a `dtype` array at `p`. */
MH_INLINE __m256 mh_vload_dt(const void* p, mh_dtype dtype) {
    if (dtype == MH_DTYPE_F32) return _mm256_loadu_ps((const float*)p);
    if (dtype == MH_DTYPE_I8) return mh_widen8_i8(_mm_loadl_epi64((const __m128i*)p));
    return mh_widen8(_mm_loadu_si128((const __m128i*)p), dtype);
}

/* The first `cnt` (0..8) elements of a `dtype` array at `p`, zero in the other lanes; reads
 * nothing past element cnt - 1. f32 uses a masked load; AVX2 has no 8- or 16-bit masked
 * load, so int8 and f16/bf16 tails go through a small stack copy. */
MH_INLINE __m256 mh_vload_dt_n(const void* p, mh_dtype dtype, size_t cnt) {
    if (cnt >= 8) return mh_vload_dt(p, dtype);
    if (dtype == MH_DTYPE_F32) return _mm256_maskload_ps((const float*)p, mh_mask8(cnt));
    if (dtype == MH_DTYPE_I8) {
        int8_t b[16] = {0};
        for (size_t i = 0; i < cnt; i++) b[i] = ((const int8_t*)p)[i];
        return mh_widen8_i8(_mm_loadu_si128((const __m128i*)(const void*)b));
    }
    /* constant-size pieces (4, 2, 1 elements) so the copy is inlined, not a memcpy call */
    const uint16_t* src = (const uint16_t*)p;
    uint16_t buf[8] = {0};
    size_t i = 0;
    if (cnt & 4) memcpy(buf, src, 8), i = 4;
    if (cnt & 2) memcpy(buf + i, src + i, 4), i += 2;
    if (cnt & 1) buf[i] = src[i];
    return mh_widen8(_mm_loadu_si128((const __m128i*)(const void*)buf), dtype);
}

/* Horizontal sums of eight vectors: lane i of the result = sum of the lanes of a[i]. The
 * reduction tree is fixed: pairwise within 128-bit halves, then the two halves. */
MH_INLINE __m256 mh_hsum8x8(__m256 a0, __m256 a1, __m256 a2, __m256 a3, __m256 a4, __m256 a5,
                            __m256 a6, __m256 a7) {
    const __m256 t0 = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
    const __m256 t1 = _mm256_hadd_ps(_mm256_hadd_ps(a4, a5), _mm256_hadd_ps(a6, a7));
    /* t0 = [a0..a3 low-half sums | a0..a3 high-half sums], t1 the same for a4..a7 */
    return _mm256_add_ps(_mm256_permute2f128_ps(t0, t1, 0x20), _mm256_permute2f128_ps(t0, t1, 0x31));
}

/* Horizontal sums of four vectors in the four lanes of the result (same tree as above). */
MH_INLINE __m128 mh_hsum4x8(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
    const __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
    return _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
}

MH_INLINE float mh_vhmax(__m256 v) {
    __m128 x = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_max_ps(x, _mm_movehl_ps(x, x));
    x = _mm_max_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}

MH_INLINE float mh_vhsum(__m256 v) {
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}

MH_INLINE __m256 mh_vzero(void) { return _mm256_setzero_ps(); }
MH_INLINE __m256 mh_vset1(float x) { return _mm256_set1_ps(x); }
MH_INLINE __m256 mh_vload(const float* p) { return _mm256_loadu_ps(p); }
MH_INLINE void mh_vstore(float* p, __m256 v) { _mm256_storeu_ps(p, v); }
/* The first n (< 8) floats at p, `fill` in the other lanes; reads only n. */
MH_INLINE __m256 mh_vload_n(const float* p, size_t n, float fill) {
    const __m256i m = mh_mask8(n);
    return _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
}
/* Stores the first n (< 8) lanes; writes only n. */
MH_INLINE void mh_vstore_n(float* p, __m256 v, size_t n) { _mm256_maskstore_ps(p, mh_mask8(n), v); }
MH_INLINE __m256 mh_vadd(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
MH_INLINE __m256 mh_vsub(__m256 a, __m256 b) { return _mm256_sub_ps(a, b); }
MH_INLINE __m256 mh_vmul(__m256 a, __m256 b) { return _mm256_mul_ps(a, b); }
MH_INLINE __m256 mh_vfma(__m256 a, __m256 b, __m256 c) { return _mm256_fmadd_ps(a, b, c); }
MH_INLINE __m256 mh_vmax(__m256 a, __m256 b) { return _mm256_max_ps(a, b); }
/* mh_vexp's words (generic/vexp.h): x raised to lo with NaN kept (max returns its second
 * operand when one is NaN), rounded to the nearest integer, and p * 2^n for integral n
 * in [-150, 128]: two exact power-of-two factors of n/2 each, so one rounding, denormals and
 * overflow included; n below -253 (-inf: a dropped key) makes both factors +0, so p * 2^n
 * is +0 without an underflowing product. */
MH_INLINE __m256 mh_vclamp_lo(__m256 x, float lo) { return _mm256_max_ps(_mm256_set1_ps(lo), x); }
MH_INLINE __m256 mh_vround(__m256 x) { return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
MH_INLINE __m256 mh_vscale2n(__m256 p, __m256 n) {
    const __m256i ni = _mm256_max_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(-254));
    const __m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
    const __m256i bias = _mm256_set1_epi32(127);
    const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}
MH_INLINE int mh_vall_neg_inf(__m256 x) {
    return _mm256_movemask_ps(_mm256_cmp_ps(x, _mm256_set1_ps(-INFINITY), _CMP_EQ_OQ)) == 0xff;
}

/* f32 -> f16 / bf16 (round to nearest even) of one full vector, and of the first n (< 8)
 * elements (the scalar conversions, which round the same way). */
MH_INLINE void mh_vcvt_f16(const float* x, uint16_t* y) {
    _mm_storeu_si128((__m128i*)(void*)y, _mm256_cvtps_ph(_mm256_loadu_ps(x), _MM_FROUND_TO_NEAREST_INT));
}
MH_INLINE void mh_vcvt_f16_n(const float* x, uint16_t* y, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] = mh_f32_to_f16_rne(x[i]);
}
/* bf16: round to nearest even; a NaN keeps its top bits and gets the quiet bit instead of
 * being rounded (which could make it inf). */
MH_INLINE void mh_vcvt_bf16(const float* x, uint16_t* y) {
    const __m256 v = _mm256_loadu_ps(x);
    const __m256i u = _mm256_castps_si256(v);
    const __m256i hi = _mm256_srli_epi32(u, 16);
    const __m256i lsb = _mm256_and_si256(hi, _mm256_set1_epi32(1));
    const __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb)), 16);
    const __m256i qnan = _mm256_or_si256(hi, _mm256_set1_epi32(0x40));
    const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
    const __m256i b = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(r), _mm256_castsi256_ps(qnan), nan));
    _mm_storeu_si128((__m128i*)(void*)y, _mm_packus_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1)));
}
MH_INLINE void mh_vcvt_bf16_n(const float* x, uint16_t* y, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] = mh_f32_to_bf16_rne(x[i]);
}

/* int8 quantisation (generic/convert.c): |v|, a / b, and v clamped to [-127, 127], rounded to
 * nearest even (cvtps under the default MXCSR) and stored as int8, a full vector / n lanes. */
MH_INLINE __m256 mh_vabs(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }
MH_INLINE __m256 mh_vdiv(__m256 a, __m256 b) { return _mm256_div_ps(a, b); }
MH_INLINE void mh_vstore_i8_n(int8_t* y, __m256 v, size_t n) {
    const __m256 c = _mm256_min_ps(_mm256_max_ps(v, _mm256_set1_ps(-127.0f)), _mm256_set1_ps(127.0f));
    int32_t t[8];
    _mm256_storeu_si256((__m256i*)(void*)t, _mm256_cvtps_epi32(c));
    for (size_t i = 0; i < n; i++) y[i] = (int8_t)t[i];
}
MH_INLINE void mh_vstore_i8(int8_t* y, __m256 v) { mh_vstore_i8_n(y, v, 8); }

/* rope (generic/rope.c): sin and cos of every lane (SLEEF's 1-ulp sincosf); the even and odd
 * elements of the 2*MH_VL elements a, b (a first), and back. */
MH_INLINE void mh_vsincos(__m256 a, __m256* s, __m256* c) {
    const Sleef___m256_2 r = Sleef_sincosf8_u10avx2(a);
    *s = r.x, *c = r.y;
}
MH_INLINE void mh_vdeinterleave(__m256 a, __m256 b, __m256* ev, __m256* od) {
    /* per 128-bit half [a0 a2 b0 b2 | a4 a6 b4 b6], then the 64-bit pieces reordered */
    const __m256 e = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));
    const __m256 o = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));
    *ev = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), _MM_SHUFFLE(3, 1, 2, 0)));
    *od = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(o), _MM_SHUFFLE(3, 1, 2, 0)));
}
MH_INLINE void mh_vinterleave(__m256 ev, __m256 od, __m256* a, __m256* b) {
    const __m256 lo = _mm256_unpacklo_ps(ev, od), hi = _mm256_unpackhi_ps(ev, od);
    *a = _mm256_permute2f128_ps(lo, hi, 0x20);
    *b = _mm256_permute2f128_ps(lo, hi, 0x31);
}

#include "kernels/generic/vexp.h"

#endif
