/* The workspace layout of a driver call (core/driver_layout.h). */
#include "core/driver_layout.h"

#include <string.h>

#include "core/driver_bf16.h"
#include "core/split_kv.h"
#include "util/checked.h"

/* Two-pass decode keeps pass 1's tiles for pass 2 in a store of a size fixed by the shapes
 * without M (rows of the call times STORE_KEYS, at most STORE_BUDGET bytes): when a task's
 * rows over all M keys fit its share, pass 2 reads them instead of recomputing them. */
#define STORE_KEYS ((size_t)65536)
#define STORE_BUDGET ((size_t)16 << 20)

/* Heads per worker from which a prepacking call packs per worker (mh_drv_pack_per_worker): at
 * four, the dynamic schedule over whole heads leaves at most a quarter of a worker's share
 * for the others to wait on. */
#define MH_DRV_HEADS_PER_WORKER 4

size_t mh_drv_query_tiles(const mh_drv_stage* st) { return ((size_t)st->n_q + st->tq - 1) / st->tq; }

void mh_drv_plan_prepack(mh_drv_stage* st, int prepack_ok) {
    const mh_kernels* k = st->k;
    st->prepack = prepack_ok && mh_drv_query_tiles(st) > 1 && block_rows(st) >= k->attn_direct_rows;
    if (!st->prepack) return;
    const size_t m = st->n_kv > 0 ? (size_t)st->n_kv : 1, tk = k->attn_kv_tile;
    st->tk = mh_min_size(k->attn_prefill_kv_tile, (m + tk - 1) / tk * tk);
}

void mh_drv_carve_scratch(const mh_drv_stage* st, mh_ws* ws, mh_drv_scratch* sc) {
    const size_t rows = block_rows(st), tk = st->tk;
    memset(sc, 0, sizeof *sc);
    sc->q = mh_ws_take(ws, rows, st->dqk, sizeof(float));
    if (st->mode != MH_DRV_MATERIALISED) {
        sc->kt = mh_ws_take(ws, st->dqk, tk, sizeof(float));
        sc->vt = mh_ws_take(ws, v_panels(st), tk, sizeof(float));
    }
    if (st->mode == MH_DRV_ONE_PASS) {
        sc->s = mh_ws_take(ws, rows, tk, sizeof(float));
        sc->s_prev = mh_ws_take(ws, rows, tk, sizeof(float));
        sc->alpha_prev = mh_ws_take(ws, rows, 1, sizeof(float));
    }
    mh_drv_bf16_carve(st, rows, ws, sc);
    if (st->mode == MH_DRV_ONE_PASS && mh_drv_query_tiles(st) == 1) {
        /* a decode across streams, and on one query row per stream across heads
         * (core/driver_heads.c); carved for any row count, so the size never drops as the
         * rows grow (a layer's decode workspace serves every smaller n_new) */
        const size_t n_s = (size_t)st->streams;
        sc->lanes = mh_ws_take(ws, n_s, 1, sizeof(struct mh_drv_lane));
        sc->q_heads = mh_ws_take(ws, n_s, st->dqk, sizeof(float));
        sc->s_heads = mh_ws_take(ws, n_s, tk, sizeof(float));
        sc->acc_heads = mh_ws_take(ws, n_s, st->dv, sizeof(float));
        sc->m_heads = mh_ws_take(ws, n_s, 1, sizeof(float));
        sc->l_heads = mh_ws_take(ws, n_s, 1, sizeof(float));
        sc->alpha_heads = mh_ws_take(ws, n_s, 1, sizeof(float));
        sc->rows_heads = mh_ws_take(ws, 2 * n_s, 1, sizeof(mh_rows));
        if (tk > st->k->attn_kv_tile && st->hg <= MH_DRV_DIRECT_MAX_ROWS) { /* whatever tq: as above */
            sc->q_runs = mh_ws_take(ws, n_s * st->hg, st->dqk, sizeof(float));
            sc->s_runs = mh_ws_take(ws, n_s * st->hg, tk, sizeof(float));
            sc->alpha_runs = mh_ws_take(ws, n_s, st->hg, sizeof(float));
        }
    }
    if (st->mode == MH_DRV_MATERIALISED)
        sc->s = mh_ws_take(ws, n_kv_tiles(st), st->tile_floats + rows, sizeof(float));
    sc->o = mh_ws_take(ws, rows, st->dv, sizeof(float));
    float** vecs[] = {&sc->m, &sc->l, &sc->alpha, &sc->ones, &sc->mrun, &sc->lrun, &sc->scale};
    const size_t n_vecs = st->mode == MH_DRV_ONE_PASS ? 4 : sizeof vecs / sizeof vecs[0];
    for (size_t i = 0; i < n_vecs; i++) *vecs[i] = mh_ws_take(ws, rows, 1, sizeof(float));
    if (st->mode != MH_DRV_ONE_PASS) {
        sc->t1 = mh_ws_take(ws, st->tile_floats, 1, sizeof(float));
        sc->t2 = mh_ws_take(ws, st->tile_floats, 1, sizeof(float));
    }
}

