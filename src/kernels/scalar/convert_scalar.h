/* Scalar f16/bf16 <-> f32 conversions, shared by the scalar kernels and vocabulary (and
 * usable as the tail path of SIMD ones). Round to nearest even on the way down; NaN stays NaN. */
#ifndef MH_CONVERT_SCALAR_H
#define MH_CONVERT_SCALAR_H
#include <stdint.h>
#include <string.h>

#include "multihead.h"

static inline float mh_bits_to_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint32_t mh_f32_to_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float mh_bf16_to_f32(uint16_t b) { return mh_bits_to_f32((uint32_t)b << 16); }

static inline float mh_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0x1f) return mh_bits_to_f32(sign | 0x7f800000u | (man << 13)); /* inf / NaN */
    if (exp != 0) return mh_bits_to_f32(sign | ((exp + 112) << 23) | (man << 13));
    /* zero or subnormal: man * 2^-24, exact in f32 */
    float v = (float)man * 5.9604644775390625e-8f;
    return sign ? -v : v;
}

uint16_t mh_f32_to_f16_rne(float f);
uint16_t mh_f32_to_bf16_rne(float f);

/* Widens n elements of a `dtype` row to f32 (the scalar kernels' load path). */
void mh_load_row_f32__scalar(const void* row, mh_dtype dtype, size_t n, float* dst);

#endif
