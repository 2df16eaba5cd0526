#include <math.h>

#include "kernels/scalar/kernels_scalar.h"

void mh_f32_softmax_tile__scalar(size_t rows, size_t cols, float* s, size_t lds, float* m, float* l,
                                 float* alpha) {
    for (size_t r = 0; r < rows; r++) {
        float* row = s + r * lds;
        float mx = m[r];
        for (size_t c = 0; c < cols; c++) mx = row[c] > mx ? row[c] : mx;
        if (mx == -INFINITY) { /* nothing kept yet: keep the state, zero the tile */
            for (size_t c = 0; c < cols; c++) row[c] = 0.0f;
            alpha[r] = 1.0f;
            continue;
        }
        float sum = 0.0f;
        for (size_t c = 0; c < cols; c++) {
            row[c] = expf(row[c] - mx); /* exp(-inf) = 0 for dropped keys */
            sum += row[c];
        }
        alpha[r] = expf(m[r] - mx); /* m[r] = -inf on the first kept tile gives 0 */
        l[r] = l[r] * alpha[r] + sum;
        m[r] = mx;
    }
}
