/* What the CPU and OS can run. Compiled without any ISA flag, so it runs everywhere. */
#ifndef MH_CPU_FEATURES_H
#define MH_CPU_FEATURES_H
#include "kernels/kernels.h"

/* 1 if this CPU and OS can execute code for `isa` (regardless of what is compiled in). */
int mh_cpu_has_isa(mh_isa isa);

/* 1 if this CPU can run `isa`'s bf16 dot-product instructions: scalar always (plain f32
 * arithmetic), AVX512 with AVX512-BF16 (VDPBF16PS), NEON with FEAT_BF16 (HWCAP2_BF16: BFDOT),
 * SVE with SVE BF16 (HWCAP2_SVEBF16); AVX2 never. */
int mh_cpu_has_bf16(mh_isa isa);

/* What AVX-512's bf16 GEMMs run on. */
typedef enum mh_bf16_gemm {
    MH_BF16_GEMM_DOT = 0, /* VDPBF16PS */
    MH_BF16_GEMM_FMA,     /* bf16 widened to f32 FMAs (the same products) */
    MH_BF16_GEMM_AMX      /* AMX tiles (TDPBF16PS), 32 rows a micro-tile */
} mh_bf16_gemm;

/* The environment's MH_BF16_GEMM ("dot" or "fma" force those), else AMX where the CPU has
 * AMX-TILE and AMX-BF16 and the OS enables their state, else mh_cpu_bf16_gemm_fallback().
 * AMX here is the CPU's ability only: the process's permission for the tile state is asked
 * for at its first bf16 call (mh_cpu_request_amx, through mh_dispatch_bf16_ready), and where
 * the OS refuses it the fallback's GEMMs stay. Read once, at table init. */
mh_bf16_gemm mh_cpu_bf16_gemm(void);

/* The bf16 GEMMs without AMX: FMA on Intel, whose Xeons issue VDPBF16PS at half their FMA
 * rate, and DOT elsewhere (AMD Zen 4 issues it at twice the FMA rate). */
mh_bf16_gemm mh_cpu_bf16_gemm_fallback(void);

/* 1 if the OS grants this process the AMX tile data (Linux's arch_prctl
 * ARCH_REQ_XCOMP_PERM, asked each call; granted, it enlarges the process's signal frames). */
int mh_cpu_request_amx(void);

/* How the decode kernels prefetch near K/V rows on this CPU (kernels.h, mh_prefetch_rule;
 * the measurements behind each: kernels/decode_prefetch.h): the environment's
 * MH_DECODE_PREFETCH ("l2", "l1", "all" or "turn"; otherwise the CPU's choice), else ALL on
 * Intel, L1 on AMD from Zen 5 (family 0x1A), TURN on Zen 3 (family 0x19 without AVX-512) and
 * L2 elsewhere. Read once, at table init. */
mh_prefetch_rule mh_cpu_decode_prefetch(void);

/* Which MHA decodes on far-apart rows run on the kernels across heads (kernels.h,
 * mh_heads_rule; the measurements behind each: core/driver_heads.c): the environment's
 * MH_DECODE_HEADS ("l1" or "any"; otherwise the CPU's choice), else ANY on Zen 3 (AMD family
 * 0x19 without AVX-512) and L1 elsewhere. Read once, at table init. */
mh_heads_rule mh_cpu_decode_heads(void);

/* The L1 data cache of a core in bytes (sysconf; MH_CPU_L1D_DEFAULT where it says nothing, as
 * under qemu-user). */
#define MH_CPU_L1D_DEFAULT ((size_t)32 << 10)
size_t mh_cpu_l1d_bytes(void);

/* A core's L2 in bytes, the same way (MH_CPU_L2_DEFAULT where sysconf says nothing: AMD Zen 3's,
 * a small one among today's server cores). */
#define MH_CPU_L2_DEFAULT ((size_t)512 << 10)
size_t mh_cpu_l2_bytes(void);

#endif
