/* What the CPU and OS can run. Compiled without any ISA flag, so it runs everywhere. */
#ifndef MH_CPU_FEATURES_H
#define MH_CPU_FEATURES_H
#include "multihead.h"

/* 1 if this CPU and OS can execute code for `isa` (regardless of what is compiled in). */
int mh_cpu_has_isa(mh_isa isa);

/* 1 if this CPU can run `isa`'s bf16 dot-product instructions: scalar always (plain f32
 * arithmetic), AVX512 with AVX512-BF16 (VDPBF16PS), NEON with FEAT_BF16 (HWCAP2_BF16: BFDOT),
 * SVE with SVE BF16 (HWCAP2_SVEBF16); AVX2 never. */
int mh_cpu_has_bf16(mh_isa isa);

/* 1 if AVX-512's bf16 GEMMs should widen to f32 FMAs rather than run VDPBF16PS: the
 * environment's MH_BF16_GEMM ("fma" or "dot"; unset, "auto" or anything else: the CPU's
 * choice), else 1 on Intel, whose Xeons issue VDPBF16PS at half their FMA rate, and 0
 * elsewhere (AMD Zen 4 issues it at twice the FMA rate). Read once, at table init. */
int mh_cpu_bf16_gemm_on_fma(void);

/* 1 if the decode kernels should prefetch a lone K/V stream in software (kernels.h,
 * decode_prefetch_streams): the environment's MH_DECODE_PREFETCH ("sw" or "hw"; otherwise the
 * CPU's choice), else 1 on Intel, whose hardware prefetchers alone leave one core at about 80%
 * of its read bandwidth, and 0 elsewhere (on AMD Zen 4 the software prefetch costs up to 3x).
 * Read once, at table init. */
int mh_cpu_decode_prefetch_streams(void);

#endif