size_t mh_drv_grid_heads_max(int threads) { return threads == 1 ? 0 : MH_DRV_HEADS_PER_WORKER * (size_t)threads - 1; }

int mh_drv_pack_per_worker(const mh_drv_stage* st, int threads) {
    return st->prepack && st->mode == MH_DRV_ONE_PASS && st->pack_heads == st->streams &&
           n_pack_heads(st) > mh_drv_grid_heads_max(threads);
}

void mh_drv_call_layout(const mh_drv_stage* st, int threads, mh_ws* ws, mh_drv_call_ws* out) {
    memset(out, 0, sizeof *out);
    mh_ws measure = mh_ws_begin(NULL);
    mh_drv_scratch unused;
    mh_drv_carve_scratch(st, &measure, &unused);
    if (measure.overflow || !mh_align_size(measure.used, MH_WS_ALIGN, &out->per_thread)) ws->overflow = 1;
    out->scratch = mh_ws_take(ws, (size_t)threads, out->per_thread, 1);
    const size_t tasks = n_tasks(st), rows = block_rows(st);
    if (st->mode == MH_DRV_TWO_PASS || (st->mode == MH_DRV_ONE_PASS && mh_drv_query_tiles(st) == 1))
        out->partials = mh_split_take(ws, tasks, rows, st->dv);
    if (st->prepack) {
        size_t tiles = 0;
        out->per_worker = mh_drv_pack_per_worker(st, threads);
        const size_t slots = out->per_worker ? (size_t)threads : n_pack_heads(st);
        size_t v_tiles = 0;
        if (!mh_mul_size(slots, n_kv_tiles(st), &tiles) || !mh_mul_size(tiles, v_heads(st), &v_tiles)) ws->overflow = 1;
        out->kt_all = mh_ws_take(ws, tiles, kt_floats(st), sizeof(float));
        out->vt_all = mh_ws_take(ws, v_tiles, vt_floats(st), sizeof(float));
        out->vt_bad = mh_ws_take(ws, v_tiles, 1, 1);
    }
    if (st->mode == MH_DRV_TWO_PASS) {
        size_t rows_all = 0;
        if (!mh_mul_size(tasks, rows, &rows_all)) ws->overflow = 1;
        const size_t budget = STORE_BUDGET / sizeof(float);
        out->store_floats = rows_all <= budget / STORE_KEYS ? rows_all * STORE_KEYS : budget;
        out->store = mh_ws_take(ws, out->store_floats, 1, sizeof(float));
    }
}

void* mh_drv_carve(const mh_drv_stage* st, int threads, mh_ws* ws) {
    mh_drv_call_ws c;
    mh_drv_call_layout(st, threads, ws, &c);
    return c.scratch;
}

void* mh_drv_carve_largest(const mh_drv_stage* st, size_t n, int threads, mh_ws* ws) {
    size_t largest = 0;
    for (size_t i = 0; i < n; i++) {
        mh_ws w = mh_ws_begin(NULL);
        mh_drv_carve(&st[i], threads, &w);
        if (w.overflow) ws->overflow = 1;
        largest = w.used > largest ? w.used : largest;
    }
    return mh_ws_take(ws, largest, 1, 1);
}

