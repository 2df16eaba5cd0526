/* f32 -> f16 / bf16 with round to nearest even, vector-length agnostic, svwhilelt tails.
 * f16: FCVT under the default FPCR (round to nearest even, overflow to inf, NaN stays a quiet
 * NaN), result in the low half of each 32-bit lane, stored with ST1H. bf16: integer rounding,
 * NaN quieted. */
#include "kernels/arm/sve/kernels_sve.h"
#include "kernels/arm/sve/simd_sve.h"

void mh_f32_to_f16__sve(size_t n, const float* x, uint16_t* y) {
    const size_t vl = svcntw();
    for (size_t i = 0; i < n; i += vl) {
        const svbool_t pg = mh_pred(i, n);
        const svfloat16_t h = svcvt_f16_f32_x(pg, svld1_f32(pg, x + i));
        svst1h_u32(pg, y + i, svreinterpret_u32_f16(h));
    }
}

void mh_f32_to_bf16__sve(size_t n, const float* x, uint16_t* y) {
    const size_t vl = svcntw();
    for (size_t i = 0; i < n; i += vl) {
        const svbool_t pg = mh_pred(i, n);
        const svfloat32_t v = svld1_f32(pg, x + i);
        const svuint32_t u = svreinterpret_u32_f32(v);
        const svuint32_t lsb = svand_n_u32_x(pg, svlsr_n_u32_x(pg, u, 16), 1);
        svuint32_t r = svadd_u32_x(pg, u, svadd_n_u32_x(pg, lsb, 0x7fff));
        /* NaN: keep the top bits and set the quiet bit instead of rounding */
        r = svsel_u32(svcmpuo_f32(pg, v, v), svorr_n_u32_x(pg, u, 0x400000), r);
        svst1h_u32(pg, y + i, svlsr_n_u32_x(pg, r, 16));
    }
}
