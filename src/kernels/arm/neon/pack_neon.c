/* Packing K/V tiles of any storage dtype into f32 panels of 16 columns (4 q registers). */
#include "kernels/i8_rows.h"
#include "kernels/kernel_protos.h"
#include "kernels/arm/neon/simd_neon.h"

#define NR MH_GEMM_NR

/* In-register transpose of a 4 x 4 block: TRN1/TRN2 on 32-bit, then on 64-bit lanes. */
MH_INLINE void transpose4(float32x4_t r[4]) {
    const float32x4_t t0 = vtrn1q_f32(r[0], r[1]), t1 = vtrn2q_f32(r[0], r[1]);
    const float32x4_t t2 = vtrn1q_f32(r[2], r[3]), t3 = vtrn2q_f32(r[2], r[3]);
    r[0] = vreinterpretq_f32_f64(vtrn1q_f64(vreinterpretq_f64_f32(t0), vreinterpretq_f64_f32(t2)));
    r[1] = vreinterpretq_f32_f64(vtrn1q_f64(vreinterpretq_f64_f32(t1), vreinterpretq_f64_f32(t3)));
    r[2] = vreinterpretq_f32_f64(vtrn2q_f64(vreinterpretq_f64_f32(t0), vreinterpretq_f64_f32(t2)));
    r[3] = vreinterpretq_f32_f64(vtrn2q_f64(vreinterpretq_f64_f32(t1), vreinterpretq_f64_f32(t3)));
}

/* Groups of 4 keys: each 4 keys x 4 dims block is loaded (widened), transposed and stored as
 * 4 panel rows of 4 columns. Keys past `cols` and the rest of the last panel are zero. */
static void pack_any(size_t cols, size_t d, const void* k, ptrdiff_t ldk, mh_dtype dtype, float* dst) {
    const size_t groups = (cols + 3) / 4, padded = (cols + NR - 1) / NR * NR;
    for (size_t c0 = 0; c0 < groups * 4; c0 += 4) {
        float* panel = dst + (c0 / NR) * d * NR + c0 % NR;
        for (size_t d0 = 0; d0 < d; d0 += 4) {
            const size_t nd = mh_cnt4(d, d0);
            float32x4_t r[4];
            MH_UNROLL(16) for (size_t i = 0; i < 4; i++)
                r[i] = c0 + i < cols ? mh_vload_dt_n(mh_dtype_at(k, dtype, (ptrdiff_t)(c0 + i) * ldk + (ptrdiff_t)d0), dtype, nd)
                                     : vdupq_n_f32(0.0f);
            transpose4(r);
            MH_UNROLL(16) for (size_t i = 0; i < 4; i++)
                if (i < nd) vst1q_f32(panel + (d0 + i) * NR, r[i]);
        }
    }
    for (size_t c0 = groups * 4; c0 < padded; c0 += 4) { /* zero the rest of the last panel */
        float* panel = dst + (c0 / NR) * d * NR + c0 % NR;
        for (size_t dd = 0; dd < d; dd++) vst1q_f32(panel + dd * NR, vdupq_n_f32(0.0f));
    }
}

void MH_KNAME(pack_kt)(size_t cols, size_t d, const mh_rows* k, float* dst) {
    pack_any(cols, d, k->data, k->ld, k->dtype, dst);
    if (k->dtype == MH_DTYPE_I8) mh_i8_scale_kt(cols, d, NR, k, dst);
}
