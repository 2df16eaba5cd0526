/* The scalar table: every slot from kernel_list.h, and the scalar tile sizes. */
#include "kernels/kernel_protos.h"
#include "kernels/scalar/simd_scalar.h"

void MH_KNAME(kernels_init)(mh_kernels* k) {
    MH_KERNEL_TABLE_FILL(k);
    k->gemm_mr = MH_GEMM_MR;
    k->gemm_nr = MH_GEMM_NR;
    k->attn_direct_rows = MH_GEMM_MR;
    k->attn_block_rows = 64;
    k->attn_kv_tile = 64;
    k->attn_prefill_kv_tile = k->attn_kv_tile;
    k->bf16_gemm_name = "f32"; /* its bf16 kernels multiply in f32 */
}
