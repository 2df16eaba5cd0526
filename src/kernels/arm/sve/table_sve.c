/* The SVE table: every slot from kernel_list.h, and the SVE tile sizes. The dispatcher calls
 * this init only on a CPU with SVE, so it may read the vector length. */
#include "kernels/arm/sve/simd_sve.h"
#include "kernels/kernel_protos.h"

void MH_KNAME(kernels_init)(mh_kernels* k) {
    /* NR follows the vector length: 16 (128-bit) ... 256 (2048-bit); any multiple of 128 bits
     * works, powers of two or not. The KV tile is the smallest multiple of NR >= 64. */
    const size_t nr = MH_GEMM_NR;
    MH_KERNEL_TABLE_FILL(k);
    k->gemm_mr = MH_GEMM_MR;
    k->gemm_nr = nr;
    k->attn_direct_rows = MH_GEMM_MR;
    k->attn_block_rows = 96; /* a multiple of MR = 6 */
    k->attn_kv_tile = (64 + nr - 1) / nr * nr;
    k->attn_prefill_kv_tile = k->attn_kv_tile;
}
