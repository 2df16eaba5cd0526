/* The NEON SIMD vocabulary (the names every simd_<isa>.h defines, docs/kernels.md "SIMD
 * vocabulary") and this ISA's own helpers: lane-exact partial loads and stores. Only included
 * by files compiled for aarch64. */
#ifndef MH_SIMD_NEON_H
#define MH_SIMD_NEON_H
#include <arm_neon.h>
#include <math.h>
#include <sleef.h>
#include <stdint.h>
#include <string.h>

#include "multihead.h"
#include "util/dtype.h"

#define MH_INLINE static inline __attribute__((always_inline))

/* GEMM micro-tile (f32_gemm_6x16_neon.c). */
#define MH_GEMM_MR 6
#define MH_GEMM_NR 16

typedef float32x4_t mh_vf;
#define MH_VL ((size_t)4)
/* softmax_tile stores 0 for a full vector of dropped keys (masked/causal runs) without an
 * exp: the same bits, since exp(-inf) = 0 and adding +0 leaves the sum unchanged. */
#define MH_SOFTMAX_SKIP_DROPPED 1
/* head_mix hands the last cols % 4 columns to the scalar kernel (unfused multiply-adds under GCC,
 * as NEON's head_mix always has) rather than a lane-exact partial vector (generic/head_mix.c). */
#define MH_HEAD_MIX_SCALAR_TAIL 1
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

/* The low 4 int8 lanes of b sign-extended to f32 (exact). */
MH_INLINE float32x4_t mh_widen4_i8(int8x8_t b) { return vcvtq_f32_s32(vmovl_s16(vget_low_s16(vmovl_s8(b)))); }

/* 4 elements of a `dtype` array at `p`. */
MH_INLINE float32x4_t mh_vload_dt(const void* p, mh_dtype dtype) {
    if (dtype == MH_DTYPE_F32) return vld1q_f32((const float*)p);
    if (dtype == MH_DTYPE_I8) { /* 4 bytes, no over-read */
        int32_t w;
        memcpy(&w, p, sizeof w);
        return mh_widen4_i8(vreinterpret_s8_s32(vdup_n_s32(w)));
    }
    return mh_widen4(vld1_u16((const uint16_t*)p), dtype);
}

/* The first n (0..4) elements of a `dtype` array at `p`, the other lanes 0; reads only n
 * (lane loads, no over-read). */
MH_INLINE float32x4_t mh_vload_dt_n(const void* p, mh_dtype dtype, size_t n) {
    if (n >= 4) return mh_vload_dt(p, dtype);
    if (dtype == MH_DTYPE_F32) {
        const float* f = (const float*)p;
        float32x4_t v = vdupq_n_f32(0.0f);
        if (n > 0) v = vld1q_lane_f32(f, v, 0);
        if (n > 1) v = vld1q_lane_f32(f + 1, v, 1);
        if (n > 2) v = vld1q_lane_f32(f + 2, v, 2);
        return v;
    }
    if (dtype == MH_DTYPE_I8) {
        const int8_t* b = (const int8_t*)p;
        int8x8_t v = vdup_n_s8(0);
        if (n > 0) v = vld1_lane_s8(b, v, 0);
        if (n > 1) v = vld1_lane_s8(b + 1, v, 1);
        if (n > 2) v = vld1_lane_s8(b + 2, v, 2);
        return mh_widen4_i8(v);
    }
    const uint16_t* h = (const uint16_t*)p;
    uint16x4_t v = vdup_n_u16(0);
    if (n > 0) v = vld1_lane_u16(h, v, 0);
    if (n > 1) v = vld1_lane_u16(h + 1, v, 1);
    if (n > 2) v = vld1_lane_u16(h + 2, v, 2);
    return mh_widen4(v, dtype);
}

/* The first n (0..4) floats at `p` (other lanes `fill`); reads only n. */
MH_INLINE float32x4_t mh_vload_n(const float* p, size_t n, float fill) {
    if (n >= 4) return vld1q_f32(p);
    float32x4_t v = vdupq_n_f32(fill);
    if (n > 0) v = vld1q_lane_f32(p, v, 0);
    if (n > 1) v = vld1q_lane_f32(p + 1, v, 1);
    if (n > 2) v = vld1q_lane_f32(p + 2, v, 2);
    return v;
}

