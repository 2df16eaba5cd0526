/* DCMHA composition, one key at a time (the reference; contract in kernels.h). The SIMD
 * kernels hand their column tails to it. */
#include "kernels/kernel_protos.h"
#include "kernels/scalar/simd_scalar.h"

void MH_KNAME(head_mix)(const mh_head_mix_factors* f, size_t cols, const float* a, size_t lda,
                         const float* ascale, float* out, size_t ldo) {
    const size_t g = f->g, R = f->rank, ldk = f->ldk;
    for (size_t c = 0; c < cols; c++) {
        float hq[MH_HEAD_MIX_MAX_RANK] = {0}, hk[MH_HEAD_MIX_MAX_RANK] = {0};
        for (size_t m = 0; m < g; m++) {
            const float am = a[m * lda + c] * (ascale ? ascale[m] : 1.0f);
            for (size_t r = 0; r < R; r++) {
                hq[r] += f->qw1[r * g + m] * am;
                hk[r] += f->kw1[(r * g + m) * ldk + c] * am;
            }
        }
        for (size_t n = 0; n < g; n++) {
            const float an = a[n * lda + c] * (ascale ? ascale[n] : 1.0f);
            float acc = an * ((1.0f + f->qdd[n]) + f->kdd[n * ldk + c]);
            for (size_t r = 0; r < R; r++) acc += f->qw2[r * g + n] * hq[r];
            for (size_t r = 0; r < R; r++) acc += f->kw2[(r * g + n) * ldk + c] * hk[r];
            if (f->wb)
                for (size_t m = 0; m < g; m++)
                    acc += f->wb[m * g + n] * (a[m * lda + c] * (ascale ? ascale[m] : 1.0f));
            out[n * ldo + c] = acc;
        }
    }
}
