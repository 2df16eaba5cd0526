/* f32 -> f16 / bf16 with round to nearest even. f16: FCVTN under the default FPCR (round to
 * nearest even, overflow to inf, NaN stays a quiet NaN). bf16: integer rounding, NaN quieted.
 * The last < 4 elements go through a lane-exact partial load and store. */
#include "kernels/arm/neon/kernels_neon.h"
#include "kernels/arm/neon/simd_neon.h"

MH_INLINE uint16x4_t to_f16(float32x4_t v) { return vreinterpret_u16_f16(vcvt_f16_f32(v)); }

MH_INLINE uint16x4_t to_bf16(float32x4_t v) {
    const uint32x4_t u = vreinterpretq_u32_f32(v);
    const uint32x4_t lsb = vandq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(1));
    const uint32x4_t rounded = vaddq_u32(u, vaddq_u32(vdupq_n_u32(0x7fff), lsb));
    /* NaN: keep the top bits and set the quiet bit instead of rounding */
    const uint32x4_t quiet = vorrq_u32(u, vdupq_n_u32(0x400000));
    const uint32x4_t is_num = vceqq_f32(v, v);
    return vshrn_n_u32(vbslq_u32(is_num, rounded, quiet), 16);
}

void mh_f32_to_f16__neon(size_t n, const float* x, uint16_t* y) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        vst1_u16(y + i, to_f16(vld1q_f32(x + i)));
        vst1_u16(y + i + 4, to_f16(vld1q_f32(x + i + 4)));
    }
    for (; i + 4 <= n; i += 4) vst1_u16(y + i, to_f16(vld1q_f32(x + i)));
    if (i < n) mh_store_u16_n(y + i, to_f16(mh_loadf_n(x + i, n - i, 0.0f)), n - i);
}

void mh_f32_to_bf16__neon(size_t n, const float* x, uint16_t* y) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        vst1_u16(y + i, to_bf16(vld1q_f32(x + i)));
        vst1_u16(y + i + 4, to_bf16(vld1q_f32(x + i + 4)));
    }
    for (; i + 4 <= n; i += 4) vst1_u16(y + i, to_bf16(vld1q_f32(x + i)));
    if (i < n) mh_store_u16_n(y + i, to_bf16(mh_loadf_n(x + i, n - i, 0.0f)), n - i);
}
