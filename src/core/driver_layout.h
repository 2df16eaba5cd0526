/*
 * The workspace of one driver call (driver-private): each worker's scratch (mh_drv_scratch),
 * the split-KV partial states, the prepacked K/V tiles and the two-pass store, carved in that
 * order from the workspace's start, and the shape counts they follow. The same code measures
 * (ws base NULL) and lays out, so the size a caller is told and the layout agree.
 */
#ifndef MH_CORE_DRIVER_LAYOUT_H
#define MH_CORE_DRIVER_LAYOUT_H
#include "core/driver.h"

/* Rows of a full task: hg query heads times tq queries. */
static inline size_t block_rows(const mh_drv_stage* st) { return st->hg * st->tq; }

static inline size_t n_tasks(const mh_drv_stage* st) {
    return (size_t)st->batch * (size_t)st->streams * mh_drv_query_tiles(st);
}

static inline size_t n_kv_tiles(const mh_drv_stage* st) { return ((size_t)st->n_kv + st->tk - 1) / st->tk; }

/* Heads of the prepack grid: B * pack_heads. */
static inline size_t n_pack_heads(const mh_drv_stage* st) { return (size_t)st->batch * (size_t)st->pack_heads; }

/* Columns of V's packed panels: dv rounded up to whole panels. */
static inline size_t v_panels(const mh_drv_stage* st) {
    const size_t nr = st->k->gemm_nr;
    return (st->dv + nr - 1) / nr * nr;
}

/* Floats of one packed K tile ([tk/NR][dqk][NR]) and one packed V tile ([ceil(dv/NR)][tk][NR]). */
static inline size_t kt_floats(const mh_drv_stage* st) { return st->tk * st->dqk; }

static inline size_t vt_floats(const mh_drv_stage* st) { return v_panels(st) * st->tk; }
/* V heads of a stream: each query head's own with v_per_head (CollabHead), else the stream's. */
static inline size_t v_heads(const mh_drv_stage* st) { return st->v_per_head ? st->hg : 1; }

/* A two-pass task's kept tiles: per key tile its scores (tile_floats, contiguous, so pass 2
 * reads them as one stream), then the tile maxima [n_tiles][rows]. */
static inline size_t store_floats(const mh_drv_stage* st) {
    return n_kv_tiles(st) * (st->tile_floats + block_rows(st));
}

/* The whole workspace of one call. */
typedef struct mh_drv_call_ws {
    unsigned char* scratch; /* [threads][per_thread] per-worker scratch */
    size_t per_thread;
    float* partials;        /* split-KV partial states (one-pass decode shape, two-pass) */
    float* kt_all;          /* [slots][n_kv_tiles] packed K tiles, when prepacking */
    float* vt_all;          /* [slots][n_kv_tiles][v_heads] packed V tiles */
    unsigned char* vt_bad;  /* [slots][n_kv_tiles][v_heads]: 1 if that packed V tile holds a NaN
                               or inf (pv_rows then checks the keys its rows drop) */
    int per_worker;         /* slots: one head per worker (mh_drv_pack_per_worker), else every
                               head of the call (B * pack_heads) */
    float* store;           /* [store_floats] pass 1's tiles (two-pass) */
    size_t store_floats;
} mh_drv_call_ws;

/* Whether a prepacking call packs each head's K/V tiles into its worker's own slot right
 * before that head's tasks, instead of every head's into a grid before any task: the one-pass
 * mode with more heads than mh_drv_grid_heads_max (its items are then whole heads, which the
 * workers share out dynamically). */
int mh_drv_pack_per_worker(const mh_drv_stage* st, int threads);

/* Carves (or measures) the call's workspace from ws into out. */
void mh_drv_call_layout(const mh_drv_stage* st, int threads, mh_ws* ws, mh_drv_call_ws* out);

/* Carves one worker's scratch from ws (its per_thread bytes). */
void mh_drv_carve_scratch(const mh_drv_stage* st, mh_ws* ws, mh_drv_scratch* sc);

#endif
