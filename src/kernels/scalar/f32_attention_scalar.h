/* Scalar attention-tile kernels (see kernels.h for each contract). */
#ifndef MH_F32_ATTENTION_SCALAR_H
#define MH_F32_ATTENTION_SCALAR_H
#include "kernels/kernels.h"

/* Keys per KV tile and query rows per head per tile for the scalar table. */
#define MH_SCALAR_KV_TILE 64
#define MH_SCALAR_Q_TILE 16
/* Projection GEMM micro-tile. */
#define MH_SCALAR_GEMM_MR 4
#define MH_SCALAR_GEMM_NR 16

void mh_pack_k_scalar(size_t cols, size_t d, const void* k, ptrdiff_t ldk, mh_dtype dtype, float* kt);
void mh_pack_v_scalar(size_t cols, size_t dv, const void* v, ptrdiff_t ldv, mh_dtype dtype, float* vt);
void mh_f32_qk_ukernel_4xN__scalar(size_t rows, size_t cols, size_t d, const float* q, size_t ldq,
                                   const float* kt, float* s, size_t lds);
void mh_f32_softmax_tile__scalar(size_t rows, size_t cols, float* s, size_t lds, float* m, float* l,
                                 float* alpha);
void mh_f32_pv_ukernel__scalar(size_t rows, size_t cols, size_t dv, const float* p, size_t ldp,
                               const float* vt, const float* alpha, float* o, size_t ldo);
void mh_f32_gemm_ukernel_4x16__scalar(size_t m, size_t n, size_t k, const float* a, size_t lda,
                                      const float* panel, const float* bias, float* c, size_t ldc);
void mh_f32_to_f16__scalar(size_t n, const float* x, uint16_t* y);
void mh_f32_to_bf16__scalar(size_t n, const float* x, uint16_t* y);

#endif
