/*
 * Decode kernels' prefetch of K/V rows far apart (kernels.md, "Decode kernels"): rows next to
 * each other are left to the hardware prefetchers, which stream them in address order;
 * rows kilobytes apart (an engine's token-major cache) are fetched MH_FAR_PREFETCH_KEYS keys
 * ahead into L2, since no hardware prefetcher follows such strides across pages. Plain C
 * (GCC/Clang builtin): included by ISA-flagged kernel sources.
 */
#ifndef MH_KERNELS_FAR_ROWS_H
#define MH_KERNELS_FAR_ROWS_H
#include "kernels/kernels.h"
#include "util/dtype.h"

#define MH_FAR_PREFETCH_KEYS 64 /* one key tile: the next tile's rows while this one runs */

/* Row c + MH_FAR_PREFETCH_KEYS of x (row_elems elements), when rows are not contiguous. A
 * prefetch never faults, so rows past the tile or the tensor are harmless. */
static inline void mh_prefetch_far(const mh_rows* x, size_t c, size_t row_elems) {
    if (x->ld == (ptrdiff_t)row_elems) return;
    const char* row = mh_dtype_at(x->data, x->dtype, (ptrdiff_t)(c + MH_FAR_PREFETCH_KEYS) * x->ld);
    const size_t bytes = row_elems * mh_dtype_size(x->dtype);
    for (size_t off = 0; off < bytes; off += 64) __builtin_prefetch(row + off, 0, 2); /* into L2 */
}

#endif
