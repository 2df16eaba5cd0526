/* The body of a GEMM micro-kernel specialised per row count m = 1..6 (the switch every
 * hand-written micro-kernel uses): the including file's `accumulate(M, k, a, lda, panel, acc)`
 * on an accumulator array MH_GEMM_ACC acc[MR][NV] (MH_GEMM_ACC: the file's vector type), then
 * STORE(M, n, EXTRA, c, ldc, acc). Other row counts do nothing. */
#ifndef MH_GEMM_SWITCH_H
#define MH_GEMM_SWITCH_H

#define GEMM_CASE(M, STORE, EXTRA)            \
    case M: {                                 \
        MH_GEMM_ACC acc[MR][NV];              \
        accumulate(M, k, a, lda, panel, acc); \
        STORE(M, n, EXTRA, c, ldc, acc);      \
        break;                                \
    }
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
