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

#endif
