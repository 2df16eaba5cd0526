/*
 * bf16 GEMM micro-kernels on f32 FMAs, 6 rows x 64 columns: the same slots, panels and results
 * as bf16_gemm_6x64_avx512.c's VDPBF16PS kernels, for CPUs that issue VDPBF16PS at half their
 * FMA rate (Intel's Xeons: one zmm VDPBF16PS every 2 cycles, two zmm FMAs per cycle; measured
 * 90 against 189 GFLOP/s, docs/kernels.md "bf16 on FMAs"). The table picks one of the two at
 * init (mh_cpu_bf16_gemm).
 * A bf16 value is the high half of its f32, so a panel pair widens with one op per vector:
 * the pair's second element is the 32-bit lane with its low half cleared (AND), its first the
 * lane shifted left by 16. A's rows are widened GEMM_FMA_KCH columns at a time into a stack
 * block the FMAs broadcast from. Per pair step: 4 panel loads (each used twice), 8 widening
 * ops, 12 broadcasts, 48 FMAs; registers: 24 accumulators, 4 widened panel vectors.
 * Each pair adds its second product first, then its first: the order VDPBF16PS defines
 * (Intel SDM), so on Intel the two kernels agree bitwise but for subnormals, which VDPBF16PS
 * flushes and these keep. An odd k's last pair adds only its first product.
 */
#include "kernels/x86/avx512/bf16/bf16_gemm_fma_avx512.h"
#include "kernels/x86/avx512/gemm_store_avx512.h"
#include "util/checked.h"

#define GEMM_FMA_KCH 64 /* A columns widened at a time: 6 x 64 f32, 1.5 KiB of stack */

/* Rows [0, M) of a, columns [k0, k0 + kc), widened into aw [MR][GEMM_FMA_KCH]. */
MH_INLINE void widen_rows(const int M, const uint16_t* a, size_t lda, size_t k0, size_t kc,
                          float aw[MR][GEMM_FMA_KCH]) {
    for (int r = 0; r < M; r++)
        for (size_t i = 0; i < kc; i += 16) {
            const __mmask16 mask = mh_mask16(kc, i);
            const __m256i h = _mm256_maskz_loadu_epi16(mask, a + (size_t)r * lda + k0 + i);
            _mm512_store_ps(&aw[r][i], mh_widen16_half(h, MH_DTYPE_BF16));
        }
}

/* acc += a(r, kk) * panel(kk, :) for the pair's element `half` (0: kk even, 1: odd), whose
 * widened A values are column col of aw. */
MH_INLINE void half_step(const int M, const int W, const int half, const uint16_t* b, size_t col,
                         float aw[MR][GEMM_FMA_KCH], __m512 acc[MR][NV]) {
    const __m512i high = _mm512_set1_epi32((int)0xffff0000u);
    __m512 bv[NV];
    MH_UNROLL(NV) for (int v = 0; v < W; v++) {
        const __m512i pair = _mm512_loadu_si512(b + v * 32);
        bv[v] = _mm512_castsi512_ps(half ? _mm512_and_si512(pair, high) : _mm512_slli_epi32(pair, 16));
    }
    MH_UNROLL(MR) for (int r = 0; r < M; r++) {
        const __m512 ar = _mm512_set1_ps(aw[r][col]);
        MH_UNROLL(NV) for (int v = 0; v < W; v++) acc[r][v] = _mm512_fmadd_ps(ar, bv[v], acc[r][v]);
    }
}

MH_INLINE void accumulate(const int M, const int W, size_t k, const uint16_t* a, size_t lda, const uint16_t* panel,
                          mh_fetch* fetch, __m512 acc[MR][NV]) {
    float aw[MR][GEMM_FMA_KCH] __attribute__((aligned(64)));
    MH_UNROLL(MR) for (int r = 0; r < M; r++)
        MH_UNROLL(NV) for (int v = 0; v < W; v++) acc[r][v] = _mm512_setzero_ps();
    mh_fetch f = mh_fetch_begin(fetch);
    for (size_t k0 = 0; k0 < k; k0 += GEMM_FMA_KCH) {
        const size_t kc = mh_min_size(GEMM_FMA_KCH, k - k0);
        widen_rows(M, a, lda, k0, kc, aw);
        const uint16_t* b = panel + k0 * NR; /* k0 is even: pair k0 / 2, NR x 2 elements each */
        for (size_t kp = 0; kp < kc / 2; kp++, b += 2 * NR) {
            mh_fetch_line(&f);
            half_step(M, W, 1, b, 2 * kp + 1, aw, acc);
            half_step(M, W, 0, b, 2 * kp, aw, acc);
        }
        if (kc & 1) {
            mh_fetch_line(&f);
            half_step(M, W, 0, b, kc - 1, aw, acc);
        }
    }
    mh_fetch_end(fetch, &f);
}

void MH_KNAME(gemm_bf16_fma)(size_t m, size_t n, size_t k, const uint16_t* a, size_t lda, const uint16_t* panel,
                             float* c, size_t ldc, mh_fetch* fetch) {
    const float* bias = NULL;
    GEMM_SWITCH(m, store_bias, bias)
}

void MH_KNAME(gemm_acc_bf16_fma)(size_t m, size_t n, size_t k, const uint16_t* a, size_t lda,
                                 const uint16_t* panel, const float* alpha, float* c, size_t ldc, mh_fetch* fetch) {
    GEMM_SWITCH(m, store_acc, alpha)
}
