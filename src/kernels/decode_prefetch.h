/*
 * The decode kernels' software prefetch (kernels.md, "Decode kernels"), one rule for every
 * ISA, by what bounds the kernel and what the CPU's hardware prefetchers do (the table's
 * mh_prefetch_rule, mh_cpu_decode_prefetch):
 *  - one or two query rows per K/V row (MHA) stream memory: on AMD the hardware prefetchers
 *    follow the kernels' address order, and a software prefetch only takes their miss slots
 *    (up to 3x slower on Zen 4; MHA f16 at 32K keys on Zen 5: 21.3 against 15.8 ms). Intel's
 *    Xeons are prefetched (ALL): their L2 streamer stops at every 4 KiB page and leaves one
 *    core at about 80% of its bandwidth (MHA f16 decode at 32K keys, 1 thread: 51.6 -> 40.9
 *    ms, 99% of the read probe; int8 31.6 -> 21.1 ms);
 *  - three or more rows (grouped heads) are bound by the core: their rows are prefetched so
 *    the FMAs do not wait on L3 or DRAM. Into L2, MH_NEAR_PREFETCH_KEYS ahead, on Zen 4 (L2)
 *    and Intel (ALL): GQA-8 1.4x faster than no prefetch in L3 on Zen 4, 1.35x faster than a
 *    prefetch into L1 from DRAM; the distance must cover a loaded DRAM miss (GQA-8 f16 decode
 *    at 32K keys, Zen 4: 9.5 ms 12 keys ahead, 8.1 ms at 24, 8.0 ms from 48 to 128). Zen 5
 *    (L1) takes them into L1, MH_NEAR_PREFETCH_KEYS_L1 ahead: its prefetches into L2 stall on
 *    the core's miss buffers (a quarter of the kernels' samples sat on the instruction after
 *    one), and GQA-8 at 32K keys, 1 thread, alternated over 3 rounds, took 0.70x the time of
 *    the L2 rule with f16 K/V, 0.76x f32, 0.89x int8, 0.71x with three rows per K/V head (an
 *    earlier comparison of 8, 16, 24 and 32 keys ahead into L1: 0.85/0.80/0.88/1.02x, f16);
 *  - AMD Zen 3 (TURN: the L2 rule, and on top) takes turns of K and V badly: two streams
 *    read in alternate runs of 4 KiB or more at 13-15 GB/s against 19-21 GB/s in runs of
 *    1 KiB (a widen-and-FMA loop over f16, 1 thread): its hardware prefetchers follow only
 *    the stream being read. In a pipelined decode (core/driver.c, turns of pipe_keys() keys)
 *    whose turns span MH_TURN_PREFETCH_BYTES or more of K, each kernel prefetches the other
 *    stream's next turn (Q.K^T the V rows P.V reads next, P.V the next turn's K rows) into
 *    L2, row c with its own row c, for every row count, instead of its own stream ahead: f16
 *    decode at 32K keys, 128 dims, MHA 0.83-0.84x the time, two or four query rows per K/V
 *    row 0.74-0.77x, f32 0.75-0.95x; on turns of 1-2 KiB (int8 rows, 64 f16 dims) MHA
 *    int8 0.78-0.95x, f16 at 64 dims 0.92x, GQA-8 0.97-1.0x; turns under 1 KiB are not
 *    measured, hence the threshold (docs/kernels.md, "Decode kernels");
 *  - row sets read in turn tile by tile (mh_rows.interleaved: CollabHead's 16 per-head V
 *    streams) outnumber the streams the hardware follows: near rows are prefetched into L2 as
 *    grouped heads' are on Zen 4, on every CPU;
 *  - rows kilobytes apart (an engine's token-major cache) get no hardware prefetch across
 *    pages. The driver then reads every head's tile in turn and names, in x->next, the tile
 *    MH_FAR_PREFETCH_STREAMS heads later, whose row c is fetched into L2 with row c here
 *    (some 100 KiB of traffic ahead), or on a dense cache a run of the next key tile's bytes
 *    (x->next_ld: rows of this row's length), so that every head's rows of that tile are
 *    requested in address order (core/driver_across.c, region_ahead); without x->next, the row
 *    MH_FAR_PREFETCH_KEYS keys ahead. The same head's next tile would be read only after
 *    every other head's: a megabyte later with 32 heads of 128 f16 dims, the size of Zen 4's
 *    L2 (MHA f16 at 4K keys, token-major, Zen 4: 3.7 ms with it, 3.1 ms four heads ahead; the
 *    next head's tile, whose lines sit next to the ones being read, 4.5 ms).
 * Plain C (a GCC/Clang builtin): included by ISA-flagged kernel sources. A prefetch never
 * faults, so rows past the tile or the tensor are harmless.
 */
