/* The NEON (Advanced SIMD, aarch64) kernels (contracts in kernels.h). */
#ifndef MH_KERNELS_NEON_H
#define MH_KERNELS_NEON_H
#include "kernels/kernels.h"

/* GEMM micro-tile: 6 rows x 16 columns (4 q registers per row). */
#define MH_NEON_GEMM_MR 6
#define MH_NEON_GEMM_NR 16

void mh_kernels_init_neon(mh_kernels* k);

void mh_f32_gemm_ukernel_6x16__neon(size_t m, size_t n, size_t k, const float* a, size_t lda,
                                    const float* panel, const float* bias, float* c, size_t ldc);
void mh_f32_gemm_acc_ukernel_6x16__neon(size_t m, size_t n, size_t k, const float* a, size_t lda,
                                        const float* panel, const float* alpha, float* c,
                                        size_t ldc);
void mh_pack_kt_16__neon(size_t cols, size_t d, const void* k, ptrdiff_t ldk, mh_dtype dtype,
                         float* dst);
void mh_pack_v_16__neon(size_t cols, size_t dv, const void* v, ptrdiff_t ldv, mh_dtype dtype,
                        float* dst);
void mh_f32_qk_direct__neon(size_t rows, size_t cols, size_t d, const float* q, size_t ldq,
                            const void* k, ptrdiff_t ldk, mh_dtype dtype, float* s, size_t lds);
void mh_f32_pv_direct__neon(size_t rows, size_t cols, size_t dv, const float* p, size_t ldp,
                            const void* v, ptrdiff_t ldv, mh_dtype dtype, const float* alpha,
                            float* o, size_t ldo);
void mh_f32_softmax_tile__neon(size_t rows, size_t cols, float* s, size_t lds, float* m, float* l,
                               float* alpha);
void mh_f32_to_f16__neon(size_t n, const float* x, uint16_t* y);
void mh_f32_to_bf16__neon(size_t n, const float* x, uint16_t* y);

void mh_head_mix__neon(const mh_head_mix_factors* f, size_t cols, const float* a, size_t lda,
                       const float* ascale, float* out, size_t ldo);
#endif
