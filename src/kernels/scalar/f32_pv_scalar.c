#include "kernels/scalar/f32_attention_scalar.h"

void mh_f32_pv_ukernel__scalar(size_t rows, size_t cols, size_t dv, const float* p, size_t ldp,
                               const float* vt, const float* alpha, float* o, size_t ldo) {
    for (size_t r = 0; r < rows; r++) {
        float* orow = o + r * ldo;
        const float a = alpha[r];
        if (a != 1.0f)
            for (size_t dd = 0; dd < dv; dd++) orow[dd] *= a;
        for (size_t c = 0; c < cols; c++) {
            const float pc = p[r * ldp + c];
            if (pc == 0.0f) continue; /* dropped keys: skipping is exact */
            const float* vrow = vt + c * dv;
            for (size_t dd = 0; dd < dv; dd++) orow[dd] += pc * vrow[dd];
        }
    }
}
