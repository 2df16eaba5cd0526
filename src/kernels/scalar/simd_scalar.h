/* The scalar SIMD vocabulary (the names every simd_<isa>.h defines, docs/kernels.md "SIMD
 * vocabulary"): one-lane "vectors", so the generic kernels compiled for scalar are the plain
 * loops of the reference. Compiled without any ISA flag. */
#ifndef MH_SIMD_SCALAR_H
#define MH_SIMD_SCALAR_H
#include <math.h>
#include <sleef.h>
#include <stdint.h>

#include "kernels/scalar/convert_scalar.h"
#include "multihead.h"
#include "util/dtype.h"

#define MH_INLINE static inline __attribute__((always_inline))

/* GEMM micro-tile (f32_gemm_scalar.c). */
#define MH_GEMM_MR 4
#define MH_GEMM_NR 8

typedef float mh_vf;
#define MH_VL ((size_t)1)
#define MH_SOFTMAX_SKIP_DROPPED 0
/* head_mix: the last columns of fewer than a vector stay in the generic kernel (generic/head_mix.c). */
#define MH_HEAD_MIX_SCALAR_TAIL 0

MH_INLINE float mh_vzero(void) { return 0.0f; }
MH_INLINE float mh_vset1(float x) { return x; }
MH_INLINE float mh_vload(const float* p) { return *p; }
MH_INLINE void mh_vstore(float* p, float v) { *p = v; }
/* Partial vectors have no lane: n is always 0. */
MH_INLINE float mh_vload_n(const float* p, size_t n, float fill) { return n ? *p : fill; }
MH_INLINE void mh_vstore_n(float* p, float v, size_t n) {
    if (n) *p = v;
}
/* Element 0 of a `dtype` array, widened exactly. */
MH_INLINE float mh_vload_dt(const void* p, mh_dtype dtype) {
    switch (dtype) {
    case MH_DTYPE_F16: return mh_f16_to_f32(*(const uint16_t*)p);
    case MH_DTYPE_BF16: return mh_bf16_to_f32(*(const uint16_t*)p);
    case MH_DTYPE_I8: return (float)*(const int8_t*)p;
    default: return *(const float*)p;
    }
}
MH_INLINE float mh_vload_dt_n(const void* p, mh_dtype dtype, size_t n) { return n ? mh_vload_dt(p, dtype) : 0.0f; }
MH_INLINE float mh_vadd(float a, float b) { return a + b; }
MH_INLINE float mh_vsub(float a, float b) { return a - b; }
MH_INLINE float mh_vmul(float a, float b) { return a * b; }
MH_INLINE float mh_vfma(float a, float b, float c) { return a * b + c; }
MH_INLINE float mh_vmax(float a, float b) { return b > a ? b : a; }
MH_INLINE float mh_vhsum(float v) { return v; }
MH_INLINE float mh_vhmax(float v) { return v; }
MH_INLINE float mh_vexp(float x) { return expf(x); }
MH_INLINE void mh_vexp4(float* x0, float* x1, float* x2, float* x3) {
    *x0 = expf(*x0), *x1 = expf(*x1), *x2 = expf(*x2), *x3 = expf(*x3);
}
MH_INLINE int mh_vall_neg_inf(float x) { return x == -INFINITY; }
MH_INLINE void mh_vcvt_f16(const float* x, uint16_t* y) { *y = mh_f32_to_f16_rne(*x); }
MH_INLINE void mh_vcvt_bf16(const float* x, uint16_t* y) { *y = mh_f32_to_bf16_rne(*x); }
MH_INLINE void mh_vcvt_f16_n(const float* x, uint16_t* y, size_t n) {
    if (n) mh_vcvt_f16(x, y);
}
MH_INLINE void mh_vcvt_bf16_n(const float* x, uint16_t* y, size_t n) {
    if (n) mh_vcvt_bf16(x, y);
}

/* int8 quantisation (generic/convert.c): |v|, a / b, and v rounded to nearest even, clamped to
 * [-127, 127], stored as int8 (a full vector / the first n lanes). */
MH_INLINE float mh_vabs(float v) { return fabsf(v); }
MH_INLINE float mh_vdiv(float a, float b) { return a / b; }
MH_INLINE void mh_vstore_i8(int8_t* y, float v) {
    const float r = nearbyintf(v); /* the default rounding mode: nearest even */
    *y = (int8_t)(r > 127.0f ? 127.0f : r < -127.0f ? -127.0f : r);
}
MH_INLINE void mh_vstore_i8_n(int8_t* y, float v, size_t n) {
    if (n) mh_vstore_i8(y, v);
}

/* rope (generic/rope.c): sin and cos of every lane (SLEEF's 1-ulp sincosf); the even and odd
 * elements of the 2*MH_VL elements a, b (a first), and back. */
MH_INLINE void mh_vsincos(float a, float* s, float* c) {
    const Sleef_float2 r = Sleef_sincosf_u10(a);
    *s = r.x, *c = r.y;
}
MH_INLINE void mh_vdeinterleave(float a, float b, float* ev, float* od) { *ev = a, *od = b; }
MH_INLINE void mh_vinterleave(float ev, float od, float* a, float* b) { *a = ev, *b = od; }

#endif
