/*
 * The driver's two-pass modes (DCMHA; core/driver.h): pass 1 makes each key tile's
 * exponentials and the rows' softmax statistics, pass 2 turns the same tiles into the output.
 * Two-pass keeps pass 1's tiles in the call's store when they fit, else recomputes them (same
 * bits); materialised keeps a task's tiles in the worker's scratch.
 */
#include <math.h>
#include <string.h>

#include "core/driver_call.h"
#include "util/checked.h"

static float* store_block(const mh_drv_call* c, float* store, int64_t j0) {
    return store + (size_t)j0 / c->st.tk * c->st.tile_floats;
}

static float* store_max(const mh_drv_call* c, float* store, int64_t j0) {
    return store + n_kv_tiles(&c->st) * c->st.tile_floats + (size_t)j0 / c->st.tk * block_rows(&c->st);
}

/* Pass 1 over keys [lo, hi): each tile's exponentials and the rows' running max and sum in
 * sc->m, sc->l. With a store the exponentials stay there with the max they are relative to. */
static void stats_range(const mh_drv_call* c, const mh_drv_task* t, int64_t lo, int64_t hi, float* store,
                        mh_drv_scratch* sc) {
    const size_t tk = c->st.tk;
    for (int64_t j0 = lo; j0 < hi; j0 += (int64_t)tk) {
        const size_t nc = mh_min_size(tk, (size_t)(hi - j0));
        float* e = store ? store_block(c, store, j0) : sc->t2;
        c->st.exp_tile(&c->st, t, j0, nc, e, sc->m, sc->l, sc);
        if (store) memcpy(store_max(c, store, j0), sc->m, block_rows(&c->st) * sizeof(float));
    }
}

/* Pass 2 over keys [lo, hi), with the final statistics in sc->m, sc->l, into sc->o. Without a
 * store the exponentials are recomputed as pass 1 made them (the same tiles from lo, the
 * running max restarted), so both give the same bits. */
static void output_range(const mh_drv_call* c, const mh_drv_task* t, int64_t lo, int64_t hi, float* store,
                         mh_drv_scratch* sc) {
    const size_t tk = c->st.tk;
    for (size_t r = 0; r < block_rows(&c->st); r++) sc->mrun[r] = -INFINITY, sc->lrun[r] = 0.0f;
    for (int64_t j0 = lo; j0 < hi; j0 += (int64_t)tk) {
        const size_t nc = mh_min_size(tk, (size_t)(hi - j0));
        if (!store) c->st.exp_tile(&c->st, t, j0, nc, sc->t2, sc->mrun, sc->lrun, sc);
        c->st.out_tile(&c->st, t, j0, nc, store ? store_block(c, store, j0) : sc->t2,
                       store ? store_max(c, store, j0) : sc->mrun, sc);
    }
}

/* Writes the task's output rows from o [rows of the full tile][dv], already normalised. */
static void write_rows(const mh_drv_stage* st, const mh_drv_task* t, const float* o) {
    for (size_t hh = 0; hh < st->hg; hh++)
        for (size_t ii = 0; ii < t->nq; ii++)
            memcpy(mh_drv_out_row(st, t, hh, ii), o + (hh * st->tq + ii) * st->dv, st->dv * sizeof(float));
}

/* A whole task at once, its tiles kept in the worker's sc->s. */
void mh_drv_run_materialised(const mh_drv_call* c, size_t ti, mh_drv_scratch* sc) {
    const mh_drv_task t = mh_drv_make_task(c, ti);
    mh_drv_start_rows(&c->st, &t, block_rows(&c->st), sc);
    stats_range(c, &t, 0, t.j_end, sc->s, sc);
    output_range(c, &t, 0, t.j_end, sc->s, sc);
    write_rows(&c->st, &t, sc->o);
}

/* Task ti's store, or NULL when pass 2 recomputes. */
static float* stored_at(const mh_drv_call* c, size_t ti) {
    return c->stored ? c->cw.store + ti * store_floats(&c->st) : NULL;
}

/* Work item `item` of a two-pass call: chunk ci of task ti, keys [lo, hi), its rows started. */
typedef struct chunk {
    size_t ti, ci;
    mh_drv_task t;
    int64_t lo, hi;
} chunk;

static chunk start_chunk(const mh_drv_call* c, size_t item, mh_drv_scratch* sc) {
    chunk k;
    k.ti = item / c->split.n_split, k.ci = item % c->split.n_split;
    k.t = mh_drv_make_task(c, k.ti);
    mh_split_chunk(&c->split, k.ci, 0, k.t.j_end, c->st.tk, &k.lo, &k.hi);
    mh_drv_start_rows(&c->st, &k.t, block_rows(&c->st), sc);
    return k;
}

/* Pass 1 of a chunk: its softmax statistics into its partial. */
void mh_drv_pass_stats(const mh_drv_call* c, size_t item, mh_drv_scratch* sc) {
    const chunk k = start_chunk(c, item, sc);
    const size_t rows = block_rows(&c->st);
    stats_range(c, &k.t, k.lo, k.hi, stored_at(c, k.ti), sc);
    float* part = mh_split_partial(&c->split, k.ti, k.ci);
    memcpy(part, sc->m, rows * sizeof(float));
    memcpy(part + rows, sc->l, rows * sizeof(float));
}

/* Pass 2 of a chunk: its share of the output, with the task's merged statistics, into its
 * partial. */
void mh_drv_pass_output(const mh_drv_call* c, size_t item, mh_drv_scratch* sc) {
    const chunk k = start_chunk(c, item, sc);
    const size_t rows = block_rows(&c->st);
    mh_split_merge_stats(&c->split, k.ti, sc->m, sc->l);
    output_range(c, &k.t, k.lo, k.hi, stored_at(c, k.ti), sc);
    memcpy(mh_split_partial(&c->split, k.ti, k.ci) + 2 * rows, sc->o, rows * c->st.dv * sizeof(float));
}

/* Sums the task's chunk outputs in order (each already normalised by the whole row's
 * statistics) and writes them. */
void mh_drv_finish_two_pass(const mh_drv_call* c, size_t ti) {
    const size_t rows = block_rows(&c->st), n = rows * c->st.dv;
    float* acc = mh_split_partial(&c->split, ti, 0) + 2 * rows;
    for (size_t ci = 1; ci < c->split.n_split; ci++) {
        const float* part = mh_split_partial(&c->split, ti, ci) + 2 * rows;
        for (size_t e = 0; e < n; e++) acc[e] += part[e];
    }
    const mh_drv_task t = mh_drv_make_task(c, ti);
    write_rows(&c->st, &t, acc);
}

