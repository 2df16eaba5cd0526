#include "kernels/x86/avx512/kernels_avx512.h"

void mh_kernels_init_avx512(mh_kernels* k) {
    mh_kernels_init_scalar(k);
    k->isa = MH_ISA_AVX512;
    k->gemm_mr = 6;
    k->gemm_nr = 64;
    k->gemm = mh_f32_gemm_ukernel_6x64__avx512;
    k->gemm_acc = mh_f32_gemm_acc_ukernel_6x64__avx512;
    k->pack_kt = mh_pack_kt_64__avx512;
    k->pack_v = mh_pack_v_64__avx512;
    k->qk_direct = mh_f32_qk_direct__avx512;
    k->pv_direct = mh_f32_pv_direct__avx512;
    k->attn_direct_rows = 6;
    k->softmax_tile = mh_f32_softmax_tile__avx512;
    k->attn_block_rows = 96;
    k->attn_kv_tile = 64;
    k->head_mix = mh_head_mix__avx512;
    k->f32_to_f16 = mh_f32_to_f16__avx512;
    k->f32_to_bf16 = mh_f32_to_bf16__avx512;
}
