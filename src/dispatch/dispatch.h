/* Choosing a kernel table: the compiled-in tables, the CPU's abilities and MH_ISA. */
#ifndef MH_DISPATCH_H
#define MH_DISPATCH_H
#include "kernels/kernels.h"

/* The table for `isa`, or NULL if it is not compiled in or the CPU cannot run it. */
const mh_kernels* mh_dispatch_table(mh_isa isa);

/* Readies the bf16 compute mode before its first call: where a table's bf16 GEMMs can run on
 * AMX (its bf16_amx), asks the OS for the tile state, once per process, and, granted, puts
 * them in the table. Every bf16 call passes here before it reads a table's bf16 slots
 * (mh_compute_resolve and mh_compute_pick), so none runs while they change; f32 calls never
 * read them. 1 if the AVX-512 table's bf16 GEMMs are AMX's. */
int mh_dispatch_bf16_ready(void);

#endif
