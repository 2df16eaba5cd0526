/*
 * Rows a GEMM micro-kernel requests from memory while it computes, for its caller (the gemm
 * slots' `fetch`): data the caller reads or writes soon, which no hardware prefetcher brings
 * in time (the next K/V tile of a decode on the packed path; in prefill, the next task's query
 * rows, the task's output rows and the next head's K/V rows). The kernel requests one cache
 * line every MH_FETCH_EVERY steps of its reduction, so the requests trickle out at the pace of
 * its arithmetic; issued in bursts between GEMM calls, they waited for the core's miss buffers
 * and held the core with them (docs/kernels.md, "Decode kernels").
 */
#ifndef MH_KERNELS_FETCH_H
#define MH_KERNELS_FETCH_H
#include <stddef.h>

/* `rows` rows of row_bytes bytes, stride bytes apart, from p; advanced by the kernels. */
typedef struct mh_fetch {
    const char* p;    /* the current row */
    size_t off;       /* its next line's offset */
    size_t row_bytes;
    ptrdiff_t stride;
    size_t rows;      /* rows left, the current one included (0: nothing to fetch) */
    int l2;           /* into L2 (1) or L1 (0): the CPU's decode prefetch rule */
} mh_fetch;

/* Values of k per requested line (the bf16 kernels request one per k-pair: the same count).
 * Zen 5, MQA f16 decode at 32K keys: a line every 2 steps of the 6 x 64 AVX-512 kernel (24
 * cycles) covered a 64-key f16 tile within the tile's own GEMMs. */
#define MH_FETCH_EVERY 2

/* The kernel's working copy (kept in registers through its loop) and its write-back. */
static inline mh_fetch mh_fetch_begin(const mh_fetch* f) {
    if (f) return *f;
    const mh_fetch none = {NULL, 0, 0, 0, 0, 0};
    return none;
}
static inline void mh_fetch_end(mh_fetch* f, const mh_fetch* w) {
    if (f) *f = *w;
}

/* Requests the next line, if any. always_inline: a call whose only effect is a prefetch GCC
 * may otherwise drop (kernels/decode_prefetch.h). */
static inline __attribute__((always_inline)) void mh_fetch_line(mh_fetch* f) {
    if (!f->rows) return;
    if (f->l2)
        __builtin_prefetch(f->p + f->off, 0, 2);
    else
        __builtin_prefetch(f->p + f->off, 0, 3);
    f->off += 64;
    if (f->off >= f->row_bytes) f->off = 0, f->p += f->stride, f->rows--;
}

/* Step kk of an f32 kernel's reduction: a line every MH_FETCH_EVERY steps. */
static inline __attribute__((always_inline)) void mh_fetch_step(mh_fetch* f, size_t kk) {
    if (kk % MH_FETCH_EVERY == 0) mh_fetch_line(f);
}

#endif
