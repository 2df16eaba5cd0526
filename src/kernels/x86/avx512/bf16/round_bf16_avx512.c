/* The bf16 mode's operand rounding (round_bf16, contract in kernels.h) on AVX512-BF16: 32
 * floats per VCVTNE2PS2BF16 (bf16_round_avx512.h), bitwise f32_to_bf16. Replaces
 * generic/bf16/round_bf16.c for this ISA (cmake/kernels.cmake). */
#include "kernels/kernel_protos.h"
#include "kernels/x86/avx512/bf16/bf16_round_avx512.h"

void MH_KNAME(round_bf16)(size_t n, const float* x, uint16_t* y) { mh_round_bf16_n(n, x, y); }
