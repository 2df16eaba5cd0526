#include <arm_sve.h>

#include "dispatch/cpu_features.h"
#include "kernels/arm/sve/kernels_sve.h"

/* 32-bit lanes per vector. Only called on a CPU with SVE. */
__attribute__((noinline)) static size_t vl_words(void) { return (size_t)svcntw(); }

/* The dispatcher builds every compiled-in table, also on CPUs without SVE (where it is then
 * never used), so this function must not execute an SVE instruction there: it is compiled
 * without SVE and asks the CPU for its vector length only when the CPU has SVE. */
__attribute__((target("+nosve"))) void mh_kernels_init_sve(mh_kernels* k) {
    mh_kernels_init_scalar(k);
    /* NR follows the vector length: 16 (128-bit) ... 256 (2048-bit); any multiple of 128 bits
     * works, powers of two or not. The KV tile is the smallest multiple of NR >= 64. */
    const size_t nr = MH_SVE_GEMM_NV * (mh_cpu_has_isa(MH_ISA_SVE) ? vl_words() : 4);
    k->isa = MH_ISA_SVE;
    k->gemm_mr = MH_SVE_GEMM_MR;
    k->gemm_nr = nr;
    k->gemm = mh_f32_gemm_ukernel_6x4vl__sve;
    k->gemm_acc = mh_f32_gemm_acc_ukernel_6x4vl__sve;
    k->pack_kt = mh_pack_kt_4vl__sve;
    k->pack_v = mh_pack_v_4vl__sve;
    k->qk_direct = mh_f32_qk_direct__sve;
    k->pv_direct = mh_f32_pv_direct__sve;
    k->attn_direct_rows = MH_SVE_GEMM_MR;
    k->softmax_tile = mh_f32_softmax_tile__sve;
    k->attn_block_rows = 96; /* a multiple of MR = 6 */
    k->attn_kv_tile = (64 + nr - 1) / nr * nr;
    k->head_mix = mh_head_mix__sve;
    k->f32_to_f16 = mh_f32_to_f16__sve;
    k->f32_to_bf16 = mh_f32_to_bf16__sve;
}
