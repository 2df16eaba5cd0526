/* The SVE kernels (contracts in kernels.h), vector-length agnostic (128 to 2048 bits).
 * The GEMM micro-tile is 6 rows x 4 vectors: NR = 4 * svcntw() (16 at 128-bit SVE, 64 at
 * 512-bit), read from the CPU when the table is built; the kernels derive the same NR from
 * svcntw() on every call (the vector length is fixed for the life of the process). */
#ifndef MH_KERNELS_SVE_H
#define MH_KERNELS_SVE_H
#include "kernels/kernels.h"

#define MH_SVE_GEMM_MR 6
#define MH_SVE_GEMM_NV 4 /* vectors per micro-tile row: NR = MH_SVE_GEMM_NV * svcntw() */

void mh_kernels_init_sve(mh_kernels* k);

void mh_f32_gemm_ukernel_6x4vl__sve(size_t m, size_t n, size_t k, const float* a, size_t lda,
                                    const float* panel, const float* bias, float* c, size_t ldc);
void mh_f32_gemm_acc_ukernel_6x4vl__sve(size_t m, size_t n, size_t k, const float* a, size_t lda,
                                        const float* panel, const float* alpha, float* c,
                                        size_t ldc);
void mh_pack_kt_4vl__sve(size_t cols, size_t d, const void* k, ptrdiff_t ldk, mh_dtype dtype,
                         float* dst);
void mh_pack_v_4vl__sve(size_t cols, size_t dv, const void* v, ptrdiff_t ldv, mh_dtype dtype,
                        float* dst);
void mh_f32_qk_direct__sve(size_t rows, size_t cols, size_t d, const float* q, size_t ldq,
                           const void* k, ptrdiff_t ldk, mh_dtype dtype, float* s, size_t lds);
void mh_f32_pv_direct__sve(size_t rows, size_t cols, size_t dv, const float* p, size_t ldp,
                           const void* v, ptrdiff_t ldv, mh_dtype dtype, const float* alpha,
                           float* o, size_t ldo);
void mh_f32_softmax_tile__sve(size_t rows, size_t cols, float* s, size_t lds, float* m, float* l,
                              float* alpha);
void mh_f32_to_f16__sve(size_t n, const float* x, uint16_t* y);
void mh_f32_to_bf16__sve(size_t n, const float* x, uint16_t* y);

void mh_head_mix__sve(const mh_head_mix_factors* f, size_t cols, const float* a, size_t lda,
                      const float* ascale, float* out, size_t ldo);
#endif
