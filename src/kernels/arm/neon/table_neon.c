#include "kernels/arm/neon/kernels_neon.h"

void mh_kernels_init_neon(mh_kernels* k) {
    mh_kernels_init_scalar(k);
    k->isa = MH_ISA_NEON;
    k->gemm_mr = MH_NEON_GEMM_MR;
    k->gemm_nr = MH_NEON_GEMM_NR;
    k->gemm = mh_f32_gemm_ukernel_6x16__neon;
    k->gemm_acc = mh_f32_gemm_acc_ukernel_6x16__neon;
    k->pack_kt = mh_pack_kt_16__neon;
    k->pack_v = mh_pack_v_16__neon;
    k->qk_direct = mh_f32_qk_direct__neon;
    k->pv_direct = mh_f32_pv_direct__neon;
    k->attn_direct_rows = MH_NEON_GEMM_MR;
    k->softmax_tile = mh_f32_softmax_tile__neon;
    k->attn_block_rows = 96; /* a multiple of MR = 6 */
    k->attn_kv_tile = 64;    /* 4 panels of NR = 16 */
    k->head_mix = mh_head_mix__neon;
    k->f32_to_f16 = mh_f32_to_f16__neon;
    k->f32_to_bf16 = mh_f32_to_bf16__neon;
}
