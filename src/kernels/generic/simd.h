/* The generic kernels' view of the ISA they are compiled for: its SIMD vocabulary
 * (MH_SIMD_HEADER, set per ISA by cmake/kernels.cmake from the ISA registry) and the kernel
 * prototypes with its name suffix (MH_KNAME). */
#ifndef MH_GENERIC_SIMD_H
#define MH_GENERIC_SIMD_H
#include "kernels/kernel_protos.h"
#include MH_SIMD_HEADER
#endif
