/* Decode on far-apart K/V rows (an engine's token-major cache, docs/architecture.md "Decode on
 * far-apart rows"): every stream's tiles key tile by key tile, on the one-pass tile of
 * core/driver.c or the kernels across heads (core/driver_heads.c), and what the direct kernels
 * prefetch meanwhile. */
#include "core/driver_call.h"

#include "core/driver_bf16.h"
#include "core/driver_heads.h"
#include "kernels/decode_prefetch.h"
#include "util/checked.h"
#include "util/dtype.h"

/* The tile attend_across reads MH_FAR_PREFETCH_STREAMS tiles after stream s's at offset off
 * (streams in turn at off, then at off + tk, ...), or NULL past the last one. */
static const mh_drv_next_tile* tile_ahead(const mh_drv_stage* st, const struct mh_drv_lane* lanes, size_t n_s, size_t s,
                                   int64_t off, size_t tk, mh_drv_next_tile* nx) {
    size_t left = MH_FAR_PREFETCH_STREAMS;
    for (size_t i = s + 1; i < s + 1 + 2 * n_s; i++) { /* at most two rounds hold it */
        const struct mh_drv_lane* ln = &lanes[i % n_s];
        const int64_t j0 = ln->lo + off + (int64_t)(i / n_s) * (int64_t)tk;
        if (!ln->t.active || j0 >= ln->hi || --left) continue;
        *nx = (mh_drv_next_tile){.k = mh_drv_kv_rows(st, 0, (size_t)ln->t.b, (size_t)ln->t.s, j0).data,
                          .v = mh_drv_kv_rows(st, 1, (size_t)ln->t.b, (size_t)ln->t.s, j0).data};
        return nx;
    }
    return NULL;
}

/* Whether a decode across streams prefetches by region_ahead: on a CPU whose hardware
 * prefetchers follow only the stream being read (the TURN rule: AMD Zen 3), K and V dense
 * token-major (each token's row holds every stream's row, stream s at s rows in, as an
 * engine's [token][KV heads][D] cache), every stream reading the same keys, and a key tile of
 * all streams' K and V within twice the L2 (AMD's L3 keeps what the L2 evicts). Zen 3 (512 KiB
 * L2), MHA f16 on the per-head tiles (MH_DECODE_HEADS=l1), 32K keys, against tile_ahead: tiles
 * of 1 MiB 0.86x the time, 2 MiB 0.94x, 4 MiB 1.05x. On an Intel Xeon (the ALL rule) it cost:
 * tile_ahead took 0.83-0.95x its time (GQA f16, int8, f32, 4 and 8 K/V heads, 4K and 32K keys,
 * 1 and 2 threads; 16 heads 1.00x), and on Zen 5 (the L1 rule) more: GQA-8 f16 at 32K keys
 * 1.36x the time of tile_ahead, f32 1.12x, 16 K/V heads 1.20x. Zen 4 is not measured. */
static int region_prefetch(const mh_drv_stage* st, const struct mh_drv_lane* lanes, size_t n_s) {
    const ptrdiff_t dqk = (ptrdiff_t)st->dqk, dv = (ptrdiff_t)st->dv, n = (ptrdiff_t)n_s;
    const size_t key_bytes = st->dqk * mh_dtype_size(st->k_dtype) + st->dv * mh_dtype_size(st->v_dtype);
    size_t bytes = 0;
    if (st->k->decode_prefetch != MH_PREFETCH_TURN || st->v_per_head || st->key.stride_head != dqk ||
        st->key.stride_token != n * dqk || st->value.stride_head != dv || st->value.stride_token != n * dv ||
        !mh_mul3_size(st->tk, n_s, key_bytes, &bytes) || bytes / 2 > st->k->l2_bytes)
        return 0;
    for (size_t s = 0; s < n_s; s++)
        if (!lanes[s].t.active || lanes[s].lo != lanes[0].lo || lanes[s].hi != lanes[0].hi) return 0;
    return 1;
}

/* Under region_prefetch: the next key tile's K (and V) rows of every stream are one run of
 * bytes, which stream s's kernels prefetch the s-th part of while they read its tile at offset
 * off, as rows of their own length, one with each of theirs; the parts in turn cover the run in
 * address order, and each is read a tile after its request. NULL past the last tile, or past
 * the run's end. tile_ahead asks for rows of a few hundred bytes kilobytes apart instead; this
 * order took 0.76x its time on the kernels alone and 0.87-0.89x through the core API (GQA-8 f16
 * at 32K keys, Zen 3; docs/kernels.md, "Token-major caches: the next tile in address order"). */
