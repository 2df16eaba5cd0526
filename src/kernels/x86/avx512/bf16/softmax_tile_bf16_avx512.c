/* The bf16 compute mode's online-softmax step (softmax_tile_bf16, contract in kernels.h) on
 * AVX512-BF16: the generic step (softmax_step.h) with P rounded by this ISA's round_bf16
 * (VCVTNE2PS2BF16, 32 floats an instruction, bitwise the storage conversion) instead of the
 * storage conversion's integer rounding, whose five operations a vector took the ports the
 * exps need (causal bf16 prefill N = M = 2048 H32 D128 on AMX, 1 thread: 1.06x the time of a
 * separate pass, where this is 0.9x). Replaces generic/bf16/softmax_tile_bf16.c for this ISA
 * (cmake/kernels.cmake). */
#include "kernels/kernel_protos.h"
#include "kernels/x86/avx512/bf16/bf16_round_avx512.h"

#define MH_SOFTMAX_ROUND_P(x, y, n) mh_round_bf16_n(n, x, y)
#include "kernels/generic/softmax_step.h"

void MH_KNAME(softmax_tile_bf16)(size_t rows, size_t cols, float* s, size_t lds, uint16_t* pb, float* m, float* l,
                                 float* alpha) {
    softmax_step(rows, cols, s, lds, pb, m, l, alpha);
}
