/*
 * The kernel list: every slot of the kernel table, as K(slot, return type, (parameters)).
 * It generates the table's function members (kernels.h), each ISA's prototypes and the code
 * that fills its table (kernel_protos.h), and the per-slot tests of tests/core/test_kernels.c,
 * so a kernel added here must exist, and is tested, on every ISA. The contracts are in
 * kernels.h next to the table and in docs/kernels.md.
 */
#ifndef MH_KERNEL_LIST_H
#define MH_KERNEL_LIST_H

#define MH_KERNEL_LIST(K) \
    K(gemm, void, (size_t m, size_t n, size_t k, const float* a, size_t lda, const float* panel, \
                   const float* bias, float* c, size_t ldc, mh_fetch* fetch)) \
    K(gemm_acc, void, (size_t m, size_t n, size_t k, const float* a, size_t lda, \
                       const float* panel, const float* alpha, float* c, size_t ldc, mh_fetch* fetch)) \
    K(pack_kt, void, (size_t cols, size_t d, const mh_rows* k, float* dst)) \
    K(pack_v, void, (size_t cols, size_t dv, const mh_rows* v, float* dst)) \
    K(qk_direct, void, (size_t rows, size_t cols, size_t d, const float* q, size_t ldq, \
                        const mh_rows* k, float* s, size_t lds)) \
    K(pv_direct, void, (size_t rows, size_t cols, size_t dv, const float* p, size_t ldp, \
                        const mh_rows* v, const float* alpha, float* o, size_t ldo)) \
    K(qk_heads, void, (size_t heads, size_t cols, size_t d, const float* q, size_t ldq, \
                       const mh_rows* k, float* s, size_t lds)) \
    K(pv_heads, void, (size_t heads, size_t cols, size_t dv, const float* p, size_t ldp, \
                       const mh_rows* v, const float* alpha, float* o, size_t ldo, float* acc)) \
    K(scale_row, void, (size_t n, const float* x, float a, float* y)) \
    K(add_row, void, (size_t n, const float* x, float* y)) \
    K(v_nonfinite, int, (size_t c_lo, size_t c_hi, size_t d_lo, size_t d_hi, const mh_rows* v)) \
    K(softmax_tile, void, (size_t rows, size_t cols, float* s, size_t lds, float* m, float* l, \
                           float* alpha)) \
    K(head_mix, void, (const struct mh_head_mix_factors* f, size_t cols, const float* a, \
                       size_t lda, const float* ascale, float* out, size_t ldo)) \
    K(f32_to_f16, void, (size_t n, const float* x, uint16_t* y)) \
    K(f32_to_bf16, void, (size_t n, const float* x, uint16_t* y)) \
    K(f32_to_i8, void, (size_t n, const float* x, int8_t* q, float* scale)) \
    K(rope, void, (const struct mh_rope_args* a, size_t rows, const int64_t* pos, float* x, \
                   size_t ldx))

/*
 * The bf16 compute mode's slots (mh_compute MH_COMPUTE_BF16): only ISAs with a bf16/ kernel
 * folder fill them (cmake/kernels.cmake builds it where the CPU extension's flags compile and
 * defines MH_BF16_KERNELS); the others leave them NULL and refuse the mode
 * (mh_compute_supported). Panels are bf16 k-pairs: [ceil(k/2)][NR][2].
 */
#define MH_KERNEL_LIST_BF16(K) \
    K(gemm_bf16, void, (size_t m, size_t n, size_t k, const uint16_t* a, size_t lda, \
                        const uint16_t* panel, float* c, size_t ldc, mh_fetch* fetch)) \
    K(gemm_acc_bf16, void, (size_t m, size_t n, size_t k, const uint16_t* a, size_t lda, \
                            const uint16_t* panel, const float* alpha, float* c, size_t ldc, mh_fetch* fetch)) \
    K(pack_kt_bf16, void, (size_t cols, size_t d, const mh_rows* k, uint16_t* dst)) \
    K(pack_v_bf16, void, (size_t cols, size_t dv, const mh_rows* v, uint16_t* dst)) \
    K(round_bf16, void, (size_t n, const float* x, uint16_t* y)) \
    K(softmax_tile_bf16, void, (size_t rows, size_t cols, float* s, size_t lds, uint16_t* pb, float* m, \
                                float* l, float* alpha)) \
    K(rows_bf16, void, (size_t cols, size_t width, const mh_rows* x, uint16_t* dst))

#endif
