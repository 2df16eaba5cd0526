/* Projection GEMM on weights packed once at create time into the kernel's panel layout. */
#ifndef MH_CORE_GEMM_H
#define MH_CORE_GEMM_H
#include "kernels/kernels.h"

typedef struct mh_packed_matrix {
    float* panels; /* [ceil(n_out / nr)][k_in][nr], zero-padded past n_out */
    float* bias;   /* [n_out] or NULL */
    int n_out, k_in;
    size_t nr;
    size_t bytes;  /* owned bytes (panels + bias) */
} mh_packed_matrix;

/* Packs W [n_out, k_in] (PyTorch layout) and copies bias [n_out] (may be NULL).
 * MH_ERR_SIZE_OVERFLOW or MH_ERR_OUT_OF_MEMORY leave *out zeroed. */
mh_status mh_pack_matrix(const mh_kernels* k, const float* w, const float* bias, int n_out,
                         int k_in, mh_packed_matrix* out);
void mh_packed_matrix_free(mh_packed_matrix* m); /* accepts a zeroed matrix */

/* y[r * ldy + c] = sum_kk x[r * ldx + kk] * W[c, kk] + bias[c], for r < rows, c < n_out. */
void mh_gemm_packed(const mh_kernels* k, int threads, size_t rows, const float* x, size_t ldx,
                    const mh_packed_matrix* w, float* y, size_t ldy);

/* y[r * ldy + c] += sum_kk x[r * ldx + kk] * W[c, kk] (w's bias is not added). */
void mh_gemm_packed_acc(const mh_kernels* k, int threads, size_t rows, const float* x, size_t ldx,
                        const mh_packed_matrix* w, float* y, size_t ldy);

#endif
