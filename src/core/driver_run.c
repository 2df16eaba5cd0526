/*
 * The driver's workers (driver.h, mh_drv_run): each call's layout and split plan, then on every
 * worker its scratch, the K/V prepack (a grid shared by the call, or each worker's own heads),
 * and the items of the stage's mode, scheduled dynamically: the one-pass tasks and key chunks
 * (core/driver.c), the two-pass modes' passes (core/driver_two_pass.c), then the merges.
 */
#include <string.h>

#include "core/driver_bf16.h"
#include "core/driver_call.h"
#include "core/parallel.h"
#include "util/checked.h"

/* 1 if a V tile packed for nc keys holds a NaN or inf: its panels lie one after the other, so
 * the tile is read as one row of them. */
static int tile_nonfinite(const mh_drv_stage* st, const float* vt, size_t nc) {
    const size_t panels = v_panels(st) / st->k->gemm_nr, nr = st->k->gemm_nr;
    const int bf16 = mh_drv_bf16(st);
    const mh_rows r = {.data = vt, .dtype = bf16 ? MH_DTYPE_BF16 : MH_DTYPE_F32};
    return st->k->v_nonfinite(0, 1, 0, panels * nr * (bf16 ? mh_drv_bf16_ldq(nc) : nc), &r);
}

/* Packs K/V tile i of head `head` (of B * pack_heads, head-major) into tile i of `slot`, and
 * notes whether each V tile holds a NaN or inf (cw.vt_bad): one pass over the packed tile
 * in cache costs less than pv_rows' checks of a few keys on every diagonal block of rows,
 * which it skips on a finite tile (causal prefill N = M = 128 H8 D64, Zen 5: 0.96-0.99x the
 * time; docs/kernels.md, v_nonfinite). */
static void prepack_tile(const mh_drv_call* c, size_t head, size_t i, size_t slot) {
    const mh_drv_stage* st = &c->st;
    const size_t n_tiles = n_kv_tiles(st), j0 = i * st->tk, at = slot * n_tiles + i;
    const size_t b = head / (size_t)st->pack_heads, h = head % (size_t)st->pack_heads;
    const size_t nc = mh_min_size(st->tk, (size_t)st->n_kv - j0);
    const mh_rows kr = mh_drv_kv_rows(st, 0, b, h, (int64_t)j0);
    mh_drv_pack_k(st, nc, &kr, c->cw.kt_all + at * kt_floats(st));
    for (size_t hv = 0; hv < v_heads(st); hv++) { /* the stream's V, or each of its query heads' */
        const mh_rows vr = mh_drv_kv_rows(st, 1, b, st->v_per_head ? h * st->hg + hv : h, (int64_t)j0);
        float* vt = c->cw.vt_all + (at * v_heads(st) + hv) * vt_floats(st);
        mh_drv_pack_v(st, nc, &vr, vt);
        c->cw.vt_bad[at * v_heads(st) + hv] = (unsigned char)tile_nonfinite(st, vt, nc);
    }
}

/* A worker that packs its own heads (cw.per_worker, one pass, one key chunk per task): whole
 * heads, each packed into the worker's slot right before its tasks run, so the tiles are still
 * in the core's cache when the GEMMs read them; the grid of every head, packed first, is
 * written to memory and read back (f32 causal prefill H32 D128, Zen 5, 1 thread, against the
 * grid: N = M = 512 0.91-0.93x the time, N = 2048 0.96-0.98x, with the workspace on huge
 * pages; on 4 KiB pages, whose TLB misses the grid's reads add, N = 2048 0.72-0.73x).
 * Each task's GEMMs request what the worker reads or writes next and would otherwise wait on
 * (mh_drv_fetch_ahead, core/driver_ahead.c): the next head's K and V, for its pack (the head nth on: the schedule hands
 * heads out in order), the next task's queries and this task's outputs. Causal prefill H32
 * D128, Zen 5, 1 thread, alternated with the build before: f32 N = M = 512 0.93-0.95x the
 * time, 1024 0.96x, 2048 0.98-0.99x; f16 K/V at 512 0.89x; bf16 compute 0.93x (512) and
 * 0.99x (2048); AVX2 0.97x (512); not causal 0.97x; GQA-8 (four heads a task) 0.95x (512)
 * and 0.98x (2048); N = M = 128 H8 D64, whose rows stay in cache, 1.00x (FETCH_HEAD_MIN). Of
 * that, K/V alone: 0.97x at 512, 1.00x at 2048; requested over a whole head instead of its
 * last task, they left L2 before the pack. */
