#include "kernels/scalar/convert_scalar.h"

uint16_t mh_f32_to_bf16_rne(float f) {
    uint32_t u = mh_f32_to_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

uint16_t mh_f32_to_f16_rne(float f) {
    uint32_t u = mh_f32_to_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);  /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to >= 65520: inf */
    if (a >= 0x38800000u) {                                   /* normal half */
        uint32_t r = a - 0x38000000u;                         /* rebias 127 -> 15 */
        r += 0xfffu + ((r >> 13) & 1u);
        return (uint16_t)(sign | (r >> 13));
    }
    /* subnormal half (or zero): value / 2^-24, rounded to nearest even */
    if (a < 0x33000000u) return sign; /* below half the smallest subnormal */
    uint32_t exp = a >> 23, man = (a & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - exp; /* 14..24 */
    uint32_t half = man >> shift, rem = man & ((1u << shift) - 1u), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) half++;
    return (uint16_t)(sign | half);
}

void mh_load_row_f32__scalar(const void* row, mh_dtype dtype, size_t n, float* dst) {
    switch (dtype) {
    case MH_DTYPE_F16:
        for (size_t i = 0; i < n; i++) dst[i] = mh_f16_to_f32(((const uint16_t*)row)[i]);
        break;
    case MH_DTYPE_BF16:
        for (size_t i = 0; i < n; i++) dst[i] = mh_bf16_to_f32(((const uint16_t*)row)[i]);
        break;
    case MH_DTYPE_I8:
        for (size_t i = 0; i < n; i++) dst[i] = (float)((const int8_t*)row)[i];
        break;
    default:
        for (size_t i = 0; i < n; i++) dst[i] = ((const float*)row)[i];
    }
}
