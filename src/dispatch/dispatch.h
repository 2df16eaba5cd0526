/* Choosing a kernel table: the compiled-in tables, the CPU's abilities and MH_ISA. */
#ifndef MH_DISPATCH_H
#define MH_DISPATCH_H
#include "kernels/kernels.h"

/* The table for `isa`, or NULL if it is not compiled in or the CPU cannot run it. */
const mh_kernels* mh_dispatch_table(mh_isa isa);

#endif
