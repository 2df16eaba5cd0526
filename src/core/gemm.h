/* Projection GEMM on weights packed once at create time into the kernel's panel layout, in
 * f32 or, for a layer in the bf16 compute mode, in bf16 (docs/api.md "Compute modes"). */
#ifndef MH_CORE_GEMM_H
#define MH_CORE_GEMM_H
#include "kernels/kernels.h"

typedef struct mh_packed_matrix {
    void* panels;  /* f32: float [ceil(n_out / nr)][k_in][nr]; bf16: uint16_t k-pairs
                      [ceil(n_out / nr)][ceil(k_in / 2)][nr][2]; zero-padded past n_out */
    float* bias;   /* [n_out] f32 or NULL */
    mh_compute compute; /* MH_COMPUTE_F32 or MH_COMPUTE_BF16 */
    int n_out, k_in;
    size_t nr;
    size_t panel_elems; /* elements from one panel to the next: nr * k_in (bf16: k_in rounded up
                           to even) */
    size_t bytes;  /* owned bytes (panels + bias) */
} mh_packed_matrix;

/* Packs W [n_out, k_in] (PyTorch layout) and copies bias [n_out] (may be NULL). compute is
 * F32 or BF16 (W rounded to bf16, nearest even; the kernel table must have the bf16 slots).
 * MH_ERR_SIZE_OVERFLOW or MH_ERR_OUT_OF_MEMORY leave *out zeroed. */
mh_status mh_pack_matrix(const mh_kernels* k, mh_compute compute, const float* w, const float* bias,
                         int n_out, int k_in, mh_packed_matrix* out);
void mh_packed_matrix_free(mh_packed_matrix* m); /* accepts a zeroed matrix */

/* y[r * ldy + c] = sum_kk x[r * ldx + kk] * W[c, kk] + bias[c], for r < rows, c < n_out.
 * A bf16 matrix takes x rounded to bf16 (nearest even) and accumulates the exact products in
 * f32; the bias is added in f32. */
void mh_gemm_packed(const mh_kernels* k, int threads, size_t rows, const float* x, size_t ldx,
                    const mh_packed_matrix* w, float* y, size_t ldy);

/* y[r * ldy + c] += sum_kk x[r * ldx + kk] * W[c, kk] (w's bias is not added). */
void mh_gemm_packed_acc(const mh_kernels* k, int threads, size_t rows, const float* x, size_t ldx,
                        const mh_packed_matrix* w, float* y, size_t ldy);

/* x [rows][ldx] rounded to bf16 as the bf16 GEMMs round it, into xr [rows][ldxr] (ldxr even,
 * >= k_in rounded up to even; an odd k_in's pad set to zero): for a caller that feeds the same
 * rows to several bf16 GEMMs, or gathers them, through mh_gemm_packed_rounded. */
void mh_round_rows(const mh_kernels* k, size_t rows, size_t k_in, const float* x, size_t ldx, uint16_t* xr,
                   size_t ldxr);

/* mh_gemm_packed of a bf16 matrix on rows rounded by mh_round_rows: the same results as on the
 * f32 rows they came from, without rounding them again. */
void mh_gemm_packed_rounded(const mh_kernels* k, int threads, size_t rows, const uint16_t* xr, size_t ldxr,
                            const mh_packed_matrix* w, float* y, size_t ldy);

#endif
