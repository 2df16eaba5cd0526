#include "kernels/scalar/f32_attention_scalar.h"

/* S = Q . Kt for a tile. Four query rows share each loaded row of Kt; the inner loop runs over
 * contiguous keys so the compiler can vectorise it without reassociating the sum. */
void mh_f32_qk_ukernel_4xN__scalar(size_t rows, size_t cols, size_t d, const float* q, size_t ldq,
                                   const float* kt, float* s, size_t lds) {
    size_t r = 0;
    for (; r + 4 <= rows; r += 4) {
        float acc[4][MH_SCALAR_KV_TILE] = {{0}};
        for (size_t dd = 0; dd < d; dd++) {
            const float* krow = kt + dd * MH_SCALAR_KV_TILE;
            const float q0 = q[(r + 0) * ldq + dd], q1 = q[(r + 1) * ldq + dd];
            const float q2 = q[(r + 2) * ldq + dd], q3 = q[(r + 3) * ldq + dd];
            for (size_t c = 0; c < cols; c++) {
                acc[0][c] += q0 * krow[c];
                acc[1][c] += q1 * krow[c];
                acc[2][c] += q2 * krow[c];
                acc[3][c] += q3 * krow[c];
            }
        }
        for (size_t i = 0; i < 4; i++)
            for (size_t c = 0; c < cols; c++) s[(r + i) * lds + c] = acc[i][c];
    }
    for (; r < rows; r++) {
        float acc[MH_SCALAR_KV_TILE] = {0};
        for (size_t dd = 0; dd < d; dd++) {
            const float* krow = kt + dd * MH_SCALAR_KV_TILE;
            const float qv = q[r * ldq + dd];
            for (size_t c = 0; c < cols; c++) acc[c] += qv * krow[c];
        }
        for (size_t c = 0; c < cols; c++) s[r * lds + c] = acc[c];
    }
}
