/* The SVE SIMD vocabulary (the names every simd_<isa>.h defines, docs/kernels.md "SIMD
 * vocabulary"; the lane count MH_VL is read at run time) and this ISA's own helpers:
 * predicated widening loads and gathers of any K/V storage dtype. Only included by files
 * compiled with +sve. Every tail is a svwhilelt predicate: inactive lanes are neither read nor
 * written, and loads give 0 there. */
#ifndef MH_SIMD_SVE_H
#define MH_SIMD_SVE_H
#include <arm_sve.h>
#include <math.h>
#include <sleef.h>
#include <stdint.h>

#include "multihead.h"
#include "util/dtype.h"

#define MH_INLINE static inline __attribute__((always_inline))

/* GEMM micro-tile (f32_gemm_6x4vl_sve.c): 6 rows x 4 vectors, NR = 4 * svcntw() (16 at
 * 128-bit SVE, 64 at 512-bit); the vector length is fixed for the life of the process. */
#define MH_GEMM_MR 6
#define MH_SVE_GEMM_NV 4
#define MH_GEMM_NR ((size_t)MH_SVE_GEMM_NV * svcntw())

typedef svfloat32_t mh_vf;
#define MH_VL ((size_t)svcntw())
/* softmax_tile stores 0 for a full vector of dropped keys without an exp (simd_neon.h). */
#define MH_SOFTMAX_SKIP_DROPPED 1
/* head_mix: the last, partial vector is predicated (simd_neon.h). */
#define MH_HEAD_MIX_SCALAR_TAIL 0

/* Lanes of the vector starting at element `start` that lie below `n`. */
MH_INLINE svbool_t mh_pred(size_t start, size_t n) { return svwhilelt_b32_u64(start, n); }

/* Halves zero-extended into 32-bit lanes, to f32 (all lanes computed, so 0 stays 0). */
MH_INLINE svfloat32_t mh_widen(svuint32_t h, mh_dtype dtype) {
    const svbool_t all = svptrue_b32();
    if (dtype == MH_DTYPE_F16) /* FCVT converts the low (even) half of each 32-bit lane */
        return svcvt_f32_f16_x(all, svreinterpret_f16_u32(h));
    return svreinterpret_f32_u32(svlsl_n_u32_x(all, h, 16));
}

/* One vector of a `dtype` array at `p`: lanes outside `pg` read nothing and give 0. */
MH_INLINE svfloat32_t mh_load(svbool_t pg, const void* p, mh_dtype dtype) {
    if (dtype == MH_DTYPE_F32) return svld1_f32(pg, (const float*)p);
    if (dtype == MH_DTYPE_I8) /* sign-extending byte load, then an exact convert */
        return svcvt_f32_s32_x(svptrue_b32(), svld1sb_s32(pg, (const int8_t*)p));
    return mh_widen(svld1uh_u32(pg, (const uint16_t*)p), dtype);
}

/* Gather: lane j = element idx[j] of a `dtype` array at `p` (0 outside `pg`). */
MH_INLINE svfloat32_t mh_gather(svbool_t pg, const void* p, svint32_t idx, mh_dtype dtype) {
    if (dtype == MH_DTYPE_F32) return svld1_gather_s32index_f32(pg, (const float*)p, idx);
    if (dtype == MH_DTYPE_I8) /* byte elements: the index is the byte offset */
        return svcvt_f32_s32_x(svptrue_b32(), svld1sb_gather_s32offset_s32(pg, (const int8_t*)p, idx));
    return mh_widen(svld1uh_gather_s32index_u32(pg, (const uint16_t*)p, idx), dtype);
}

MH_INLINE svfloat32_t mh_vzero(void) { return svdup_n_f32(0.0f); }
MH_INLINE svfloat32_t mh_vset1(float x) { return svdup_n_f32(x); }
MH_INLINE svfloat32_t mh_vload(const float* p) { return svld1_f32(svptrue_b32(), p); }
MH_INLINE void mh_vstore(float* p, svfloat32_t v) { svst1_f32(svptrue_b32(), p, v); }
/* The first n (< MH_VL) floats at p, `fill` in the other lanes; reads only n. */
MH_INLINE svfloat32_t mh_vload_n(const float* p, size_t n, float fill) {
    const svbool_t pg = mh_pred(0, n);
    return svsel_f32(pg, svld1_f32(pg, p), svdup_n_f32(fill));
}
/* Stores the first n (< MH_VL) lanes; writes only n. */
MH_INLINE void mh_vstore_n(float* p, svfloat32_t v, size_t n) { svst1_f32(mh_pred(0, n), p, v); }
MH_INLINE svfloat32_t mh_vload_dt(const void* p, mh_dtype dtype) { return mh_load(svptrue_b32(), p, dtype); }
MH_INLINE svfloat32_t mh_vload_dt_n(const void* p, mh_dtype dtype, size_t n) { return mh_load(mh_pred(0, n), p, dtype); }
MH_INLINE svfloat32_t mh_vadd(svfloat32_t a, svfloat32_t b) { return svadd_f32_x(svptrue_b32(), a, b); }
MH_INLINE svfloat32_t mh_vsub(svfloat32_t a, svfloat32_t b) { return svsub_f32_x(svptrue_b32(), a, b); }
MH_INLINE svfloat32_t mh_vmul(svfloat32_t a, svfloat32_t b) { return svmul_f32_x(svptrue_b32(), a, b); }
MH_INLINE svfloat32_t mh_vfma(svfloat32_t a, svfloat32_t b, svfloat32_t c) { return svmla_f32_x(svptrue_b32(), c, a, b); }
MH_INLINE svfloat32_t mh_vmax(svfloat32_t a, svfloat32_t b) { return svmaxnm_f32_x(svptrue_b32(), a, b); }
MH_INLINE float mh_vhsum(svfloat32_t v) { return svaddv_f32(svptrue_b32(), v); }
MH_INLINE float mh_vhmax(svfloat32_t v) { return svmaxnmv_f32(svptrue_b32(), v); }
/* mh_vexp's words (generic/vexp.h): x raised to lo (FMAX: NaN stays NaN, unlike mh_vmax's
 * FMAXNM), rounded to the nearest integer, and p * 2^n (FSCALE, n integral; -inf converts
 * to the most negative integer: +0). */
