/* What the CPU and OS can run. Compiled without any ISA flag, so it runs everywhere. */
#ifndef MH_CPU_FEATURES_H
#define MH_CPU_FEATURES_H
#include "multihead.h"

/* 1 if this CPU and OS can execute code for `isa` (regardless of what is compiled in). */
int mh_cpu_has_isa(mh_isa isa);

#endif