#ifndef MH_KERNELS_DECODE_PREFETCH_H
#define MH_KERNELS_DECODE_PREFETCH_H
#include "kernels/kernels.h"
#include "util/dtype.h"

#define MH_FAR_PREFETCH_KEYS 64  /* one key tile: the next tile's rows while this one runs */
#define MH_FAR_PREFETCH_STREAMS 4 /* a decode across streams prefetches this many tiles ahead */
#define MH_NEAR_PREFETCH_KEYS 48   /* about 1000 cycles of grouped-head work ahead */
#define MH_NEAR_PREFETCH_KEYS_L1 16 /* the L1 rule's distance (Zen 5) */
#define MH_NEAR_PREFETCH_ROWS 3    /* query rows from which near rows are prefetched */
#define MH_HEADS_PREFETCH_BYTES 8192 /* the kernels across heads' distance, in address order */
#define MH_TURN_PREFETCH_BYTES 1024 /* the least turn of K rows the TURN rule prefetches across */

/* Every cache line of bytes [0, bytes) from p into L2, the level of the rules above (also the
 * driver's prefetch of a packed decode's next tile). */
static inline __attribute__((always_inline)) void mh_prefetch_l2(const void* p, size_t bytes) {
    for (size_t off = 0; off < bytes; off += 64) __builtin_prefetch((const char*)p + off, 0, 2);
}

/* The same into L1. */
static inline __attribute__((always_inline)) void mh_prefetch_l1(const void* p, size_t bytes) {
    for (size_t off = 0; off < bytes; off += 64) __builtin_prefetch((const char*)p + off, 0, 3);
}

/* The prefetch for key c of a kernel with `rows` query rows reading x (of dtype, the kernel's
 * constant): a row ahead, one prefetch per cache line, by the rules above. always_inline: GCC
 * otherwise finds the function free of side effects (a prefetch has none it can see) and
 * deletes its calls. */
static inline __attribute__((always_inline)) void mh_decode_prefetch(const mh_rows* x, mh_dtype dtype, size_t c,
                                                                     size_t row_elems, size_t rows) {
    const size_t bytes = row_elems * mh_dtype_size(dtype);
    if (x->next || x->ld != (ptrdiff_t)row_elems) { /* far rows, or TURN's other stream */
        mh_prefetch_l2(x->next ? mh_dtype_at(x->next, dtype, (ptrdiff_t)c * (x->next_ld ? x->next_ld : x->ld))
                               : mh_dtype_at(x->data, dtype, (ptrdiff_t)(c + MH_FAR_PREFETCH_KEYS) * x->ld),
                       bytes);
        return;
    }
    const int grouped = rows >= MH_NEAR_PREFETCH_ROWS;
    if (grouped && x->prefetch == MH_PREFETCH_L1 && !x->interleaved)
        mh_prefetch_l1(mh_dtype_at(x->data, dtype, (ptrdiff_t)(c + MH_NEAR_PREFETCH_KEYS_L1) * x->ld), bytes);
    else if (grouped || x->interleaved || x->prefetch == MH_PREFETCH_ALL)
        mh_prefetch_l2(mh_dtype_at(x->data, dtype, (ptrdiff_t)(c + MH_NEAR_PREFETCH_KEYS) * x->ld), bytes);
}

/* The prefetch for a row of the kernels across heads (qk_heads, pv_heads), which walk an
 * engine's token-major cache in address order: the line MH_HEADS_PREFETCH_BYTES ahead of each
 * of the row's, into L1, on every CPU. */
static inline __attribute__((always_inline)) void mh_heads_prefetch(mh_dtype dtype, const void* row, size_t row_elems) {
    mh_prefetch_l1((const char*)row + MH_HEADS_PREFETCH_BYTES, row_elems * mh_dtype_size(dtype));
}

/* A P.V that reads each row in several column passes (AVX2 with 16 registers: 64 of 128
 * columns at a time) touches, in its first pass, the row's columns [from, row_elems) too:
 * the rows then leave memory in address order, like a kernel that reads them whole, and the
 * later passes find them in L1. Without it the first pass reads every other pair of lines,
 * which the hardware prefetchers do not follow as a stream. */
static inline __attribute__((always_inline)) void mh_decode_prefetch_rest(const mh_rows* x, mh_dtype dtype, size_t c,
                                                                          size_t from, size_t row_elems) {
    const char* row = mh_dtype_at(x->data, dtype, (ptrdiff_t)c * x->ld);
    const size_t end = row_elems * mh_dtype_size(dtype);
    for (size_t off = from * mh_dtype_size(dtype); off < end; off += 64) __builtin_prefetch(row + off, 0, 3);
}

#endif
