/*
 * The MHA/GQA/MQA stage of the driver (core/driver.h): tasks are (batch, KV head, query
 * tile), and one task holds the query rows of ALL query heads that share its KV head, so
 * every K/V tile is packed and read once per group, never once per head (GQA/MQA by index,
 * no repeat).
 */
#include "core/attention.h"

#include <math.h>

#include "core/driver.h"
#include "core/split_kv.h"
#include "util/checked.h"

/* What the hooks read. */
typedef struct gqa_ctx {
    const mh_attn_problem* p;
    const mh_attn_options* opt;
    const mh_core_extra* ex;
} gqa_ctx;

static void task_hook(const mh_drv_stage* st, mh_drv_task* t) {
    const gqa_ctx* c = st->ctx;
    const mh_attn_problem* p = c->p;
    const mh_core_extra* ex = c->ex;
    const ptrdiff_t row0 = (ptrdiff_t)t->b * p->n_q + (ptrdiff_t)t->i0;
    mh_drv_block(st, c->opt, ex->q_pos ? ex->q_pos + row0 : NULL, t);
    t->active = !ex->kv_active || ex->kv_active[t->b * p->n_kv_heads + t->s];
    t->direct_qk = t->rows < st->k->attn_direct_rows || (t->nq == 1 && t->rows <= MH_DRV_DIRECT_MAX_ROWS);
    t->direct_pv = t->direct_qk;
    t->q_row = ex->q_row ? ex->q_row + row0 : NULL;
    t->o_scale = ex->o_scale ? ex->o_scale + row0 : NULL;
}

/* Row r of the task's queries in Q. */
static const float* q_row(const mh_attn_problem* p, const mh_drv_task* t, size_t r) {
    const size_t hh = r / t->nq, ii = r % t->nq;
    const ptrdiff_t tok = t->q_row ? (ptrdiff_t)t->q_row[ii] : (ptrdiff_t)(t->i0 + ii);
    return (const float*)p->q.data + t->b * p->q.stride_batch + tok * p->q.stride_token +
           (ptrdiff_t)(t->h0 + hh) * p->q.stride_head;
}

/* Gathers and pre-scales the task's query rows (requested MH_DRV_ROWS_AHEAD rows early). */
static void load_q(const mh_drv_stage* st, const mh_drv_task* t, mh_drv_scratch* sc) {
    const mh_attn_problem* p = ((const gqa_ctx*)st->ctx)->p;
    const size_t dqk = st->dqk, bytes = dqk * sizeof(float);
    for (size_t r = 0; r < t->rows && r < MH_DRV_ROWS_AHEAD; r++) mh_drv_prefetch(q_row(p, t, r), bytes, 0);
    for (size_t r = 0; r < t->rows; r++) {
        if (r + MH_DRV_ROWS_AHEAD < t->rows) mh_drv_prefetch(q_row(p, t, r + MH_DRV_ROWS_AHEAD), bytes, 0);
        st->k->scale_row(dqk, q_row(p, t, r), st->scale, sc->q + r * dqk);
    }
}

/* The stage of problem p in compute mode `compute` (ctx and options unset: the shapes alone;
 * a workspace is sized in f32, whose tiles are the widest). Queries per head in one task: the
 * group's heads together fill about attn_block_rows. K/V tiles are packed once per call in
 * prefill (mh_drv_plan_prepack), when the caller sized the workspace knowing M (the layer's
 * decode does not). A decode (one query tile) of attn_direct_rows or more rows per K/V head
 * (MQA, GQA groups of six heads or more, several new tokens: the packed GEMMs, or the direct
 * kernels in chunks of rows, run by run: driver_call.h) takes tiles of attn_group_kv_tile keys
 * in f32: each tile's per-row work (the softmax step and its rescale, P.V's loads and stores
 * of o) spreads over more keys (Zen 5, 1 thread, 256 keys against 64: MQA at 32K keys
 * 0.96-0.98x the time, 8 rows per K/V head 0.93x; docs/kernels.md). The pipelined decode of
 * fewer rows keeps attn_kv_tile (wider tiles slowed it), and so does the bf16 compute mode,
 * which rounds P on the decode's grid of attn_kv_tile keys. A tile depends on the shapes
 * alone, never on the layout or a cache's blocks, so they all give the same bits. */