static const mh_drv_next_tile* region_ahead(const mh_drv_stage* st, const struct mh_drv_lane* ln, size_t n_s, size_t s,
                                     int64_t off, size_t tk, mh_drv_next_tile* nx) {
    const int64_t j = ln->lo + off + (int64_t)tk; /* the next tile's first key */
    if (j >= ln->hi) return NULL;
    const size_t nc = tk, next_nc = mh_min_size(tk, (size_t)(ln->hi - j)); /* this tile is whole */
    if (s * nc >= next_nc * n_s) return NULL;
    const size_t at = s * nc; /* rows of a stream's length before part s */
    *nx = (mh_drv_next_tile){
        .k = mh_dtype_at(mh_drv_kv_rows(st, 0, (size_t)ln->t.b, 0, j).data, st->k_dtype, (ptrdiff_t)(at * st->dqk)),
        .v = mh_dtype_at(mh_drv_kv_rows(st, 1, (size_t)ln->t.b, 0, j).data, st->v_dtype, (ptrdiff_t)(at * st->dv)),
        .k_ld = (ptrdiff_t)st->dqk,
        .v_ld = (ptrdiff_t)st->dv};
    return nx;
}

/* Whether the streams' tiles run in runs across streams (tiles_in_runs): a tile wider than a
 * run (attn_kv_tile keys) and every active stream's task on the direct kernels, with no bias
 * hook and one V per stream. Such tasks have one query per head (a wider tile's stage has
 * attn_direct_rows or more rows per task: core/attention.c), so every row keeps every key of
 * a tile, as mh_drv_pv_run asks. */
static int runs_across(const mh_drv_stage* st, const mh_drv_scratch* sc, size_t n_s) {
    if (!sc->q_runs || st->tk <= st->k->attn_kv_tile || st->bias || st->v_per_head) return 0;
    for (size_t s = 0; s < n_s; s++) {
        const mh_drv_task* t = &sc->lanes[s].t;
        if (t->active && (!t->direct_qk || !t->direct_pv || t->nq != 1)) return 0;
    }
    return 1;
}

/* Stream s's state for tiles_in_runs: its queries, scores and rescales in the runs' buffers,
 * its m, l, o in its split partial of batch row b, chunk ci. */
static mh_drv_scratch run_state(const mh_drv_call* c, const mh_drv_scratch* sc, size_t b, size_t ci, size_t s) {
    const mh_drv_stage* st = &c->st;
    const size_t hg = st->hg;
    mh_drv_scratch v = *sc;
    float* part = mh_split_partial(&c->split, b * (size_t)st->streams + s, ci);
    v.q = sc->q_runs + s * hg * st->dqk, v.s = sc->s_runs + s * hg * st->tk, v.alpha = sc->alpha_runs + s * hg;
    v.m = part, v.l = part + hg, v.o = part + 2 * hg;
    return v;
}

/* The tile at offset off of every stream of batch row b, chunk ci, a run of every stream
 * before the next run: Q.K^T, then each stream's softmax, then P.V. The runs of all streams
 * are the rows of attn_kv_tile keys, near each other in a token-major cache, that a tile of
 * that width would read (a stream's whole tile at once would cycle its chunks of rows over 64
 * KiB of K at 256 f16 keys of 128 dims, out of L1: 16 rows on 2 K/V heads took 1.2x the time
 * of 64-key tiles). The arithmetic is every stream's own tile's. 0 when no stream has keys
 * left. */
