/* The scalar kernels (contracts in kernels.h). */
#ifndef MH_KERNELS_SCALAR_H
#define MH_KERNELS_SCALAR_H
#include "kernels/kernels.h"
#include "util/dtype.h"

/* GEMM micro-tile. */
#define MH_SCALAR_GEMM_MR 4
#define MH_SCALAR_GEMM_NR 8

void mh_f32_gemm_ukernel_4x8__scalar(size_t m, size_t n, size_t k, const float* a, size_t lda,
                                      const float* panel, const float* bias, float* c, size_t ldc);
void mh_f32_gemm_acc_ukernel_4x8__scalar(size_t m, size_t n, size_t k, const float* a, size_t lda,
                                          const float* panel, const float* alpha, float* c,
                                          size_t ldc);
void mh_pack_kt_8__scalar(size_t cols, size_t d, const void* k, ptrdiff_t ldk, mh_dtype dtype,
                           float* dst);
void mh_pack_v_8__scalar(size_t cols, size_t dv, const void* v, ptrdiff_t ldv, mh_dtype dtype,
                          float* dst);
void mh_f32_qk_direct__scalar(size_t rows, size_t cols, size_t d, const float* q, size_t ldq,
                              const void* k, ptrdiff_t ldk, mh_dtype dtype, float* s, size_t lds);
void mh_f32_pv_direct__scalar(size_t rows, size_t cols, size_t dv, const float* p, size_t ldp,
                              const void* v, ptrdiff_t ldv, mh_dtype dtype, const float* alpha,
                              float* o, size_t ldo);
void mh_f32_softmax_tile__scalar(size_t rows, size_t cols, float* s, size_t lds, float* m, float* l,
                                 float* alpha);
void mh_f32_to_f16__scalar(size_t n, const float* x, uint16_t* y);
void mh_f32_to_bf16__scalar(size_t n, const float* x, uint16_t* y);

/* Widens n elements of a `dtype` row to f32 (the shared scalar load path). */
void mh_load_row_f32__scalar(const void* row, mh_dtype dtype, size_t n, float* dst);

void mh_head_mix__scalar(const mh_head_mix_factors* f, size_t cols, const float* a, size_t lda,
                         const float* ascale, float* out, size_t ldo);
#endif
