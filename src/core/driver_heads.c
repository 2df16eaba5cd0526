/*
 * Decode across streams on the kernels across heads (qk_heads, pv_heads): an engine's
 * token-major cache [token][KV heads][D] read in address order, key by key with every head's
 * row of a key in turn, instead of one head's rows at a time. A head's rows are kilobytes
 * apart there, and a tile of them read head after head is as many short streams as keys,
 * more than the hardware prefetchers follow; software prefetch does not make up for it on AMD,
 * whose miss buffers it fills (docs/kernels.md, "Decode kernels"). The arithmetic of every
 * head is the one-pass tile's (mh_drv_attend_tile, on the direct kernels), so the
 * bits are those of a head-major cache.
 */
#include "core/driver_heads.h"

#include <math.h>

#include "core/driver_bf16.h"
#include "util/checked.h"

/* Whether the CPU's rule takes the kernels across heads for this stage's heads. The kernels
 * cycle through every stream's query row (Q.K^T) or output sums (P.V) and its row of the
 * tile's scores beside the stream of K or V rows. Under MH_HEADS_L1 they must fit in 5/8 of
 * the L1, past which the stream evicts them and the order loses to per-head tiles: MHA f16
 * decode token-major at 32K keys, 128 dims, Zen 5 (48 KiB L1), the order against per-head
 * tiles: 32 heads (24 KiB of rows, 1/2 of the L1) 0.71x the time, 40 (5/8) 0.90x, 48 (3/4)
 * 1.00x, 64 (1) 1.17x; on Zen 4 (32 KiB), 32 heads are 3/4 of it, and a prototype of the order
 * streamed at 13-17 GB/s over them, 31 GB/s over 16 heads' (docs/kernels.md, "Decode
 * kernels"). Zen 3 (32 KiB L1) takes them at any head count (MH_HEADS_ANY): there the per-head
 * tiles read far rows so slowly (MHA f16 at 32K keys: 1.8x the head-major time) that the order
 * across heads, past the L1 or not, took 0.65x their time at 32 heads of 128 dims (24 KiB of
 * rows, 3/4 of the L1), 0.72x at 40 and 48, 0.69x at 64 and 128 (96 KiB) heads. */
static int heads_take(const mh_drv_stage* st) {
    if (st->k->decode_heads == MH_HEADS_ANY) return 1;
    size_t row = 0, bytes = 0;
    return mh_add_size(st->dqk > st->dv ? st->dqk : st->dv, st->tk, &row) &&
           mh_mul3_size((size_t)st->streams, row, sizeof(float), &bytes) && bytes <= st->k->l1d_bytes / 8 * 5;
}

int mh_drv_heads_ready(const mh_drv_call* c, const mh_drv_scratch* sc) {
    const mh_drv_stage* st = &c->st;
    const size_t n_s = (size_t)st->streams;
    if (!sc->q_heads || st->bias || st->v_per_head || mh_drv_bf16(st) || !heads_take(st)) return 0;
    for (size_t s = 0; s < n_s; s++) {
        const struct mh_drv_lane* ln = &sc->lanes[s];
        if (!ln->t.active || ln->t.rows != 1 || !ln->t.direct_qk || !ln->t.direct_pv || ln->lo != sc->lanes[0].lo ||
            ln->hi != sc->lanes[0].hi)
            return 0;
    }
    return 1;
}

void mh_drv_heads_start(const mh_drv_call* c, mh_drv_scratch* sc) {
    const mh_drv_stage* st = &c->st;
    mh_drv_scratch v = *sc;
    for (size_t s = 0; s < (size_t)st->streams; s++) {
        v.q = sc->q_heads + s * st->dqk;
        mh_drv_load_q(st, &sc->lanes[s].t, &v);
        sc->m_heads[s] = -INFINITY, sc->l_heads[s] = 0.0f;
    }
}

void mh_drv_heads_end(const mh_drv_call* c, size_t b, size_t ci, const mh_drv_scratch* sc) {
    const size_t n_s = (size_t)c->st.streams;
    for (size_t s = 0; s < n_s; s++) { /* a partial of one row: m, l, then o */
        float* part = mh_split_partial(&c->split, b * n_s + s, ci);
        part[0] = sc->m_heads[s], part[1] = sc->l_heads[s];
    }
}

int mh_drv_heads_tile(const mh_drv_call* c, size_t b, size_t ci, int64_t j0, size_t nc, mh_drv_scratch* sc) {
    const mh_drv_stage* st = &c->st;
    const mh_kernels* k = st->k;
    const size_t n_s = (size_t)st->streams, tk = st->tk, task0 = b * n_s;
    for (size_t s = 0; s < n_s; s++)
        if (mh_score_tile_partial(&sc->lanes[s].t.blk, j0, nc)) return 0; /* rows keep different keys */
    mh_rows *krows = sc->rows_heads, *vrows = sc->rows_heads + n_s;
    for (size_t s = 0; s < n_s; s++) {
        krows[s] = mh_drv_kv_rows(st, 0, b, s, j0);
        vrows[s] = mh_drv_kv_rows(st, 1, b, s, j0);
    }
    k->qk_heads(n_s, nc, st->dqk, sc->q_heads, st->dqk, krows, sc->s_heads, tk);
    for (size_t s = 0; s < n_s; s++) mh_score_rows(&sc->lanes[s].t.blk, sc->s_heads + s * tk, tk, j0, nc, 0, 1);
    k->softmax_tile(n_s, nc, sc->s_heads, tk, sc->m_heads, sc->l_heads, sc->alpha_heads);
    /* stream s's output accumulator: its split partial's, stride floats after stream s - 1's */
    const size_t stride = mh_split_task_stride(&c->split);
    float* o0 = mh_split_partial(&c->split, task0, ci) + 2;
    k->pv_heads(n_s, nc, st->dv, sc->s_heads, tk, vrows, sc->alpha_heads, o0, stride, sc->acc_heads);
    return 1;
}
