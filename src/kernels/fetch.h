/*
 * Rows a GEMM micro-kernel requests from memory while it computes, for its caller (the gemm
 * slots' `fetch`): data the caller reads or writes soon, which no hardware prefetcher brings
 * in time (the next K/V tile of a decode on the packed path; in prefill, the next task's query
 * rows, the task's output rows and the next head's K/V rows). The kernel requests a cache
 * line every MH_FETCH_EVERY steps of its reduction (or every step: MH_FETCH_DENSE), so the
 * requests trickle out at the pace of its arithmetic; issued in bursts between GEMM calls, they waited
 * for the core's miss buffers and held the core with them (docs/kernels.md, "Decode kernels").
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
    unsigned how;     /* flags: MH_FETCH_L2, MH_FETCH_DENSE */
} mh_fetch;

/* Values of k per requested line (the bf16 kernels request one per k-pair: the same count).
 * Zen 5, MQA f16 decode at 32K keys: a line every 2 steps of the 6 x 64 AVX-512 kernel (24
 * cycles) covered a 64-key f16 tile within the tile's own GEMMs. */
#define MH_FETCH_EVERY 2

/* mh_fetch.how: into L2 (else L1), the CPU's decode prefetch rule. */
#define MH_FETCH_L2 1u
/* mh_fetch.how: the f32 kernels request a line at every step, twice the usual rate, where the
 * caller has more lines than the calls' steps over MH_FETCH_EVERY (mh_fetch_spread). The bf16
 * kernels keep one line per k-pair: in bf16 compute the tile's GEMMs take half the time, and
 * the whole next tile requested within them made MQA decode with f32 K/V no faster (Zen 5,
 * 0.99-1.07x the time, slower while the host's memory was contended). */
#define MH_FETCH_DENSE 2u

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
    if (f->how & MH_FETCH_L2)
        __builtin_prefetch(f->p + f->off, 0, 2);
    else
        __builtin_prefetch(f->p + f->off, 0, 3);
    f->off += 64;
    if (f->off >= f->row_bytes) f->off = 0, f->p += f->stride, f->rows--;
}

/* Step kk of an f32 kernel's reduction: a line every MH_FETCH_EVERY steps, or every step. */
static inline __attribute__((always_inline)) void mh_fetch_step(mh_fetch* f, size_t kk) {
    if (kk % MH_FETCH_EVERY == 0 || (f->how & MH_FETCH_DENSE)) mh_fetch_line(f);
}

/* The same with the rate a constant, for a kernel that runs one copy of its reduction loop per
 * rate (`every` = 1 if mh_fetch_dense, else MH_FETCH_EVERY): in the AVX-512 and AVX2 kernels
 * the test of `how` at every step took one more general register inside the loop, where the
 * 6 x 64 AVX-512 kernel has none to spare (its row pointers then went to the stack). */
static inline int mh_fetch_dense(const mh_fetch* f) { return (f->how & MH_FETCH_DENSE) != 0; }
/* Whether f has any line to request. The f32 GEMM kernels (AVX2, AVX-512) run a call without
 * (every projection GEMM, and a tile's later calls once its fetch is all requested) through a
 * copy of their reduction with `every` 0, which requests nothing and keeps no fetch state in
 * registers through the loop (docs/kernels.md, "Register budgets"). */
static inline int mh_fetch_any(const mh_fetch* f) { return f->rows != 0; }
static inline __attribute__((always_inline)) void mh_fetch_step_every(mh_fetch* f, size_t kk, const size_t every) {
    if (every && kk % every == 0) mh_fetch_line(f);
}

/* Sets MH_FETCH_DENSE on f if its lines outnumber the lines that calls of `steps` values of k
 * in all request at the usual rate, and a line at every step requests them all. Where not even
 * that does, memory bounds the calls more than their arithmetic, and requests at twice the rate
 * only queue for the core's miss buffers (Zen 5, 16 and 8 query rows per K/V head on f32 rows:
 * 1.03x and 0.98x the time of the usual rate). */
static inline void mh_fetch_spread(mh_fetch* f, size_t steps) {
    const size_t lines = f->rows * ((f->row_bytes + 63) / 64);
    if (lines > steps / MH_FETCH_EVERY && lines <= steps) f->how |= MH_FETCH_DENSE;
}

#endif
