#include "kernels/x86/avx2/kernels_avx2.h"

void mh_kernels_init_avx2(mh_kernels* k) {
    mh_kernels_init_scalar(k);
    k->isa = MH_ISA_AVX2;
    k->gemm_mr = 6;
    k->gemm_nr = 16;
    k->gemm = mh_f32_gemm_ukernel_6x16__avx2;
    k->gemm_acc = mh_f32_gemm_acc_ukernel_6x16__avx2;
    k->pack_kt = mh_pack_kt_16__avx2;
    k->pack_v = mh_pack_v_16__avx2;
    k->qk_direct = mh_f32_qk_direct__avx2;
    k->pv_direct = mh_f32_pv_direct__avx2;
    k->attn_direct_rows = 6;
    k->softmax_tile = mh_f32_softmax_tile__avx2;
    k->attn_block_rows = 96;
    k->attn_kv_tile = 64;
    k->head_mix = mh_head_mix__avx2;
    k->f32_to_f16 = mh_f32_to_f16__avx2;
    k->f32_to_bf16 = mh_f32_to_bf16__avx2;
}