/* Stores the first n (0..4) lanes of v at `p`; writes only n. */
MH_INLINE void mh_vstore_n(float* p, float32x4_t v, size_t n) {
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

MH_INLINE float32x4_t mh_vzero(void) { return vdupq_n_f32(0.0f); }
MH_INLINE float32x4_t mh_vset1(float x) { return vdupq_n_f32(x); }
MH_INLINE float32x4_t mh_vload(const float* p) { return vld1q_f32(p); }
MH_INLINE void mh_vstore(float* p, float32x4_t v) { vst1q_f32(p, v); }
MH_INLINE float32x4_t mh_vadd(float32x4_t a, float32x4_t b) { return vaddq_f32(a, b); }
MH_INLINE float32x4_t mh_vsub(float32x4_t a, float32x4_t b) { return vsubq_f32(a, b); }
MH_INLINE float32x4_t mh_vmul(float32x4_t a, float32x4_t b) { return vmulq_f32(a, b); }
MH_INLINE float32x4_t mh_vfma(float32x4_t a, float32x4_t b, float32x4_t c) { return vfmaq_f32(c, a, b); }
MH_INLINE float32x4_t mh_vmax(float32x4_t a, float32x4_t b) { return vmaxnmq_f32(a, b); }
MH_INLINE float mh_vhsum(float32x4_t v) { return vaddvq_f32(v); }
MH_INLINE float mh_vhmax(float32x4_t v) { return vmaxnmvq_f32(v); }
/* mh_vexp's words (generic/vexp.h): x raised to lo (FMAX: NaN stays NaN, unlike mh_vmax's
 * FMAXNM), rounded to the nearest integer, and p * 2^n for integral n in [-150, 128]: two
 * exact power-of-two factors of n/2 each, so one rounding, denormals and overflow included;
 * n below -253 (-inf: a dropped key) makes both factors +0, so p * 2^n is +0. */
MH_INLINE float32x4_t mh_vclamp_lo(float32x4_t x, float lo) { return vmaxq_f32(vdupq_n_f32(lo), x); }
MH_INLINE float32x4_t mh_vround(float32x4_t x) { return vrndnq_f32(x); }
MH_INLINE float32x4_t mh_vscale2n(float32x4_t p, float32x4_t n) {
    const int32x4_t ni = vmaxq_s32(vcvtnq_s32_f32(n), vdupq_n_s32(-254));
    const int32x4_t n1 = vshrq_n_s32(ni, 1), n2 = vsubq_s32(ni, n1);
    const int32x4_t bias = vdupq_n_s32(127);
    const float32x4_t s1 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n1, bias), 23));
    const float32x4_t s2 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n2, bias), 23));
    return vmulq_f32(vmulq_f32(p, s1), s2);
}
MH_INLINE int mh_vall_neg_inf(float32x4_t x) {
    return vmaxvq_u32(vmvnq_u32(vceqq_f32(x, vdupq_n_f32(-INFINITY)))) == 0;
}
/* f32 -> f16 / bf16 with round to nearest even. f16: FCVTN under the default FPCR (round to
 * nearest even, overflow to inf, NaN stays a quiet NaN). bf16: integer rounding, NaN quieted. */
MH_INLINE uint16x4_t mh_to_f16(float32x4_t v) { return vreinterpret_u16_f16(vcvt_f16_f32(v)); }
MH_INLINE uint16x4_t mh_to_bf16(float32x4_t v) {
    const uint32x4_t u = vreinterpretq_u32_f32(v);
    const uint32x4_t lsb = vandq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(1));
    const uint32x4_t rounded = vaddq_u32(u, vaddq_u32(vdupq_n_u32(0x7fff), lsb));
    /* NaN: keep the top bits and set the quiet bit instead of rounding */
    const uint32x4_t quiet = vorrq_u32(u, vdupq_n_u32(0x400000));
    const uint32x4_t is_num = vceqq_f32(v, v);
    return vshrn_n_u32(vbslq_u32(is_num, rounded, quiet), 16);
}
MH_INLINE void mh_vcvt_f16(const float* x, uint16_t* y) { vst1_u16(y, mh_to_f16(vld1q_f32(x))); }
MH_INLINE void mh_vcvt_bf16(const float* x, uint16_t* y) { vst1_u16(y, mh_to_bf16(vld1q_f32(x))); }
/* The first n (< 4) elements: lane-exact partial load and store. */
MH_INLINE void mh_vcvt_f16_n(const float* x, uint16_t* y, size_t n) {
    mh_store_u16_n(y, mh_to_f16(mh_vload_n(x, n, 0.0f)), n);
}
MH_INLINE void mh_vcvt_bf16_n(const float* x, uint16_t* y, size_t n) {
    mh_store_u16_n(y, mh_to_bf16(mh_vload_n(x, n, 0.0f)), n);
}

/* int8 quantisation (generic/convert.c): |v|, a / b, and v clamped to [-127, 127], rounded to
 * nearest even (FCVTNS) and stored as int8, n (0..4) lanes / a full vector. */
MH_INLINE float32x4_t mh_vabs(float32x4_t v) { return vabsq_f32(v); }
MH_INLINE float32x4_t mh_vdiv(float32x4_t a, float32x4_t b) { return vdivq_f32(a, b); }
MH_INLINE void mh_vstore_i8_n(int8_t* y, float32x4_t v, size_t n) {
    const float32x4_t c = vminq_f32(vmaxq_f32(v, vdupq_n_f32(-127.0f)), vdupq_n_f32(127.0f));
    const int16x4_t h = vmovn_s32(vcvtnq_s32_f32(c));
    const int8x8_t b = vmovn_s16(vcombine_s16(h, h));
    if (n > 0) vst1_lane_s8(y, b, 0);
    if (n > 1) vst1_lane_s8(y + 1, b, 1);
    if (n > 2) vst1_lane_s8(y + 2, b, 2);
    if (n > 3) vst1_lane_s8(y + 3, b, 3);
}
MH_INLINE void mh_vstore_i8(int8_t* y, float32x4_t v) { mh_vstore_i8_n(y, v, 4); }

/* rope (generic/rope.c): sin and cos of every lane (SLEEF's 1-ulp sincosf); the even and odd
 * elements of the 2*MH_VL elements a, b (a first), and back. */
MH_INLINE void mh_vsincos(float32x4_t a, float32x4_t* s, float32x4_t* c) {
    const Sleef_float32x4_t_2 r = Sleef_sincosf4_u10advsimd(a);
    *s = r.x, *c = r.y;
}
MH_INLINE void mh_vdeinterleave(float32x4_t a, float32x4_t b, float32x4_t* ev, float32x4_t* od) {
    *ev = vuzp1q_f32(a, b), *od = vuzp2q_f32(a, b);
}
MH_INLINE void mh_vinterleave(float32x4_t ev, float32x4_t od, float32x4_t* a, float32x4_t* b) {
    *a = vzip1q_f32(ev, od), *b = vzip2q_f32(ev, od);
}

#include "kernels/generic/vexp.h"

#endif
