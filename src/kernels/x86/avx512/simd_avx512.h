/* The AVX-512 SIMD vocabulary (the names every simd_<isa>.h defines, docs/kernels.md "SIMD
 * vocabulary") and this ISA's own helpers: lane masks and masked widening loads. Only
 * included by files compiled with the AVX-512 flags. */
#ifndef MH_SIMD_AVX512_H
#define MH_SIMD_AVX512_H
#include <immintrin.h>
#include <math.h>
#include <sleef.h>
#include <stdint.h>

#include "multihead.h"
#include "util/dtype.h"

#define MH_INLINE static inline __attribute__((always_inline))

/* GEMM micro-tile (f32_gemm_6x64_avx512.c). */
#define MH_GEMM_MR 6
#define MH_GEMM_NR 64

typedef __m512 mh_vf;
#define MH_VL ((size_t)16)
/* Full vectors of dropped keys are not skipped by softmax_tile (see simd_neon.h). */
#define MH_SOFTMAX_SKIP_DROPPED 0
/* head_mix: the last, partial vector is masked (simd_neon.h). */
#define MH_HEAD_MIX_SCALAR_TAIL 0

/* Lanes of the 16-lane vector starting at element `start` that lie below `n`. */
MH_INLINE __mmask16 mh_mask16(size_t n, size_t start) {
    if (n <= start) return 0;
    const size_t cnt = n - start;
    return cnt >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << cnt) - 1u);
}

/* 16 f16 / bf16 storage elements (a ymm) widened exactly to f32. */
MH_INLINE __m512 mh_widen16_half(__m256i h, mh_dtype dtype) {
    return dtype == MH_DTYPE_F16 ? _mm512_cvtph_ps(h) : _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* 16 elements of a `dtype` array at `p` (lanes outside `mask` read nothing and give 0). */
MH_INLINE __m512 mh_load16(const void* p, mh_dtype dtype, __mmask16 mask) {
    switch (dtype) {
    case MH_DTYPE_F16:
    case MH_DTYPE_BF16: return mh_widen16_half(_mm256_maskz_loadu_epi16(mask, p), dtype);
    case MH_DTYPE_I8: return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(mask, p)));
    default: return _mm512_maskz_loadu_ps(mask, p);
    }
}

MH_INLINE __m512 mh_vzero(void) { return _mm512_setzero_ps(); }
MH_INLINE __m512 mh_vset1(float x) { return _mm512_set1_ps(x); }
MH_INLINE __m512 mh_vload(const float* p) { return _mm512_loadu_ps(p); }
MH_INLINE void mh_vstore(float* p, __m512 v) { _mm512_storeu_ps(p, v); }
/* The first n (< 16) floats at p, `fill` in the other lanes; reads only n. */
MH_INLINE __m512 mh_vload_n(const float* p, size_t n, float fill) {
    return _mm512_mask_loadu_ps(_mm512_set1_ps(fill), mh_mask16(n, 0), p);
}
/* Stores the first n (< 16) lanes; writes only n. */
MH_INLINE void mh_vstore_n(float* p, __m512 v, size_t n) { _mm512_mask_storeu_ps(p, mh_mask16(n, 0), v); }
/* A full vector / the first n (< 16) elements (0 in the other lanes) of a `dtype` array. */
MH_INLINE __m512 mh_vload_dt(const void* p, mh_dtype dtype) { /* unmasked: one widening load */
    switch (dtype) {
    case MH_DTYPE_F16:
    case MH_DTYPE_BF16: return mh_widen16_half(_mm256_loadu_si256((const __m256i*)p), dtype);
    case MH_DTYPE_I8: return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i*)p)));
    default: return _mm512_loadu_ps(p);
    }
}
MH_INLINE __m512 mh_vload_dt_n(const void* p, mh_dtype dtype, size_t n) { return mh_load16(p, dtype, mh_mask16(n, 0)); }
/* The 16 elements at p of which those below n count (0 past n; any n): a plain load when all
 * 16 do, raw 16-bit (u16) or widened (dtype). Masked loads of 8- and 16-bit elements stream
 * from memory at a third of the rate of plain ones on Zen 5 (1 thread: 10 against 31-33
 * GB/s; masked 32-bit loads 29-30) and run at 0.6-0.8x from L2, so the packs, which load
 * whole rows, take the mask for a row's tail only. */
