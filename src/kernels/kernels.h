/*
 * The kernel table: every ISA-specific routine the core calls, reached only through this
 * struct. Each ISA's table starts as a copy of the scalar one and overrides what it implements.
 * The written contract for each slot is in docs/kernels.md; the short form is beside each slot.
 *
 * Common rules: sizes are element counts; leading dimensions (ld*) are in elements; kernels
 * handle every tail themselves and never read or write outside the described extents; no
 * kernel allocates.
 */
#ifndef MH_KERNELS_H
#define MH_KERNELS_H
#include <stddef.h>
#include <stdint.h>

#include "multihead.h"

typedef struct mh_kernels {
    mh_isa isa;

    /* Attention tiles: the core drives query blocks of up to attn_q_tile rows per head and
     * KV tiles of up to attn_kv_tile keys. */
    size_t attn_q_tile;
    size_t attn_kv_tile;

    /* kt[c][0..cols) for c < d: packs a K tile of `cols` rows x d from a strided source
     * (element stride ldk between rows, dtype as given) into the layout `qk` reads: here
     * d-major, kt[dd * attn_kv_tile + c]. */
    void (*pack_k)(size_t cols, size_t d, const void* k, ptrdiff_t ldk, mh_dtype dtype, float* kt);
    /* vt[c * dv + dd] = V[c][dd] as f32, for c < cols. */
    void (*pack_v)(size_t cols, size_t dv, const void* v, ptrdiff_t ldv, mh_dtype dtype, float* vt);
    /* s[r * lds + c] = sum_dd q[r * ldq + dd] * kt[dd * attn_kv_tile + c], r < rows, c < cols. */
    void (*qk)(size_t rows, size_t cols, size_t d, const float* q, size_t ldq, const float* kt,
               float* s, size_t lds);
    /* Online-softmax step over a tile of scores (-INFINITY = dropped key). Per row r:
     *   m_new = max(m[r], max_c s), alpha[r] = exp(m[r] - m_new) (1 if m_new is -inf),
     *   s[r, c] = exp(s[r, c] - m_new) (0 for dropped keys or when m_new is -inf),
     *   l[r] = l[r] * alpha[r] + sum_c s[r, c], m[r] = m_new. */
    void (*softmax_tile)(size_t rows, size_t cols, float* s, size_t lds, float* m, float* l,
                         float* alpha);
    /* o[r, :] = alpha[r] * o[r, :] + sum_c p[r * ldp + c] * vt[c * dv + :], r < rows. */
    void (*pv)(size_t rows, size_t cols, size_t dv, const float* p, size_t ldp, const float* vt,
               const float* alpha, float* o, size_t ldo);

    /* Projection GEMM on weights packed by mh_pack_weights: panels of gemm_nr output columns,
     * each panel [k][gemm_nr]. Computes, for r < m <= gemm_mr and c < n <= gemm_nr:
     *   c_out[r * ldc + c] = sum_kk a[r * lda + kk] * panel[kk * gemm_nr + c] + (bias ? bias[c] : 0)
     * Only the m x n corner of C is written. */
    size_t gemm_mr;
    size_t gemm_nr;
    void (*gemm_ukernel)(size_t m, size_t n, size_t k, const float* a, size_t lda,
                         const float* panel, const float* bias, float* c, size_t ldc);

    /* Storage conversions (round to nearest even on the way down). */
    void (*f32_to_f16)(size_t n, const float* x, uint16_t* y);
    void (*f32_to_bf16)(size_t n, const float* x, uint16_t* y);
} mh_kernels;

/* The scalar table: the reference every other table starts from. */
void mh_kernels_init_scalar(mh_kernels* k);

#endif
