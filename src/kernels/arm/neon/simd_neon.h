/* NEON helpers shared by this ISA's kernels: widening loads of any K/V storage dtype and
 * partial (tail) loads and stores that touch only the elements asked for. Only included by
 * files compiled for aarch64. */
#ifndef MH_SIMD_NEON_H
#define MH_SIMD_NEON_H
#include <arm_neon.h>

#include "multihead.h"
#include "util/dtype.h"

#define MH_INLINE static inline __attribute__((always_inline))
/* Loops over arrays of vectors are unrolled completely so the arrays live in registers. */
#define MH_UNROLL _Pragma("GCC unroll 16")
/* GCC's pre-RA scheduler hoists the 6 broadcasts of A above the FMAs of a GEMM k step, which
 * needs 24 + 4 + 6 = 34 registers and spills an accumulator every step; without it the
 * kernel stays at 29 of 32 registers. */
#if defined(__GNUC__) && !defined(__clang__)
#define MH_NO_PRE_RA_SCHED __attribute__((optimize("no-schedule-insns")))
#else
#define MH_NO_PRE_RA_SCHED
#endif

/* f16 / bf16 halves to f32 (f16: FCVTL, exact; bf16: the bits shifted into the top half). */
MH_INLINE float32x4_t mh_widen4(uint16x4_t h, mh_dtype dtype) {
    if (dtype == MH_DTYPE_F16) return vcvt_f32_f16(vreinterpret_f16_u16(h));
    return vreinterpretq_f32_u32(vshll_n_u16(h, 16));
}

/* 4 elements of a `dtype` array at `p`. */
MH_INLINE float32x4_t mh_load4(const void* p, mh_dtype dtype) {
    if (dtype == MH_DTYPE_F32) return vld1q_f32((const float*)p);
    return mh_widen4(vld1_u16((const uint16_t*)p), dtype);
}

/* The first n (0..4) elements of a `dtype` array at `p`, the other lanes 0; reads only n
 * (lane loads, no over-read). */
MH_INLINE float32x4_t mh_load4_n(const void* p, mh_dtype dtype, size_t n) {
    if (n >= 4) return mh_load4(p, dtype);
    if (dtype == MH_DTYPE_F32) {
        const float* f = (const float*)p;
        float32x4_t v = vdupq_n_f32(0.0f);
        if (n > 0) v = vld1q_lane_f32(f, v, 0);
        if (n > 1) v = vld1q_lane_f32(f + 1, v, 1);
        if (n > 2) v = vld1q_lane_f32(f + 2, v, 2);
        return v;
    }
    const uint16_t* h = (const uint16_t*)p;
    uint16x4_t v = vdup_n_u16(0);
    if (n > 0) v = vld1_lane_u16(h, v, 0);
    if (n > 1) v = vld1_lane_u16(h + 1, v, 1);
    if (n > 2) v = vld1_lane_u16(h + 2, v, 2);
    return mh_widen4(v, dtype);
}

/* The first n (0..4) floats at `p` (other lanes `fill`); reads only n. */
MH_INLINE float32x4_t mh_loadf_n(const float* p, size_t n, float fill) {
    if (n >= 4) return vld1q_f32(p);
    float32x4_t v = vdupq_n_f32(fill);
    if (n > 0) v = vld1q_lane_f32(p, v, 0);
    if (n > 1) v = vld1q_lane_f32(p + 1, v, 1);
    if (n > 2) v = vld1q_lane_f32(p + 2, v, 2);
    return v;
}

/* Stores the first n (0..4) lanes of v at `p`; writes only n. */
MH_INLINE void mh_storef_n(float* p, float32x4_t v, size_t n) {
    if (n >= 4) {
        vst1q_f32(p, v);
        return;
    }
    if (n > 0) vst1q_lane_f32(p, v, 0);
    if (n > 1) vst1q_lane_f32(p + 1, v, 1);
    if (n > 2) vst1q_lane_f32(p + 2, v, 2);
}

/* Stores the first n (0..4) lanes of v at `p`; writes only n. */
MH_INLINE void mh_store_u16_n(uint16_t* p, uint16x4_t v, size_t n) {
    if (n >= 4) {
        vst1_u16(p, v);
        return;
    }
    if (n > 0) vst1_lane_u16(p, v, 0);
    if (n > 1) vst1_lane_u16(p + 1, v, 1);
    if (n > 2) vst1_lane_u16(p + 2, v, 2);
}

/* Elements left from `start` up to n, capped at 4. */
MH_INLINE size_t mh_cnt4(size_t n, size_t start) {
    return n <= start ? 0 : (n - start >= 4 ? 4 : n - start);
}

#endif