MH_INLINE __m256i mh_load16_u16_n(const void* p, size_t n) {
    return n >= 16 ? _mm256_loadu_si256((const __m256i*)p) : _mm256_maskz_loadu_epi16(mh_mask16(n, 0), p);
}
MH_INLINE __m512 mh_load16_n(const void* p, mh_dtype dtype, size_t n) {
    return n >= 16 ? mh_vload_dt(p, dtype) : mh_load16(p, dtype, mh_mask16(n, 0));
}
MH_INLINE __m512 mh_vadd(__m512 a, __m512 b) { return _mm512_add_ps(a, b); }
MH_INLINE __m512 mh_vsub(__m512 a, __m512 b) { return _mm512_sub_ps(a, b); }
MH_INLINE __m512 mh_vmul(__m512 a, __m512 b) { return _mm512_mul_ps(a, b); }
MH_INLINE __m512 mh_vfma(__m512 a, __m512 b, __m512 c) { return _mm512_fmadd_ps(a, b, c); }
MH_INLINE __m512 mh_vmax(__m512 a, __m512 b) { return _mm512_max_ps(a, b); }
MH_INLINE float mh_vhsum(__m512 v) { return _mm512_reduce_add_ps(v); }
MH_INLINE float mh_vhmax(__m512 v) { return _mm512_reduce_max_ps(v); }
/* mh_vexp's words (generic/vexp.h): x raised to lo with NaN kept (max returns its second
 * operand when one is NaN), rounded to the nearest integer, and p * 2^n (n integral, or -inf:
 * VSCALEFPS then gives +0 for a finite p). */
MH_INLINE __m512 mh_vclamp_lo(__m512 x, float lo) { return _mm512_max_ps(_mm512_set1_ps(lo), x); }
MH_INLINE __m512 mh_vround(__m512 x) { return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
MH_INLINE __m512 mh_vscale2n(__m512 p, __m512 n) { return _mm512_scalef_ps(p, n); }
MH_INLINE int mh_vall_neg_inf(__m512 x) {
    return _mm512_cmp_ps_mask(x, _mm512_set1_ps(-INFINITY), _CMP_EQ_OQ) == 0xffff;
}

/* f32 -> f16 / bf16 (round to nearest even) of the first n (<= 16) elements. */
MH_INLINE void mh_vcvt_f16_n(const float* x, uint16_t* y, size_t n) {
    const __mmask16 m = mh_mask16(n, 0);
    _mm256_mask_storeu_epi16(y, m, _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, x), _MM_FROUND_TO_NEAREST_INT));
}
/* bf16 of every lane, in the low half of its 32-bit lane (the high half zero): round to
 * nearest even by integer arithmetic (subnormals too); a NaN keeps its top bits and gets the
 * quiet bit instead of being rounded. */
MH_INLINE __m512i mh_bf16_rne(__m512 v) {
    const __m512i u = _mm512_castps_si512(v);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    const __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb)), 16);
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    return _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40)));
}
MH_INLINE void mh_vcvt_bf16_n(const float* x, uint16_t* y, size_t n) {
    const __mmask16 m = mh_mask16(n, 0);
    _mm256_mask_storeu_epi16(y, m, _mm512_cvtepi32_epi16(mh_bf16_rne(_mm512_maskz_loadu_ps(m, x))));
}
MH_INLINE void mh_vcvt_f16(const float* x, uint16_t* y) { mh_vcvt_f16_n(x, y, 16); }
MH_INLINE void mh_vcvt_bf16(const float* x, uint16_t* y) { mh_vcvt_bf16_n(x, y, 16); }

/* int8 quantisation (generic/convert.c): |v|, a / b, and v clamped to [-127, 127], rounded to
 * nearest even (cvtps under the default MXCSR) and stored as int8, n lanes / a full vector. */
MH_INLINE __m512 mh_vabs(__m512 v) { return _mm512_abs_ps(v); }
MH_INLINE __m512 mh_vdiv(__m512 a, __m512 b) { return _mm512_div_ps(a, b); }
MH_INLINE void mh_vstore_i8_n(int8_t* y, __m512 v, size_t n) {
    const __m512 c = _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps(-127.0f)), _mm512_set1_ps(127.0f));
    _mm512_mask_cvtepi32_storeu_epi8(y, mh_mask16(n, 0), _mm512_cvtps_epi32(c));
}
MH_INLINE void mh_vstore_i8(int8_t* y, __m512 v) { mh_vstore_i8_n(y, v, 16); }

/* rope (generic/rope.c): sin and cos of every lane (SLEEF's 1-ulp sincosf); the even and odd
 * elements of the 2*MH_VL elements a, b (a first), and back. */
MH_INLINE void mh_vsincos(__m512 a, __m512* s, __m512* c) {
    const Sleef___m512_2 r = Sleef_sincosf16_u10avx512f(a);
    *s = r.x, *c = r.y;
}
/* Two-source permutes: index i < 16 reads lane i of the first source, 16 + i lane i of the second. */
MH_INLINE void mh_vdeinterleave(__m512 a, __m512 b, __m512* ev, __m512* od) {
    const __m512i ie = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    *ev = _mm512_permutex2var_ps(a, ie, b);
    *od = _mm512_permutex2var_ps(a, _mm512_add_epi32(ie, _mm512_set1_epi32(1)), b);
}
MH_INLINE void mh_vinterleave(__m512 ev, __m512 od, __m512* a, __m512* b) {
    const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    *a = _mm512_permutex2var_ps(ev, lo, od);
    *b = _mm512_permutex2var_ps(ev, _mm512_add_epi32(lo, _mm512_set1_epi32(8)), od);
}

#include "kernels/generic/vexp.h"

#endif
