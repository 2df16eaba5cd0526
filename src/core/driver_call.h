/*
 * One running driver call (driver-private): what its workers share, and the pieces of
 * core/driver.c the two-pass modes (core/driver_two_pass.c) build on.
 */
#ifndef MH_CORE_DRIVER_CALL_H
#define MH_CORE_DRIVER_CALL_H
#include "core/driver.h"
#include "core/driver_layout.h"
#include "core/split_kv.h"

/* Everything the workers of one call share; the stage first, so a hook's stage pointer leads
 * back to the call (mh_drv_packed). */
typedef struct mh_drv_call {
    mh_drv_stage st;
    mh_drv_call_ws cw;
    size_t n_tasks;
    mh_split_kv split; /* key chunks per task and their partial states */
    int stored;        /* two-pass: pass 2 reads pass 1's tiles from cw.store */
    int across;        /* one-pass decode on far-apart K/V rows: tiles outer, streams inner */
    long next[2];      /* the dynamic schedules (two-pass: one per pass) */
} mh_drv_call;

/* The K (v = 0) or V (v = 1) rows of batch row b, head h from key j0: the stage's views,
 * pages and dtypes. */
static inline mh_rows mh_drv_kv_rows(const mh_drv_stage* st, int v, size_t b, size_t h, int64_t j0) {
    return mh_drv_rows(st, v ? &st->value : &st->key, st->pages, v ? st->v_dtype : st->k_dtype, b, h, j0);
}

/* Task ti: the driver's geometry, then the stage's. */
mh_drv_task mh_drv_make_task(const mh_drv_call* c, size_t ti);

/* Empty softmax states (m = -inf, l = 0) and accumulators o for `rows` rows. */
void mh_drv_empty_rows(const mh_drv_stage* st, size_t rows, float* m, float* l, float* o);

/* The stage's queries, then empty softmax states and accumulators for `rows` rows. */
void mh_drv_start_rows(const mh_drv_stage* st, const mh_drv_task* t, size_t rows, mh_drv_scratch* sc);

/* Output row ii of head h0 + hh of the task. */
float* mh_drv_out_row(const mh_drv_stage* st, const mh_drv_task* t, size_t hh, size_t ii);

/* What the GEMMs of task ti, a worker's next to run, request (sc->ahead_k in Q.K^T, ahead_v
 * in P.V; core/driver_ahead.c): in a head's last task, all M rows of K and V of prepack head
 * `next`, which the worker likely packs next; in the others, the next task's query rows and
 * this task's output rows (a run of tokens each: one head per task, or a group's heads side by
 * side in a token's row). Nothing past the last head, in a paged cache (its rows are not one
 * run), or for rows the stage does not lay out so. */
void mh_drv_fetch_ahead(const mh_drv_call* c, size_t ti, size_t next, mh_drv_scratch* sc);

/* ---- the one-pass mode (core/driver.c), the worker's items ---- */

/* Item `item` of a one-pass call: task item / n_split, key chunk item % n_split. */
void mh_drv_one_pass_item(const mh_drv_call* c, size_t item, mh_drv_scratch* sc);

/* What the direct kernels of a decode across streams prefetch while they read a stream's tile
 * (mh_rows.next and next_ld, far rows: kernels/decode_prefetch.h): K's and V's rows, NULL for
 * none. */
typedef struct mh_drv_next_tile {
    const void *k, *v;
    ptrdiff_t k_ld, v_ld; /* 0: the rows' own ld */
} mh_drv_next_tile;

/* One key tile [j0, j0 + nc) of task t's online softmax: scores, softmax step, P.V into sc's
 * m, l and o; nx: what the kernels prefetch meanwhile (a decode across streams), or NULL. */
void mh_drv_attend_tile(const mh_drv_stage* st, const mh_drv_task* t, int64_t j0, size_t nc,
                        const mh_drv_next_tile* nx, mh_drv_scratch* sc);

/* A direct task's tile is read in runs of at most attn_kv_tile keys, every chunk of its rows
 * (mh_drv_direct_len) on a run before the next run: a run stays in L1 while the chunks reread
 * it (a grouped decode's wider tile holds 64 KiB of K at 256 f16 keys of 128 dims), and lies
 * in one block of a paged cache (blocks are multiples of attn_kv_tile). A key's score does
 * not depend on the call it is in, and P.V split at multiples of MH_PV_GROUP gives one call's
 * bits, so runs give whole tiles' results; the decode across streams takes a run of every
 * stream before the next run (driver_across.c).
 * mh_drv_qk_run: Q.K^T of keys [j0 + c0, j0 + c0 + n) into sc->s, ksrc the task's K rows from
 * j0. mh_drv_pv_run: o = alpha * o + P.V over the same keys (alpha at c0 = 0, else 1) for rows
 * [r0, r0 + per) of V head `head` (vsrc: its rows from j0), on a tile every row keeps whole.
 * mh_drv_tile_softmax: the score step and the online-softmax step of the task's rows on keys
 * [j0, j0 + nc) of sc->s. */
void mh_drv_qk_run(const mh_drv_stage* st, const mh_drv_task* t, const mh_rows* ksrc, int64_t j0, size_t c0,
                   size_t n, mh_drv_scratch* sc);
void mh_drv_pv_run(const mh_drv_stage* st, const mh_drv_task* t, const mh_rows* vsrc, size_t head, int64_t j0,
                   size_t c0, size_t n, size_t r0, size_t per, mh_drv_scratch* sc);
void mh_drv_tile_softmax(const mh_drv_stage* st, const mh_drv_task* t, int64_t j0, size_t nc, mh_drv_scratch* sc);

/* Decode on far-apart K/V rows (c->across; core/driver_across.c): key chunk ci of every stream
 * of batch row b, key tile by key tile, each tile for all streams in turn. */
void mh_drv_attend_across(const mh_drv_call* c, size_t b, size_t ci, mh_drv_scratch* sc);

/* The worker's share of split tasks (tasks tid, tid + nth, ...): merged in order, then
 * finished. */
void mh_drv_one_pass_merge(const mh_drv_call* c, int tid, int nth);

/* ---- the two-pass modes (core/driver_two_pass.c), the worker's items ---- */

/* Materialised: task ti whole, its tiles kept in the worker's sc->s. */
void mh_drv_run_materialised(const mh_drv_call* c, size_t ti, mh_drv_scratch* sc);

/* Two-pass, item = (task, key chunk): pass 1 (the chunk's softmax statistics) and pass 2 (its
 * share of the output with the task's merged statistics), each into its split partial. */
void mh_drv_pass_stats(const mh_drv_call* c, size_t item, mh_drv_scratch* sc);
void mh_drv_pass_output(const mh_drv_call* c, size_t item, mh_drv_scratch* sc);

/* Two-pass, after both passes: task ti's chunk outputs summed in order and written. */
void mh_drv_finish_two_pass(const mh_drv_call* c, size_t ti);

#endif
