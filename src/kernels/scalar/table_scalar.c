#include "kernels/scalar/f32_attention_scalar.h"

void mh_kernels_init_scalar(mh_kernels* k) {
    k->isa = MH_ISA_SCALAR;
    k->attn_q_tile = MH_SCALAR_Q_TILE;
    k->attn_kv_tile = MH_SCALAR_KV_TILE;
    k->pack_k = mh_pack_k_scalar;
    k->pack_v = mh_pack_v_scalar;
    k->qk = mh_f32_qk_ukernel_4xN__scalar;
    k->softmax_tile = mh_f32_softmax_tile__scalar;
    k->pv = mh_f32_pv_ukernel__scalar;
    k->gemm_mr = MH_SCALAR_GEMM_MR;
    k->gemm_nr = MH_SCALAR_GEMM_NR;
    k->gemm_ukernel = mh_f32_gemm_ukernel_4x16__scalar;
    k->f32_to_f16 = mh_f32_to_f16__scalar;
    k->f32_to_bf16 = mh_f32_to_bf16__scalar;
}
