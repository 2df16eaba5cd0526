/* AVX-512 helpers shared by this ISA's kernels: masked tails and widening loads of any K/V
 * storage dtype. Only included by files compiled with the AVX-512 flags. */
#ifndef MH_SIMD_AVX512_H
#define MH_SIMD_AVX512_H
#include <immintrin.h>

#include "multihead.h"
#include "util/dtype.h"

#define MH_INLINE static inline __attribute__((always_inline))

/* Lanes of the 16-lane vector starting at element `start` that lie below `n`. */
MH_INLINE __mmask16 mh_mask16(size_t n, size_t start) {
    if (n <= start) return 0;
    const size_t cnt = n - start;
    return cnt >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << cnt) - 1u);
}

/* 16 elements of a `dtype` array at `p` (lanes outside `mask` read nothing and give 0). */
MH_INLINE __m512 mh_load16(const void* p, mh_dtype dtype, __mmask16 mask) {
    switch (dtype) {
    case MH_DTYPE_F16: return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, p));
    case MH_DTYPE_BF16:
        return _mm512_castsi512_ps(
            _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mask, p)), 16));
    default: return _mm512_maskz_loadu_ps(mask, p);
    }
}

/* Keys ahead to prefetch in the direct (decode) kernels: far enough to cover DRAM latency at
 * the streaming rate, near enough to stay in the tile's neighbourhood. */
#define MH_PREFETCH_ROWS 12

/* Prefetches every cache line of one `bytes`-long row. */
MH_INLINE void mh_prefetch_row(const void* row, size_t bytes) {
    for (size_t off = 0; off < bytes; off += 64) _mm_prefetch((const char*)row + off, _MM_HINT_T0);
}

#endif
