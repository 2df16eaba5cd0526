/* Online-softmax step with SLEEF's vector-length-agnostic expf (1-ulp). Every step is
 * predicated with svwhilelt: inactive lanes are not read, not stored and not summed.
 * Register budget: a handful of z registers besides SLEEF's own. */
#include <math.h>
#include <sleef.h>

#include "kernels/arm/sve/kernels_sve.h"
#include "kernels/arm/sve/simd_sve.h"

void mh_f32_softmax_tile__sve(size_t rows, size_t cols, float* s, size_t lds, float* m, float* l,
                              float* alpha) {
    const svbool_t all = svptrue_b32();
    const size_t vl = svcntw();
    for (size_t r = 0; r < rows; r++) {
        float* row = s + r * lds;
        svfloat32_t vmax = svdup_n_f32(m[r]);
        for (size_t c = 0; c < cols; c += vl) {
            const svbool_t pg = mh_pred(c, cols);
            vmax = svmaxnm_f32_m(pg, vmax, svld1_f32(pg, row + c));
        }
        const float mx = svmaxnmv_f32(all, vmax);
        if (mx == -INFINITY) { /* nothing kept yet: keep the state, zero the tile */
            for (size_t c = 0; c < cols; c += vl) svst1_f32(mh_pred(c, cols), row + c, svdup_n_f32(0.0f));
            alpha[r] = 1.0f;
            continue;
        }
        svfloat32_t sum = svdup_n_f32(0.0f);
        for (size_t c = 0; c < cols; c += vl) {
            const svbool_t pg = mh_pred(c, cols);
            const svfloat32_t x = svld1_f32(pg, row + c);
            /* a vector of dropped keys only (masked/causal runs) is 0 without an exp: the same
             * bits, since exp(-inf) = 0 and adding +0 leaves the sum unchanged */
            if (!svptest_any(pg, svcmpne_n_f32(pg, x, -INFINITY))) {
                svst1_f32(pg, row + c, svdup_n_f32(0.0f));
                continue;
            }
            /* exp(-inf) = 0 for dropped keys; inactive lanes are computed but never used */
            const svfloat32_t e = Sleef_expfx_u10sve(svsub_n_f32_x(all, x, mx));
            svst1_f32(pg, row + c, e);
            sum = svadd_f32_m(pg, sum, e);
        }
        alpha[r] = expf(m[r] - mx); /* m[r] = -inf on the first kept tile gives 0 */
        l[r] = l[r] * alpha[r] + svaddv_f32(all, sum);
        m[r] = mx;
    }
}
