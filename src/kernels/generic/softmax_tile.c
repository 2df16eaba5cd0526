/* The online-softmax step's f32 slot (contract in kernels.h; the step: softmax_step.h). */
#include "kernels/generic/softmax_step.h"

void MH_KNAME(softmax_tile)(size_t rows, size_t cols, float* s, size_t lds, float* m, float* l,
                            float* alpha) {
    softmax_step(rows, cols, s, lds, NULL, m, l, alpha);
}
