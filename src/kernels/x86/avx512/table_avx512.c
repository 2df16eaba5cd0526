/* The AVX-512 table: every slot from kernel_list.h, and the AVX-512 tile sizes. */
#include "dispatch/cpu_features.h"
#include "kernels/kernel_protos.h"
#include "kernels/x86/avx512/simd_avx512.h"
#ifdef MH_BF16_KERNELS
#include "kernels/x86/avx512/bf16/bf16_gemm_fma_avx512.h"
#endif
#ifdef MH_AMX_KERNELS
#include "kernels/x86/avx512/bf16/bf16_gemm_amx_avx512.h"
#endif

#ifdef MH_AMX_KERNELS
/* The table's bf16 GEMMs on AMX tiles (mh_dispatch_bf16_ready, once the OS grants them). */
static void use_amx(mh_kernels* k) {
    k->gemm_bf16 = MH_KNAME(gemm_bf16_amx);
    k->gemm_acc_bf16 = MH_KNAME(gemm_acc_bf16_amx);
    k->gemm_mr_bf16 = MH_AMX_MR;
    k->bf16_gemm_name = "amx";
}
#endif

void MH_KNAME(kernels_init)(mh_kernels* k) {
    MH_KERNEL_TABLE_FILL(k);
#ifdef MH_BF16_KERNELS
    mh_bf16_gemm gemm = mh_cpu_bf16_gemm();
    if (gemm == MH_BF16_GEMM_AMX) {
#ifdef MH_AMX_KERNELS
        k->bf16_amx = use_amx;
#endif
        gemm = mh_cpu_bf16_gemm_fallback(); /* until then, or where the OS refuses */
    }
    if (gemm == MH_BF16_GEMM_FMA) { /* the same products, on the faster instruction here */
        k->gemm_bf16 = MH_KNAME(gemm_bf16_fma);
        k->gemm_acc_bf16 = MH_KNAME(gemm_acc_bf16_fma);
        k->bf16_gemm_name = "fma";
    }
#endif
    k->gemm_mr = MH_GEMM_MR;
    k->gemm_nr = MH_GEMM_NR;
    k->attn_direct_rows = MH_GEMM_MR;
    k->attn_block_rows = 96;
    k->attn_kv_tile = 64;
    k->attn_prefill_kv_tile = 512; /* Zen 5, against 128: fp32 prefill 0.95-0.97x the time, bf16 0.91-0.94x */
    k->attn_group_kv_tile = 256;   /* Zen 5, against 64: MQA decode 0.96-0.98x the time, GQA 8 rows 0.92x */
    k->decode_prefetch = mh_cpu_decode_prefetch();
}
