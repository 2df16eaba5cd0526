/* The body of a GEMM micro-kernel specialised per row count m = 1..6 (the switch every
 * hand-written micro-kernel uses): the including file's
 * `accumulate(M, k, a, lda, panel, fetch, acc)` on an accumulator array MH_GEMM_ACC acc[MR][NV]
 * (MH_GEMM_ACC: the file's vector type), then STORE(M, n, EXTRA, c, ldc, acc). Other row
 * counts do nothing.
 * A file that defines MH_GEMM_BY_WIDTH (AVX-512: its 64-column tile is 4 vectors) is also
 * specialised on the vector count W = ceil(n / (NR / NV)): accumulate and STORE then take W
 * after M, and a narrow call (a causal diagonal's key block, a V of 32 columns) does only the
 * vectors it stores. */
#ifndef MH_GEMM_SWITCH_H
#define MH_GEMM_SWITCH_H

#ifdef MH_GEMM_BY_WIDTH
#if NV != 4
#error "MH_GEMM_BY_WIDTH: GEMM_CASE has bodies for 1 to 4 vectors"
#endif
#define GEMM_BODY(M, W, STORE, EXTRA)                   \
    {                                                   \
        MH_GEMM_ACC acc[MR][NV];                        \
        accumulate(M, W, k, a, lda, panel, fetch, acc); \
        STORE(M, W, n, EXTRA, c, ldc, acc);             \
    }
#define GEMM_CASE(M, STORE, EXTRA)                                    \
    case M:                                                           \
        if (n <= NR / NV) GEMM_BODY(M, 1, STORE, EXTRA)               \
        else if (n <= 2 * NR / NV) GEMM_BODY(M, 2, STORE, EXTRA)      \
        else if (n <= 3 * NR / NV) GEMM_BODY(M, 3, STORE, EXTRA)      \
        else GEMM_BODY(M, 4, STORE, EXTRA)                            \
        break;
#else
#define GEMM_CASE(M, STORE, EXTRA)                   \
    case M: {                                        \
        MH_GEMM_ACC acc[MR][NV];                     \
        accumulate(M, k, a, lda, panel, fetch, acc); \
        STORE(M, n, EXTRA, c, ldc, acc);             \
        break;                                       \
    }
#endif
#define GEMM_SWITCH(m, STORE, EXTRA) \
    switch (m) {                     \
        GEMM_CASE(1, STORE, EXTRA)   \
        GEMM_CASE(2, STORE, EXTRA)   \
        GEMM_CASE(3, STORE, EXTRA)   \
        GEMM_CASE(4, STORE, EXTRA)   \
        GEMM_CASE(5, STORE, EXTRA)   \
        GEMM_CASE(6, STORE, EXTRA)   \
    default: break;                  \
    }

#endif
