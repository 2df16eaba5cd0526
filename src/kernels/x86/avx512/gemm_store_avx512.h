/* The stores of the AVX-512 GEMM micro-kernels (f32 and bf16): the first W vectors of a 6 x 64
 * tile of f32 accumulators acc[MR][NV] written to c, masked past n columns, and the row-count
 * and vector-count switch (gemm_switch.h). */
#ifndef MH_GEMM_STORE_AVX512_H
#define MH_GEMM_STORE_AVX512_H
#include "kernels/kernel_protos.h"
#include "kernels/x86/avx512/simd_avx512.h"

#define MR 6
#define NR 64
#define NV 4
#define MH_GEMM_ACC __m512
#define MH_GEMM_BY_WIDTH
#include "kernels/gemm_switch.h"

/* The tile's loops carry MH_UNROLL (kernel_protos.h), which keeps acc[MR][NV] in registers
 * under GCC. c = acc + bias (bias NULL: + 0). */
MH_INLINE void store_bias(const int M, const int W, size_t n, const float* bias, float* c, size_t ldc,
                          __m512 acc[MR][NV]) {
    MH_UNROLL(NV) for (int v = 0; v < W; v++) {
        const __mmask16 mask = mh_mask16(n, (size_t)v * 16);
        const __m512 b = bias ? _mm512_maskz_loadu_ps(mask, bias + v * 16) : _mm512_setzero_ps();
        MH_UNROLL(MR) for (int r = 0; r < M; r++)
            _mm512_mask_storeu_ps(c + r * ldc + v * 16, mask, _mm512_add_ps(acc[r][v], b));
    }
}

/* c = alpha[r] * c + acc. */
MH_INLINE void store_acc(const int M, const int W, size_t n, const float* alpha, float* c, size_t ldc,
                         __m512 acc[MR][NV]) {
    MH_UNROLL(MR) for (int r = 0; r < M; r++) {
        const __m512 al = _mm512_set1_ps(alpha[r]);
        MH_UNROLL(NV) for (int v = 0; v < W; v++) {
            const __mmask16 mask = mh_mask16(n, (size_t)v * 16);
            float* cp = c + r * ldc + v * 16;
            _mm512_mask_storeu_ps(cp, mask, _mm512_fmadd_ps(al, _mm512_maskz_loadu_ps(mask, cp), acc[r][v]));
        }
    }
}

#endif
