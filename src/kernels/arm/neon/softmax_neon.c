/* Online-softmax step with SLEEF's 4-lane expf (1-ulp). The last < 4 scores of a row are read
 * into a vector padded with -inf (exp gives 0, adding nothing to the sum) and written back
 * lane-exactly. Register budget: a handful of q registers besides SLEEF's own. */
#include <math.h>
#include <sleef.h>

#include "kernels/arm/neon/kernels_neon.h"
#include "kernels/arm/neon/simd_neon.h"

void mh_f32_softmax_tile__neon(size_t rows, size_t cols, float* s, size_t lds, float* m, float* l,
                               float* alpha) {
    const size_t full = cols & ~(size_t)3, tail = cols - full;
    for (size_t r = 0; r < rows; r++) {
        float* row = s + r * lds;
        float32x4_t vmax = vdupq_n_f32(m[r]);
        for (size_t c = 0; c < full; c += 4) vmax = vmaxnmq_f32(vmax, vld1q_f32(row + c));
        if (tail) vmax = vmaxnmq_f32(vmax, mh_loadf_n(row + full, tail, -INFINITY));
        const float mx = vmaxnmvq_f32(vmax);
        if (mx == -INFINITY) { /* nothing kept yet: keep the state, zero the tile */
            for (size_t c = 0; c < full; c += 4) vst1q_f32(row + c, vdupq_n_f32(0.0f));
            if (tail) mh_storef_n(row + full, vdupq_n_f32(0.0f), tail);
            alpha[r] = 1.0f;
            continue;
        }
        const float32x4_t vmx = vdupq_n_f32(mx);
        float32x4_t sum = vdupq_n_f32(0.0f);
        for (size_t c = 0; c < full; c += 4) { /* exp(-inf) = 0 for dropped keys */
            const float32x4_t x = vld1q_f32(row + c);
            /* 4 dropped keys (masked/causal runs) are 0 without an exp: the same bits, since
             * exp(-inf) = 0 and adding +0 leaves the sum unchanged */
            if (vmaxvq_u32(vmvnq_u32(vceqq_f32(x, vdupq_n_f32(-INFINITY)))) == 0) {
                vst1q_f32(row + c, vdupq_n_f32(0.0f));
                continue;
            }
            const float32x4_t e = Sleef_expf4_u10advsimd(vsubq_f32(x, vmx));
            vst1q_f32(row + c, e);
            sum = vaddq_f32(sum, e);
        }
        if (tail) {
            const float32x4_t e = Sleef_expf4_u10advsimd(vsubq_f32(mh_loadf_n(row + full, tail, -INFINITY), vmx));
            mh_storef_n(row + full, e, tail);
            sum = vaddq_f32(sum, e);
        }
        alpha[r] = expf(m[r] - mx); /* m[r] = -inf on the first kept tile gives 0 */
        l[r] = l[r] * alpha[r] + vaddvq_f32(sum);
        m[r] = mx;
    }
}
