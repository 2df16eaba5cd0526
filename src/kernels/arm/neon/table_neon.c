/* The NEON table: every slot from kernel_list.h, and the NEON tile sizes. */
#include "kernels/arm/neon/simd_neon.h"
#include "kernels/kernel_protos.h"

void MH_KNAME(kernels_init)(mh_kernels* k) {
    MH_KERNEL_TABLE_FILL(k);
    k->gemm_mr = MH_GEMM_MR;
    k->gemm_nr = MH_GEMM_NR;
    k->attn_direct_rows = MH_GEMM_MR;
    k->attn_block_rows = 96; /* a multiple of MR = 6 */
    k->attn_kv_tile = 64;    /* 4 panels of NR = 16 */
    k->attn_prefill_kv_tile = k->attn_kv_tile;
}
