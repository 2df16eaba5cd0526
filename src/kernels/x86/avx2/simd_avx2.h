/* AVX2 helpers shared by this ISA's kernels: tail masks, widening loads of any K/V storage
 * dtype, and a combined horizontal reduction. Only included by files compiled with the AVX2
 * flags (-mavx2 -mfma -mf16c -mno-avx512f). */
#ifndef MH_SIMD_AVX2_H
#define MH_SIMD_AVX2_H
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "multihead.h"
#include "util/dtype.h"

#define MH_INLINE static inline __attribute__((always_inline))

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

/* 8 full elements of a `dtype` array at `p`. */
MH_INLINE __m256 mh_load8(const void* p, mh_dtype dtype) {
    if (dtype == MH_DTYPE_F32) return _mm256_loadu_ps((const float*)p);
    return mh_widen8(_mm_loadu_si128((const __m128i*)p), dtype);
}

/* The first `cnt` (0..8) elements of a `dtype` array at `p`, zero in the other lanes; reads
 * nothing past element cnt - 1. f32 uses a masked load; AVX2 has no 16-bit masked load, so
 * f16/bf16 tails go through a small stack copy. */
MH_INLINE __m256 mh_load8_tail(const void* p, mh_dtype dtype, size_t cnt) {
    if (cnt >= 8) return mh_load8(p, dtype);
    if (dtype == MH_DTYPE_F32) return _mm256_maskload_ps((const float*)p, mh_mask8(cnt));
    /* constant-size pieces (4, 2, 1 elements) so the copy is inlined, not a memcpy call */
    const uint16_t* src = (const uint16_t*)p;
    uint16_t buf[8] = {0};
    size_t i = 0;
    if (cnt & 4) memcpy(buf, src, 8), i = 4;
    if (cnt & 2) memcpy(buf + i, src + i, 4), i += 2;
    if (cnt & 1) buf[i] = src[i];
    return mh_widen8(_mm_loadu_si128((const __m128i*)(const void*)buf), dtype);
}

/* Prefetches the cache lines of `bytes` bytes at `p` into L1 (K/V rows of a tile: the rows
 * are often far apart, or read across rather than along, which the hardware prefetchers
 * follow poorly). Only addresses inside the tile are passed. */
MH_INLINE void mh_prefetch_bytes(const void* p, size_t bytes) {
    for (size_t off = 0; off < bytes; off += 64) _mm_prefetch((const char*)p + off, _MM_HINT_T0);
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

MH_INLINE float mh_hmax8(__m256 v) {
    __m128 x = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_max_ps(x, _mm_movehl_ps(x, x));
    x = _mm_max_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}

MH_INLINE float mh_hsum8(__m256 v) {
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}

#endif
