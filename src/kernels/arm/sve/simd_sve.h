/* SVE helpers shared by this ISA's kernels: vector-length-agnostic predicated widening loads
 * of any K/V storage dtype. Only included by files compiled with +sve. Every tail is a
 * svwhilelt predicate: inactive lanes are neither read nor written, and loads give 0 there. */
#ifndef MH_SIMD_SVE_H
#define MH_SIMD_SVE_H
#include <arm_sve.h>

#include "multihead.h"
#include "util/dtype.h"

#define MH_INLINE static inline __attribute__((always_inline))

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
    return mh_widen(svld1uh_u32(pg, (const uint16_t*)p), dtype);
}

/* Gather: lane j = element idx[j] of a `dtype` array at `p` (0 outside `pg`). */
MH_INLINE svfloat32_t mh_gather(svbool_t pg, const void* p, svint32_t idx, mh_dtype dtype) {
    if (dtype == MH_DTYPE_F32) return svld1_gather_s32index_f32(pg, (const float*)p, idx);
    return mh_widen(svld1uh_gather_s32index_u32(pg, (const uint16_t*)p, idx), dtype);
}

#endif
