/* The bf16 compute mode's online-softmax step (softmax_tile_bf16, contract in kernels.h): the
 * f32 step (softmax_step.h) with P also rounded to bf16 for the P.V GEMM as each vector is
 * stored, while it is in L1, instead of in a pass of its own over the tile (round_bf16), which
 * read it back from L2 once a block's scores outgrew L1 (AMX's 32 rows of 512 keys). */
#include "kernels/generic/softmax_step.h"

void MH_KNAME(softmax_tile_bf16)(size_t rows, size_t cols, float* s, size_t lds, uint16_t* pb, float* m, float* l,
                                 float* alpha) {
    softmax_step(rows, cols, s, lds, pb, m, l, alpha);
}
