/* K/V storage types: element size and addressing. Plain inline C, so every translation unit
 * (ISA-flagged kernels included) can use it. */
#ifndef MH_UTIL_DTYPE_H
#define MH_UTIL_DTYPE_H
#include <stddef.h>
#include <stdint.h>

#include "multihead.h"

/* Bytes of one element: f32 4, f16/bf16 2, int8 1. */
static inline size_t mh_dtype_size(mh_dtype t) {
    return t == MH_DTYPE_F32 ? sizeof(float) : t == MH_DTYPE_I8 ? sizeof(int8_t) : sizeof(uint16_t);
}

/* Address of element `index` of an array of `t`. */
static inline const void* mh_dtype_at(const void* base, mh_dtype t, ptrdiff_t index) {
    return (const unsigned char*)base + index * (ptrdiff_t)mh_dtype_size(t);
}

#endif
