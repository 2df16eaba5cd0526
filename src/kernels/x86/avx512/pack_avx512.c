/* Packing K/V tiles of any storage dtype into f32 panels of 64 columns. */
#include <string.h>

#include "kernels/kernel_protos.h"
#include "kernels/x86/avx512/simd_avx512.h"
#include "kernels/x86/avx512/transpose_avx512.h"

#define NR 64

/* pack_kt16 for 16-bit storage: the block transposed before it is widened (half the bytes to
 * move, ymm shuffles). */
MH_INLINE void pack_kt16_half(const mh_dtype dtype, size_t c0, size_t nk, size_t d, const mh_rows* kr, float* panel) {
    for (size_t d0 = 0; d0 < d; d0 += 16) {
        __m256i r[16];
        MH_UNROLL(16) for (size_t i = 0; i < 16; i++)
            r[i] = i < nk ? mh_load16_u16_n(mh_dtype_at(kr->data, dtype, (ptrdiff_t)(c0 + i) * kr->ld + (ptrdiff_t)d0), d - d0)
                          : _mm256_setzero_si256();
        mh_transpose16x16_epi16(r);
        const size_t nd = d - d0 < 16 ? d - d0 : 16;
        MH_UNROLL(16) for (size_t i = 0; i < nd; i++)
            _mm512_storeu_ps(panel + (d0 + i) * NR, mh_widen16_half(r[i], dtype));
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
        MH_UNROLL(16) for (size_t i = 0; i < 16; i++)
            r[i] = i < nk ? full ? mh_vload_dt(mh_dtype_at(kr->data, dtype, (ptrdiff_t)(c0 + i) * kr->ld + (ptrdiff_t)d0), dtype)
                               : mh_load16(mh_dtype_at(kr->data, dtype, (ptrdiff_t)(c0 + i) * kr->ld + (ptrdiff_t)d0), dtype, dm)
                          : _mm512_setzero_ps();
        mh_transpose16(r);
        const size_t nd = d - d0 < 16 ? d - d0 : 16;
        MH_UNROLL(16) for (size_t i = 0; i < nd; i++)
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