static mh_drv_stage make_stage(const mh_kernels* k, const mh_attn_problem* p, int prepack_ok, mh_compute compute) {
    mh_drv_stage st = {0};
    const size_t g = (size_t)(p->n_heads / p->n_kv_heads), per_head = k->attn_block_rows / g;
    st.k = k, st.mode = MH_DRV_ONE_PASS;
    st.batch = p->batch, st.streams = p->n_kv_heads, st.n_q = p->n_q, st.n_kv = p->n_kv;
    st.hg = g, st.tq = mh_min_size(per_head ? per_head : 1, (size_t)p->n_q), st.tk = k->attn_kv_tile;
    st.dqk = (size_t)p->head_dim_qk, st.dv = (size_t)p->head_dim_v;
    st.scale = p->scale != 0.0f ? p->scale : 1.0f / sqrtf((float)p->head_dim_qk);
    st.key = p->k, st.value = p->v, st.k_dtype = p->k_dtype, st.v_dtype = p->v_dtype;
    st.o = p->o, st.q = p->q;
    st.compute = compute;
    mh_drv_plan_prepack(&st, prepack_ok);
    if (!st.prepack && compute == MH_COMPUTE_F32 && mh_drv_query_tiles(&st) == 1 &&
        st.hg * st.tq >= k->attn_direct_rows)
        st.tk = k->attn_group_kv_tile;
    st.pack_heads = p->n_kv_heads;
    st.task = task_hook, st.load_q = load_q;
    return st;
}

size_t mh_core_attention_kv_tile(const mh_kernels* k, const mh_attn_problem* p, int prepack_ok) {
    return make_stage(k, p, prepack_ok, MH_COMPUTE_BF16).tk;
}

void* mh_core_attention_carve(const mh_kernels* k, int threads, const mh_attn_problem* p,
                              int prepack_ok, mh_ws* ws) {
    const mh_drv_stage st = make_stage(k, p, prepack_ok, MH_COMPUTE_F32);
    return mh_drv_carve(&st, threads, ws);
}

/* Every layout part grows with n_q and the batch except two: the split-KV partials exist only
 * while the call has one query tile, and a call with few K/V heads packs every head's tiles at
 * once, in more slots than a call with more heads, which packs them per worker
 * (mh_drv_grid_heads_max). The largest layout is the one at (batch, n_q), at one full tile,
 * or at the largest batch whose heads are packed at once. */
void* mh_core_attention_carve_upto(const mh_kernels* k, int threads, const mh_attn_problem* p,
                                   int prepack_ok, mh_ws* ws) {
    const mh_drv_stage all = make_stage(k, p, prepack_ok, MH_COMPUTE_F32);
    mh_attn_problem one_tile = *p, grid = *p;
    one_tile.n_q = (int)all.tq;
    grid.batch = (int)mh_min_size((size_t)p->batch, mh_drv_grid_heads_max(threads) / (size_t)p->n_kv_heads);
    const mh_drv_stage st[] = {all, make_stage(k, &one_tile, prepack_ok, MH_COMPUTE_F32),
                                 make_stage(k, &grid, prepack_ok, MH_COMPUTE_F32)};
    return mh_drv_carve_largest(st, grid.batch > 0 ? 3 : 2, threads, ws);
}

void mh_core_attention(const mh_kernels* k, int threads, const mh_attn_problem* p,
                       const mh_attn_options* opt, int prepack_ok, void* ws) {
    const mh_core_extra none = {NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    mh_core_attention_ex(k, threads, p, opt, prepack_ok, ws, &none);
}

void mh_core_attention_ex(const mh_kernels* k, int threads, const mh_attn_problem* p,
                          const mh_attn_options* opt, int prepack_ok, void* ws,
                          const mh_core_extra* ex) {
    const gqa_ctx c = {p, opt, ex};
    mh_drv_stage st = make_stage(k, p, prepack_ok, opt->compute);
    st.ctx = &c, st.opt = opt, st.pages = ex->pages;
    st.next_key = ex->next_k, st.next_value = ex->next_v;
    st.split_count = mh_split_count(mh_drv_query_tiles(&st), opt, p->n_kv);
    st.flops = 2.0 * (double)p->batch * p->n_q * p->n_kv * p->n_heads *
               (p->head_dim_qk + p->head_dim_v); /* upper bound (ignores masks) */
    mh_drv_run(&st, threads, ws);
}