MH_INLINE svfloat32_t mh_vclamp_lo(svfloat32_t x, float lo) { return svmax_f32_x(svptrue_b32(), svdup_n_f32(lo), x); }
MH_INLINE svfloat32_t mh_vround(svfloat32_t x) { return svrintn_f32_x(svptrue_b32(), x); }
MH_INLINE svfloat32_t mh_vscale2n(svfloat32_t p, svfloat32_t n) {
    const svbool_t all = svptrue_b32();
    return svscale_f32_x(all, p, svcvt_s32_f32_x(all, n));
}
MH_INLINE int mh_vall_neg_inf(svfloat32_t x) {
    const svbool_t all = svptrue_b32();
    return !svptest_any(all, svcmpne_n_f32(all, x, -INFINITY));
}
/* f32 -> f16 / bf16 with round to nearest even of the first n (<= MH_VL) elements. f16: FCVT
 * under the default FPCR (round to nearest even, overflow to inf, NaN stays a quiet NaN),
 * result in the low half of each 32-bit lane, stored with ST1H. bf16: integer rounding, NaN
 * quieted. */
MH_INLINE void mh_vcvt_f16_n(const float* x, uint16_t* y, size_t n) {
    const svbool_t pg = mh_pred(0, n);
    const svfloat16_t h = svcvt_f16_f32_x(pg, svld1_f32(pg, x));
    svst1h_u32(pg, y, svreinterpret_u32_f16(h));
}
MH_INLINE void mh_vcvt_bf16_n(const float* x, uint16_t* y, size_t n) {
    const svbool_t pg = mh_pred(0, n);
    const svfloat32_t v = svld1_f32(pg, x);
    const svuint32_t u = svreinterpret_u32_f32(v);
    const svuint32_t lsb = svand_n_u32_x(pg, svlsr_n_u32_x(pg, u, 16), 1);
    svuint32_t r = svadd_u32_x(pg, u, svadd_n_u32_x(pg, lsb, 0x7fff));
    r = svsel_u32(svcmpuo_f32(pg, v, v), svorr_n_u32_x(pg, u, 0x400000), r);
    svst1h_u32(pg, y, svlsr_n_u32_x(pg, r, 16));
}
MH_INLINE void mh_vcvt_f16(const float* x, uint16_t* y) { mh_vcvt_f16_n(x, y, MH_VL); }
MH_INLINE void mh_vcvt_bf16(const float* x, uint16_t* y) { mh_vcvt_bf16_n(x, y, MH_VL); }

/* int8 quantisation (generic/convert.c): |v|, a / b, and v clamped to [-127, 127], rounded to
 * nearest even (FRINTN) and stored as int8 (ST1B of the 32-bit lanes), n lanes / a full vector. */
MH_INLINE svfloat32_t mh_vabs(svfloat32_t v) { return svabs_f32_x(svptrue_b32(), v); }
MH_INLINE svfloat32_t mh_vdiv(svfloat32_t a, svfloat32_t b) { return svdiv_f32_x(svptrue_b32(), a, b); }
MH_INLINE void mh_vstore_i8_n(int8_t* y, svfloat32_t v, size_t n) {
    const svbool_t all = svptrue_b32(), pg = mh_pred(0, n);
    const svfloat32_t c = svminnm_n_f32_x(all, svmaxnm_n_f32_x(all, v, -127.0f), 127.0f);
    svst1b_s32(pg, y, svcvt_s32_f32_x(all, svrintn_f32_x(all, c)));
}
MH_INLINE void mh_vstore_i8(int8_t* y, svfloat32_t v) { mh_vstore_i8_n(y, v, MH_VL); }

/* rope (generic/rope.c): sin and cos of every lane (SLEEF's 1-ulp sincosf); the even and odd
 * elements of the 2*MH_VL elements a, b (a first), and back. */
MH_INLINE void mh_vsincos(svfloat32_t a, svfloat32_t* s, svfloat32_t* c) {
    const Sleef_svfloat32_t_2 r = Sleef_sincosfx_u10sve(a);
    *s = svget2_f32(r, 0), *c = svget2_f32(r, 1);
}
MH_INLINE void mh_vdeinterleave(svfloat32_t a, svfloat32_t b, svfloat32_t* ev, svfloat32_t* od) {
    *ev = svuzp1_f32(a, b), *od = svuzp2_f32(a, b);
}
MH_INLINE void mh_vinterleave(svfloat32_t ev, svfloat32_t od, svfloat32_t* a, svfloat32_t* b) {
    *a = svzip1_f32(ev, od), *b = svzip2_f32(ev, od);
}

#include "kernels/generic/vexp.h"

#endif
