#include "kernels/scalar/kernels_scalar.h"

void mh_kernels_init_scalar(mh_kernels* k) {
    k->isa = MH_ISA_SCALAR;
    k->gemm_mr = MH_SCALAR_GEMM_MR;
    k->gemm_nr = MH_SCALAR_GEMM_NR;
    k->gemm = mh_f32_gemm_ukernel_4x8__scalar;
    k->gemm_acc = mh_f32_gemm_acc_ukernel_4x8__scalar;
    k->pack_kt = mh_pack_kt_8__scalar;
    k->pack_v = mh_pack_v_8__scalar;
    k->qk_direct = mh_f32_qk_direct__scalar;
    k->pv_direct = mh_f32_pv_direct__scalar;
    k->attn_direct_rows = MH_SCALAR_GEMM_MR;
    k->softmax_tile = mh_f32_softmax_tile__scalar;
    k->attn_block_rows = 64;
    k->attn_kv_tile = 64;
    k->head_mix = mh_head_mix__scalar;
    k->f32_to_f16 = mh_f32_to_f16__scalar;
    k->f32_to_bf16 = mh_f32_to_bf16__scalar;
}