static int tiles_in_runs(const mh_drv_call* c, size_t b, size_t ci, int64_t off, mh_drv_scratch* sc) {
    const mh_drv_stage* st = &c->st;
    const size_t n_s = (size_t)st->streams, tk = st->tk, run = st->k->attn_kv_tile;
    int more = 0;
    for (int phase = 0; phase < 3; phase++) /* 0: Q.K^T, 1: the softmax (once a stream), 2: P.V */
        for (size_t c0 = 0; c0 < (phase == 1 ? 1 : tk); c0 += run)
            for (size_t s = 0; s < n_s; s++) {
                const struct mh_drv_lane* ln = &sc->lanes[s];
                const int64_t j0 = ln->lo + off;
                if (!ln->t.active || j0 >= ln->hi) continue;
                const size_t nc = mh_min_size(tk, (size_t)(ln->hi - j0));
                if (c0 >= nc) continue;
                more = 1;
                mh_drv_scratch v = run_state(c, sc, b, ci, s);
                const mh_rows x = mh_drv_kv_rows(st, phase == 2, b, s, j0);
                const size_t n = mh_min_size(run, nc - c0);
                if (phase == 0) mh_drv_qk_run(st, &ln->t, &x, j0, c0, n, &v);
                else if (phase == 1) mh_drv_tile_softmax(st, &ln->t, j0, nc, &v);
                else mh_drv_pv_run(st, &ln->t, &x, s, j0, c0, n, 0, ln->t.rows, &v);
            }
    return more;
}

/* Decode on K/V rows far apart (an engine's token-major cache): chunk ci of every stream of
 * batch b, key tile by key tile, each tile for all streams in turn, so the rows of a tile
 * (all heads of its keys, near each other) are read together instead of one head's rows at
 * a time across the whole cache. With one query row per stream (MHA), a tile runs on the
 * kernels across heads, key by key (core/driver_heads.c), unless the score step drops some of
 * its keys; otherwise stream by stream. Each stream's tiles, state and arithmetic are those
 * of one_pass_item; its m, l, o live in its split partial. */
void mh_drv_attend_across(const mh_drv_call* c, size_t b, size_t ci, mh_drv_scratch* sc) {
    const mh_drv_stage* st = &c->st;
    const size_t n_s = (size_t)st->streams, tk = st->tk;
    for (size_t s = 0; s < n_s; s++) {
        struct mh_drv_lane* ln = &sc->lanes[s];
        ln->t = mh_drv_make_task(c, b * n_s + s);
        mh_split_chunk(&c->split, ci, ln->t.j_begin, ln->t.j_end, tk, &ln->lo, &ln->hi);
        float* part = mh_split_partial(&c->split, b * n_s + s, ci);
        mh_drv_empty_rows(st, ln->t.rows, part, part + ln->t.rows, part + 2 * ln->t.rows);
    }
    if (runs_across(st, sc, n_s)) {
        for (size_t s = 0; s < n_s; s++) {
            mh_drv_scratch v = run_state(c, sc, b, ci, s);
            if (sc->lanes[s].t.active) mh_drv_load_q(st, &sc->lanes[s].t, &v);
        }
        for (int64_t off = 0; tiles_in_runs(c, b, ci, off, sc); off += (int64_t)tk) continue;
        return;
    }
    const int heads = mh_drv_heads_ready(c, sc); /* one row per stream: key by key across them */
    const int region = region_prefetch(st, sc->lanes, n_s);
    if (heads) mh_drv_heads_start(c, sc);
    mh_drv_scratch v = *sc;
    for (int64_t off = 0, more = 1; more; off += (int64_t)tk) {
        more = 0;
        if (heads && sc->lanes[0].lo + off < sc->lanes[0].hi) {
            const int64_t j0 = sc->lanes[0].lo + off;
            more = 1;
            if (mh_drv_heads_tile(c, b, ci, j0, mh_min_size(tk, (size_t)(sc->lanes[0].hi - j0)), sc)) continue;
        }
        for (size_t s = 0; s < n_s; s++) {
            const struct mh_drv_lane* ln = &sc->lanes[s];
            const int64_t j0 = ln->lo + off;
            if (!ln->t.active || j0 >= ln->hi) continue;
            more = 1;
            float* part = mh_split_partial(&c->split, b * n_s + s, ci);
            v.m = part, v.l = part + ln->t.rows, v.o = part + 2 * ln->t.rows;
            if (heads) v.q = sc->q_heads + s * st->dqk, v.m = sc->m_heads + s, v.l = sc->l_heads + s;
            else mh_drv_load_q(st, &ln->t, &v);
            mh_drv_next_tile nx;
            const mh_drv_next_tile* ahead = region ? region_ahead(st, &sc->lanes[0], n_s, s, off, tk, &nx)
                                            : tile_ahead(st, sc->lanes, n_s, s, off, tk, &nx);
            mh_drv_attend_tile(st, &ln->t, j0, mh_min_size(tk, (size_t)(ln->hi - j0)), ahead, &v);
        }
    }
    if (heads) mh_drv_heads_end(c, b, ci, sc);
}
