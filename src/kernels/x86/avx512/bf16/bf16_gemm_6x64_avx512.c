/*
 * bf16 GEMM micro-kernels (AVX512-BF16, VDPBF16PS), 6 rows x 64 columns, f32 accumulation.
 * The panel holds k-pairs ([ceil(k/2)][64][2] bf16: pack_kt_bf16 / pack_v_bf16), so one zmm
 * is 16 columns x one pair; A's pair (two bf16 of a row) is broadcast as one 32-bit element.
 * VDPBF16PS adds a0*b0 + a1*b1 to each f32 lane: per pair step 4 panel loads, 6 broadcasts,
 * 24 dot products (twice the f32 kernel's k per instruction). Registers as the f32 kernel:
 * 24 accumulators + 4 panel + 1 broadcast. An odd k's last pair has its second element
 * masked off in both operands (a V key past the row's keys may hold NaN; 0 * NaN = NaN).
 */
#include <string.h>

#include "kernels/kernel_protos.h"
#include "kernels/x86/avx512/gemm_store_avx512.h"

/* A's pair kp of a row, as one 32-bit element (low half: element 2 kp). */
MH_INLINE int pair_at(const uint16_t* row, size_t kp) {
    uint32_t u;
    memcpy(&u, row + 2 * kp, sizeof u);
    return (int)u;
}

/* One pair step; `tail` (a constant) keeps only the first element of the pair. */
MH_INLINE void step(const int M, const int W, const int tail, size_t kp, const uint16_t* a, size_t lda,
                    const uint16_t* panel, __m512 acc[MR][NV]) {
    const __m512i keep = _mm512_set1_epi32(tail ? 0xffff : -1);
    const uint16_t* b = panel + kp * NR * 2;
    __m512i bv[NV];
    MH_UNROLL(NV) for (int v = 0; v < W; v++) bv[v] = _mm512_loadu_si512(b + v * 32);
    if (tail)
        MH_UNROLL(NV) for (int v = 0; v < W; v++) bv[v] = _mm512_and_si512(bv[v], keep);
    MH_UNROLL(MR) for (int r = 0; r < M; r++) {
        __m512i ar = _mm512_set1_epi32(pair_at(a + (size_t)r * lda, kp));
        if (tail) ar = _mm512_and_si512(ar, keep);
        MH_UNROLL(NV) for (int v = 0; v < W; v++) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], (__m512bh)ar, (__m512bh)bv[v]);
    }
}

MH_INLINE void accumulate(const int M, const int W, size_t k, const uint16_t* a, size_t lda, const uint16_t* panel,
                          mh_fetch* fetch, __m512 acc[MR][NV]) {
    MH_UNROLL(MR) for (int r = 0; r < M; r++)
        MH_UNROLL(NV) for (int v = 0; v < W; v++) acc[r][v] = _mm512_setzero_ps();
    mh_fetch f = mh_fetch_begin(fetch);
    for (size_t kp = 0; kp < k / 2; kp++) {
        mh_fetch_line(&f);
        step(M, W, 0, kp, a, lda, panel, acc);
    }
    if (k & 1) {
        mh_fetch_line(&f);
        step(M, W, 1, k / 2, a, lda, panel, acc);
    }
    mh_fetch_end(fetch, &f);
}

void MH_KNAME(gemm_bf16)(size_t m, size_t n, size_t k, const uint16_t* a, size_t lda, const uint16_t* panel,
                         float* c, size_t ldc, mh_fetch* fetch) {
    const float* bias = NULL;
    GEMM_SWITCH(m, store_bias, bias)
}

void MH_KNAME(gemm_acc_bf16)(size_t m, size_t n, size_t k, const uint16_t* a, size_t lda, const uint16_t* panel,
                             const float* alpha, float* c, size_t ldc, mh_fetch* fetch) {
    GEMM_SWITCH(m, store_acc, alpha)
}
