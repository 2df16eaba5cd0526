/* The bf16 mode's operand rounding (round_bf16, contract in kernels.h) where the ISA has no
 * faster exact conversion of its own: its storage conversion f32_to_bf16. An ISA replaces
 * this file with its bf16/round_bf16_<name>.c (cmake/kernels.cmake; AVX512-BF16 does). */
#include "kernels/generic/simd.h"

void MH_KNAME(round_bf16)(size_t n, const float* x, uint16_t* y) { MH_KNAME(f32_to_bf16)(n, x, y); }
