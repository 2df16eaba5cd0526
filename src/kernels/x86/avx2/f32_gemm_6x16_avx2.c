/*
 * GEMM micro-kernels on packed panels, 6 rows x 16 columns.
 * Register budget: 12 ymm accumulators (6 rows x 2 vectors of 8), 2 ymm for the panel row,
 * 1 for the broadcast of A: 15 of 16. Per k step: 2 panel loads, 6 broadcasts (load-port
 * only), 12 FMAs, so the two FMA ports stay the bottleneck.
 * Tails: m < 6 is a specialised body (the switch below); n < 16 uses maskload / maskstore on
 * C and bias, so nothing past column n of C or of bias is read or written. The panel is
 * zero-padded to 16 columns by contract and is always read whole.
 */
#include "kernels/kernel_protos.h"
#include "kernels/x86/avx2/simd_avx2.h"

#define NR 16

/* The whole kernel for M rows (a compile-time constant after inlining). The accumulators are
 * named variables, not an array, so that every compiler keeps them in registers; rows >= M
 * compile away. ACC selects gemm_acc (c = alpha * c + A.B) over gemm (c = A.B + bias). */
MH_INLINE void kernel(const int M, const int ACC, size_t n, size_t k, const float* a, size_t lda,
                      const float* panel, const float* extra, float* c, size_t ldc, mh_fetch* fetch) {
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
    __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    /* row pointers; rows >= M alias row 0 and are never dereferenced */
    const float* a0 = a;
    const float* a1 = M > 1 ? a + lda : a;
    const float* a2 = M > 2 ? a + 2 * lda : a;
    const float* a3 = M > 3 ? a + 3 * lda : a;
    const float* a4 = M > 4 ? a + 4 * lda : a;
    const float* a5 = M > 5 ? a + 5 * lda : a;
#define MH_ROW_FMA(r)                                                      \
    if (M > r) {                                                           \
        const __m256 ar = _mm256_broadcast_ss(a##r + kk);                  \
        c##r##0 = _mm256_fmadd_ps(ar, b0, c##r##0);                        \
        c##r##1 = _mm256_fmadd_ps(ar, b1, c##r##1);                        \
    }
    /* the reduction, a line of the fetch every `every` steps: one copy per rate (fetch.h), and
     * one (`every` 0) for a call with nothing to fetch: every projection GEMM, and a tile's later
     * calls once its fetch is all requested. In that copy the loop keeps no fetch state and tests
     * nothing per step, so GCC 12 keeps the row pointers in registers: with the fetch's state and
     * its per-step test, two row pointers were reloaded from the stack and stored back every step
     * (8 steps: 167 instructions instead of 256-288). Zen 3, alternated, the same bits: an MHA
     * layer at d_model 4096 (512 tokens) 0.93x the time, causal prefill N = 128 H8 D64 0.92x,
     * N = 512 H32 D128 0.89x, MQA decode at 32K keys 0.92x. Each rate's loop a function of its
     * own (noinline) took 1.04-1.08x the time of these three inlined copies.
     * Unrolled 8 steps (MH_UNROLL_STEPS): a step alone is 12 FMAs among some 30 instructions, its
     * six row pointers and the panel's stepped each time; unrolled, they step once per 8 steps
     * (Zen 3, alternated, same bits: causal prefill N = 128 H8 D64 0.92x the time, N = 512 H32
     * D128 0.95x, an MHA layer at d_model 4096, 512 tokens, 0.94x; 4 steps did less, 16 no more) */
#define MH_REDUCE(every)                                                                                   \
    MH_UNROLL_STEPS(8) for (size_t kk = 0; kk < k; kk++) {                                                 \
        mh_fetch_step_every(&f, kk, every);                                                                \
        const __m256 b0 = _mm256_loadu_ps(panel + kk * NR), b1 = _mm256_loadu_ps(panel + kk * NR + 8);     \
        MH_ROW_FMA(0) MH_ROW_FMA(1) MH_ROW_FMA(2) MH_ROW_FMA(3) MH_ROW_FMA(4) MH_ROW_FMA(5)                \
    }
    mh_fetch f = mh_fetch_begin(fetch);
    if (!mh_fetch_any(&f)) MH_REDUCE(0)
    else if (mh_fetch_dense(&f)) MH_REDUCE(1)
    else MH_REDUCE(MH_FETCH_EVERY)
#undef MH_REDUCE
#undef MH_ROW_FMA
    mh_fetch_end(fetch, &f);

    if (n == NR) {
        if (ACC) {
#define MH_ROW_STORE(r)                                                                       \
    if (M > r) {                                                                              \
        const __m256 al = _mm256_broadcast_ss(extra + r);                                     \
        float* cp = c + (size_t)r * ldc;                                                      \
        _mm256_storeu_ps(cp, _mm256_fmadd_ps(al, _mm256_loadu_ps(cp), c##r##0));              \
        _mm256_storeu_ps(cp + 8, _mm256_fmadd_ps(al, _mm256_loadu_ps(cp + 8), c##r##1));      \
    }
            MH_ROW_STORE(0) MH_ROW_STORE(1) MH_ROW_STORE(2) MH_ROW_STORE(3) MH_ROW_STORE(4) MH_ROW_STORE(5)
#undef MH_ROW_STORE
        } else {
            const __m256 bias0 = extra ? _mm256_loadu_ps(extra) : _mm256_setzero_ps();
            const __m256 bias1 = extra ? _mm256_loadu_ps(extra + 8) : _mm256_setzero_ps();
#define MH_ROW_STORE(r)                                                                       \
    if (M > r) {                                                                              \
        _mm256_storeu_ps(c + (size_t)r * ldc, _mm256_add_ps(c##r##0, bias0));                 \
        _mm256_storeu_ps(c + (size_t)r * ldc + 8, _mm256_add_ps(c##r##1, bias1));             \
    }
            MH_ROW_STORE(0) MH_ROW_STORE(1) MH_ROW_STORE(2) MH_ROW_STORE(3) MH_ROW_STORE(4) MH_ROW_STORE(5)
#undef MH_ROW_STORE
        }
        return;
    }
    /* n < 16: masked lanes are neither read nor written (a mask of no lanes touches nothing) */
    const __m256i m0 = mh_mask8(mh_lanes8(n, 0)), m1 = mh_mask8(mh_lanes8(n, 8));
    if (ACC) {
#define MH_ROW_STORE(r)                                                                            \
    if (M > r) {                                                                                   \
        const __m256 al = _mm256_broadcast_ss(extra + r);                                          \
        float* cp = c + (size_t)r * ldc;                                                           \
        _mm256_maskstore_ps(cp, m0, _mm256_fmadd_ps(al, _mm256_maskload_ps(cp, m0), c##r##0));     \
        _mm256_maskstore_ps(cp + 8, m1, _mm256_fmadd_ps(al, _mm256_maskload_ps(cp + 8, m1), c##r##1)); \
    }
        MH_ROW_STORE(0) MH_ROW_STORE(1) MH_ROW_STORE(2) MH_ROW_STORE(3) MH_ROW_STORE(4) MH_ROW_STORE(5)
#undef MH_ROW_STORE
    } else {
        const __m256 bias0 = extra ? _mm256_maskload_ps(extra, m0) : _mm256_setzero_ps();
        const __m256 bias1 = extra ? _mm256_maskload_ps(extra + 8, m1) : _mm256_setzero_ps();
#define MH_ROW_STORE(r)                                                                       \
    if (M > r) {                                                                              \
        _mm256_maskstore_ps(c + (size_t)r * ldc, m0, _mm256_add_ps(c##r##0, bias0));          \
        _mm256_maskstore_ps(c + (size_t)r * ldc + 8, m1, _mm256_add_ps(c##r##1, bias1));      \
    }
        MH_ROW_STORE(0) MH_ROW_STORE(1) MH_ROW_STORE(2) MH_ROW_STORE(3) MH_ROW_STORE(4) MH_ROW_STORE(5)
#undef MH_ROW_STORE
    }
}

/* kernel() specialised per row count m = 1..6 (other counts do nothing). */
#define ROWS_SWITCH(ACC, EXTRA)                                                  \
    switch (m) {                                                                 \
    case 1: kernel(1, ACC, n, k, a, lda, panel, EXTRA, c, ldc, fetch); break;   \
    case 2: kernel(2, ACC, n, k, a, lda, panel, EXTRA, c, ldc, fetch); break;   \
    case 3: kernel(3, ACC, n, k, a, lda, panel, EXTRA, c, ldc, fetch); break;   \
    case 4: kernel(4, ACC, n, k, a, lda, panel, EXTRA, c, ldc, fetch); break;   \
    case 5: kernel(5, ACC, n, k, a, lda, panel, EXTRA, c, ldc, fetch); break;   \
    case 6: kernel(6, ACC, n, k, a, lda, panel, EXTRA, c, ldc, fetch); break;   \
    default: break;                                                              \
    }

void MH_KNAME(gemm)(size_t m, size_t n, size_t k, const float* a, size_t lda, const float* panel, const float* bias,
                    float* c, size_t ldc, mh_fetch* fetch) {
    ROWS_SWITCH(0, bias)
}

void MH_KNAME(gemm_acc)(size_t m, size_t n, size_t k, const float* a, size_t lda, const float* panel,
                        const float* alpha, float* c, size_t ldc, mh_fetch* fetch) {
    ROWS_SWITCH(1, alpha)
}
