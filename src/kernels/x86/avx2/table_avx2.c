/* The AVX2 table: every slot from kernel_list.h, and the AVX2 tile sizes. */
#include "dispatch/cpu_features.h"
#include "kernels/kernel_protos.h"
#include "kernels/x86/avx2/simd_avx2.h"

void MH_KNAME(kernels_init)(mh_kernels* k) {
    MH_KERNEL_TABLE_FILL(k);
    k->gemm_mr = MH_GEMM_MR;
    k->gemm_nr = MH_GEMM_NR;
    k->attn_direct_rows = MH_GEMM_MR;
    k->attn_direct_even_rows = 4; /* 8 rows as 4 4, not 5 3: docs/kernels.md, "Decode kernels" */
    k->attn_block_rows = 96;
    k->attn_kv_tile = 64;
    k->attn_prefill_kv_tile = 512; /* Zen 5, against 128: fp32 prefill 0.97x the time */
    k->attn_group_kv_tile = 256;   /* Zen 5, against 64: MQA decode 0.95x the time, GQA 8 rows 0.91x */
    k->decode_prefetch = mh_cpu_decode_prefetch();
}
