/*
 * What a worker's prefill GEMMs request ahead of it (driver_call.h, mh_drv_fetch_ahead): the
 * rows it reads or writes next, which would otherwise each wait on memory between two runs of
 * GEMMs (driver.c, per_worker_heads, has the measurements). After a call's last head, the next
 * call's K and V when the caller names them (mh_drv_stage.next_key: MoH's gathered heads run
 * one call per head, whose packs read K/V cold without it; causal prefill H32 D128, 16 of 32
 * heads a token, 1 thread, Zen 5, mh_ab --heads-kept: N = M = 512 0.95x the time, 2048
 * 1.00x).
 */
#include <stddef.h>

#include "core/driver_call.h"
#include "util/dtype.h"

/* `rows` rows of row_bytes bytes, stride bytes apart from first, as a fetch into L2 (rows the
 * worker writes too: a line it holds alone takes a write without another request). */
static mh_fetch fetch_run(const void* first, size_t rows, size_t row_bytes, ptrdiff_t stride) {
    const mh_fetch f = {.p = first, .row_bytes = row_bytes, .stride = stride, .rows = rows, .how = MH_FETCH_L2};
    return f;
}

/* The fewest bytes of a head's K rows for which the next head's K and V are requested:
 * smaller heads are likely still in cache, where the requests only cost the GEMMs their steps
 * (N = M = 128 H8 D64, 32 KiB a head, Zen 5: 1.01x the time with them). */
#define FETCH_HEAD_MIN ((size_t)64 << 10)

void mh_drv_fetch_ahead(const mh_drv_call* c, size_t ti, size_t next, mh_drv_scratch* sc) {
    const mh_drv_stage* st = &c->st;
    const size_t n_qt = mh_drv_query_tiles(st);
    sc->ahead_k = sc->ahead_v = mh_fetch_begin(NULL);
    if ((ti + 1) % n_qt == 0) {
        const size_t k_bytes = (size_t)st->n_kv * st->dqk * mh_dtype_size(st->k_dtype);
        /* past the grid's last head: the first of the call that follows, if the caller named it */
        const int following = next == n_pack_heads(st) && st->next_key;
        if ((next >= n_pack_heads(st) && !following) || st->pages || k_bytes < FETCH_HEAD_MIN) return;
        const size_t b = next / (size_t)st->pack_heads, h = next % (size_t)st->pack_heads, m = (size_t)st->n_kv;
        const mh_rows k = following ? mh_drv_rows(st, st->next_key, NULL, st->k_dtype, 0, 0, 0)
                                    : mh_drv_kv_rows(st, 0, b, h, 0);
        const mh_rows v = following ? mh_drv_rows(st, st->next_value, NULL, st->v_dtype, 0, 0, 0)
                                    : mh_drv_kv_rows(st, 1, b, h * v_heads(st), 0);
        const size_t ks = mh_dtype_size(st->k_dtype), vs = mh_dtype_size(st->v_dtype);
        /* each query head's V (v_per_head): the stream's heads when they lie side by side */
        const size_t v_run = st->value.stride_head == (ptrdiff_t)st->dv ? v_heads(st) : 1;
        sc->ahead_k = fetch_run(k.data, m, st->dqk * ks, k.ld * (ptrdiff_t)ks);
        sc->ahead_v = fetch_run(v.data, m, v_run * st->dv * vs, v.ld * (ptrdiff_t)vs);
        return;
    }
    const mh_drv_task t = mh_drv_make_task(c, ti), tn = mh_drv_make_task(c, ti + 1);
    if (t.q_row || tn.q_row) return;
    const size_t hg = st->hg;
    const ptrdiff_t f = (ptrdiff_t)sizeof(float);
    if (st->q.data && (hg == 1 || st->q.stride_head == (ptrdiff_t)st->dqk)) {
        const float* q = (const float*)st->q.data + tn.b * st->q.stride_batch + (ptrdiff_t)tn.i0 * st->q.stride_token +
                         (ptrdiff_t)tn.h0 * st->q.stride_head;
        sc->ahead_k = fetch_run(q, tn.nq, hg * st->dqk * sizeof(float), st->q.stride_token * f);
    }
    if (hg == 1 || st->o.stride_head == (ptrdiff_t)st->dv)
        sc->ahead_v =
            fetch_run(mh_drv_out_row(st, &t, 0, 0), t.nq, hg * st->dv * sizeof(float), st->o.stride_token * f);
}
