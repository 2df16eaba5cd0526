/*
 * GEMM micro-kernels on packed panels, 6 rows x 64 columns.
 * Register budget: 24 zmm accumulators (6 rows x 4 vectors of 16), 4 zmm for the panel row,
 * 1 for the broadcast of A: 29 of 32. Per k step: 4 panel loads, 6 broadcasts, 24 FMAs.
 * Tails: m < 6 is a specialised body (the switch below), and so is each count of vectors the
 * n columns need (1-4: a causal diagonal's last panel does only those); the last is masked.
 */
#include "kernels/kernel_protos.h"
#include "kernels/x86/avx512/gemm_store_avx512.h"

/* The reduction with a line of the fetch requested every `every` steps (a constant), or none
 * (`every` 0) for a call with nothing to fetch, as in AVX2's kernel: that copy keeps no fetch
 * state in registers and no stack access, 143 instructions per 4 steps of six rows against
 * 191-207 (Zen 5, the same bits: MHA layers at d_model 1024 and 4096, 512 tokens, 0.98x the
 * time; prefill and MQA decode 1.00x). Unrolled 4 steps (MH_UNROLL_STEPS), as AVX2's is 8: the
 * row pointers and the panel's step once per 4 steps of 24 FMAs. Intel Xeon (AMX class), 1
 * thread, alternated, the same bits: causal prefill N = M = 512 H32 D128 0.98x the time, 2048
 * 0.98x, an MHA layer at d_model 4096 (512 tokens) 0.93x, N = 128 H8 D64 1.00x; 8 steps did no
 * better (0.98x, 1.00x, 0.94x, 1.01x) with twice the code. */
MH_INLINE void reduce(const int M, const int W, const size_t every, size_t k, const float* a, size_t lda,
                      const float* panel, mh_fetch* f, __m512 acc[MR][NV]) {
    MH_UNROLL_STEPS(4) for (size_t kk = 0; kk < k; kk++) {
        mh_fetch_step_every(f, kk, every);
        const float* b = panel + kk * NR;
        __m512 bv[NV];
        MH_UNROLL(NV) for (int v = 0; v < W; v++) bv[v] = _mm512_loadu_ps(b + v * 16);
        MH_UNROLL(MR) for (int r = 0; r < M; r++) {
            const __m512 ar = _mm512_set1_ps(a[r * lda + kk]);
            MH_UNROLL(NV) for (int v = 0; v < W; v++) acc[r][v] = _mm512_fmadd_ps(ar, bv[v], acc[r][v]);
        }
    }
}

MH_INLINE void accumulate(const int M, const int W, size_t k, const float* a, size_t lda, const float* panel,
                          mh_fetch* fetch, __m512 acc[MR][NV]) {
    MH_UNROLL(MR) for (int r = 0; r < M; r++)
        MH_UNROLL(NV) for (int v = 0; v < W; v++) acc[r][v] = _mm512_setzero_ps();
    mh_fetch f = mh_fetch_begin(fetch);
    if (!mh_fetch_any(&f)) reduce(M, W, 0, k, a, lda, panel, &f, acc);
    else if (mh_fetch_dense(&f)) reduce(M, W, 1, k, a, lda, panel, &f, acc);
    else reduce(M, W, MH_FETCH_EVERY, k, a, lda, panel, &f, acc);
    mh_fetch_end(fetch, &f);
}

void MH_KNAME(gemm)(size_t m, size_t n, size_t k, const float* a, size_t lda, const float* panel, const float* bias,
                    float* c, size_t ldc, mh_fetch* fetch) {
    GEMM_SWITCH(m, store_bias, bias)
}

void MH_KNAME(gemm_acc)(size_t m, size_t n, size_t k, const float* a, size_t lda, const float* panel,
                        const float* alpha, float* c, size_t ldc, mh_fetch* fetch) {
    GEMM_SWITCH(m, store_acc, alpha)
}