static void per_worker_heads(mh_drv_call* c, size_t slot, size_t nth, mh_drv_scratch* sc) {
    const size_t n_qt = mh_drv_query_tiles(&c->st);
    sc->pack_slot = slot;
    for (long head; (head = mh_next_item(&c->next[0])) < (long)n_pack_heads(&c->st);) {
        for (size_t i = 0; i < n_kv_tiles(&c->st); i++) prepack_tile(c, (size_t)head, i, slot);
        for (size_t ti = (size_t)head * n_qt; ti < ((size_t)head + 1) * n_qt; ti++) {
            mh_drv_fetch_ahead(c, ti, (size_t)head + nth, sc);
            mh_drv_one_pass_item(c, ti, sc);
        }
    }
}

/* One worker: whole heads packed in its own slot (per_worker_heads), or its share of the
 * call's prepack, then items until none is left (dynamic: tasks differ in cost; which worker
 * runs an item never changes its result), then its share of the merges. */
static void worker(void* arg, int tid, int nth) {
    mh_drv_call* c = arg;
    mh_ws ws = mh_ws_begin(c->cw.scratch + (size_t)tid * c->cw.per_thread);
    mh_drv_scratch sc;
    mh_drv_carve_scratch(&c->st, &ws, &sc);
    for (size_t r = 0; r < block_rows(&c->st); r++) sc.ones[r] = 1.0f;
    if (c->cw.per_worker) {
        per_worker_heads(c, (size_t)tid, (size_t)nth, &sc);
        return;
    }
    if (c->cw.kt_all) {
        const size_t n_tiles = n_kv_tiles(&c->st), n_pack = n_pack_heads(&c->st) * n_tiles;
        for (size_t i = (size_t)tid; i < n_pack; i += (size_t)nth) prepack_tile(c, i / n_tiles, i % n_tiles, i / n_tiles);
        mh_barrier(nth);
    }
    const long n_items = (long)(c->n_tasks * c->split.n_split);
    switch (c->st.mode) {
    case MH_DRV_ONE_PASS:
        if (c->across) { /* items: (batch, chunk) */
            const long n_across = (long)((size_t)c->st.batch * c->split.n_split);
            for (long item; (item = mh_next_item(&c->next[0])) < n_across;)
                mh_drv_attend_across(c, (size_t)item / c->split.n_split, (size_t)item % c->split.n_split, &sc);
        } else {
            for (long item; (item = mh_next_item(&c->next[0])) < n_items;) mh_drv_one_pass_item(c, (size_t)item, &sc);
            if (c->split.n_split == 1) return;
        }
        mh_barrier(nth);
        mh_drv_one_pass_merge(c, tid, nth);
        return;
    case MH_DRV_MATERIALISED:
        for (long ti; (ti = mh_next_item(&c->next[0])) < n_items;) mh_drv_run_materialised(c, (size_t)ti, &sc);
        return;
    case MH_DRV_TWO_PASS:
        for (long item; (item = mh_next_item(&c->next[0])) < n_items;) mh_drv_pass_stats(c, (size_t)item, &sc);
        mh_barrier(nth);
        for (long item; (item = mh_next_item(&c->next[1])) < n_items;) mh_drv_pass_output(c, (size_t)item, &sc);
        mh_barrier(nth);
        for (size_t ti = (size_t)tid; ti < c->n_tasks; ti += (size_t)nth) mh_drv_finish_two_pass(c, ti);
        return;
    }
}

void mh_drv_run(const mh_drv_stage* st, int threads, void* ws_base) {
    mh_drv_call c;
    memset(&c, 0, sizeof c);
    c.st = *st;
    mh_ws layout = mh_ws_begin(ws_base);
    mh_drv_call_layout(st, threads, &layout, &c.cw);
    c.n_tasks = n_tasks(st);
    c.split = mh_split_plan(c.cw.partials, block_rows(st), st->dv, st->split_count);
    c.across = st->mode == MH_DRV_ONE_PASS && mh_drv_query_tiles(st) == 1 && !st->opt->probs && !c.cw.kt_all &&
               (st->key.stride_token != (ptrdiff_t)st->dqk || st->value.stride_token != (ptrdiff_t)st->dv);
    size_t unit = 0; /* store_floats, checked: M is unbounded here */
    c.stored = st->mode == MH_DRV_TWO_PASS &&
               mh_mul_size(n_kv_tiles(st), st->tile_floats + block_rows(st), &unit) &&
               unit <= c.cw.store_floats / c.n_tasks;
    const size_t items = c.cw.per_worker ? n_pack_heads(st) : c.n_tasks * c.split.n_split;
    mh_parallel(mh_workers(threads, items, st->flops), worker, &c);
}
