/* Overflow-checked size arithmetic: every size that reaches malloc or an index goes through
 * these. Each returns 1 on success and 0 (leaving *out untouched) on overflow. */
#ifndef MH_UTIL_CHECKED_H
#define MH_UTIL_CHECKED_H
#include <stddef.h>
#include <stdint.h>

/* The smaller of two sizes (a tile's length at the end of its range). */
static inline size_t mh_min_size(size_t a, size_t b) { return a < b ? a : b; }

static inline int mh_mul_size(size_t a, size_t b, size_t* out) {
    if (a != 0 && b > SIZE_MAX / a) return 0;
    *out = a * b;
    return 1;
}

static inline int mh_add_size(size_t a, size_t b, size_t* out) {
    if (b > SIZE_MAX - a) return 0;
    *out = a + b;
    return 1;
}

/* a * b * c with every partial product checked. */
static inline int mh_mul3_size(size_t a, size_t b, size_t c, size_t* out) {
    size_t ab;
    return mh_mul_size(a, b, &ab) && mh_mul_size(ab, c, out);
}

/* Rounds n up to a multiple of `align` (a power of two). */
static inline int mh_align_size(size_t n, size_t align, size_t* out) {
    if (n > SIZE_MAX - (align - 1)) return 0;
    *out = (n + align - 1) & ~(align - 1);
    return 1;
}

#endif
