/*
 * Tiled online-softmax attention (FlashAttention-style) over (batch, KV head, query tile)
 * tasks. One task holds the query rows of ALL query heads that share its KV head, so every
 * K/V tile is packed and read once per group, never once per head (GQA/MQA by index, no
 * repeat). The N x M score matrix is never formed; only a rows x kv_tile tile is.
 *
 * Each task's arithmetic is independent of which thread runs it, so results are bitwise
 * identical for every thread count.
 */
#include "core/attention.h"

#include <math.h>
#include <string.h>

#include "core/parallel.h"
#include "core/score.h"
#include "core/split_kv.h"
#include "util/dtype.h"

typedef struct scratch {
    float* q;     /* [rows][Dqk]      the query block, pre-scaled */
    float* kt;    /* [kv_tile/NR][Dqk][NR]      packed K tile (GEMM path) */
    float* vt;    /* [ceil(Dv/NR)][kv_tile][NR] packed V tile (GEMM path) */
    float* s;     /* [rows][kv_tile]  scores, then probabilities */
    float* o;     /* [rows][Dv]       running output */
    float* m;     /* [rows]           running max */
    float* l;     /* [rows]           running sum */
    float* alpha; /* [rows]           per-tile rescale */
} scratch;

static size_t min_size(size_t a, size_t b) { return a < b ? a : b; }

static size_t group_size(const mh_attn_problem* p) {
    return (size_t)(p->n_heads / p->n_kv_heads);
}

/* Queries per head in one task: the group's heads together fill about attn_block_rows. */
static size_t q_tile(const mh_kernels* k, const mh_attn_problem* p) {
    const size_t per_head = k->attn_block_rows / group_size(p);
    return min_size(per_head ? per_head : 1, (size_t)p->n_q);
}

static size_t block_rows(const mh_kernels* k, const mh_attn_problem* p) {
    return group_size(p) * q_tile(k, p);
}

/* Decode-shaped calls (one query tile) split each task's key range (core/split_kv.h), so a
 * single KV head can use every thread. */
static size_t n_query_tiles(const mh_kernels* k, const mh_attn_problem* p) {
    const size_t tq = q_tile(k, p);
    return ((size_t)p->n_q + tq - 1) / tq;
}

static void carve_scratch(const mh_kernels* k, const mh_attn_problem* p, mh_ws* ws, scratch* sc) {
    const size_t rows = block_rows(k, p), tk = k->attn_kv_tile;
    const size_t dqk = (size_t)p->head_dim_qk, dv = (size_t)p->head_dim_v;
    sc->q = mh_ws_take(ws, rows, dqk, sizeof(float));
    const size_t nr = k->gemm_nr, dv_panels = (dv + nr - 1) / nr;
    sc->kt = mh_ws_take(ws, dqk, tk, sizeof(float));
    sc->vt = mh_ws_take(ws, dv_panels * nr, tk, sizeof(float));
    sc->s = mh_ws_take(ws, rows, tk, sizeof(float));
    sc->o = mh_ws_take(ws, rows, dv, sizeof(float));
    sc->m = mh_ws_take(ws, rows, 1, sizeof(float));
    sc->l = mh_ws_take(ws, rows, 1, sizeof(float));
    sc->alpha = mh_ws_take(ws, rows, 1, sizeof(float));
}

/* Bytes of one worker's scratch, a multiple of MH_WS_ALIGN; 0 on overflow. */
static size_t per_thread_bytes(const mh_kernels* k, const mh_attn_problem* p) {
    mh_ws measure = mh_ws_begin(NULL);
    scratch unused;
    size_t bytes;
    carve_scratch(k, p, &measure, &unused);
    if (measure.overflow || !mh_align_size(measure.used, MH_WS_ALIGN, &bytes)) return 0;
    return bytes;
}

/* K/V tiles packed once per call: worth it when several query tiles of a head would otherwise
 * each pack the same tiles (prefill), and allowed only when the caller sized the workspace
 * knowing M (the layer's decode does not). */
static int use_prepack(const mh_kernels* k, const mh_attn_problem* p, int prepack_ok) {
    return prepack_ok && n_query_tiles(k, p) > 1 && block_rows(k, p) >= k->attn_direct_rows;
}

static size_t n_kv_tiles(const mh_kernels* k, const mh_attn_problem* p) {
    return ((size_t)p->n_kv + k->attn_kv_tile - 1) / k->attn_kv_tile;
}

/* Floats of one packed K tile ([kv_tile/NR][Dqk][NR]) and one packed V tile
 * ([ceil(Dv/NR)][kv_tile][NR]), the same shapes the per-thread scratch holds. */
static size_t kt_floats(const mh_kernels* k, const mh_attn_problem* p) {
    return k->attn_kv_tile * (size_t)p->head_dim_qk;
}

static size_t vt_floats(const mh_kernels* k, const mh_attn_problem* p) {
    const size_t nr = k->gemm_nr;
    return ((size_t)p->head_dim_v + nr - 1) / nr * nr * k->attn_kv_tile;
}

/* The whole workspace of one call, carved in this order from its start. */
typedef struct core_ws {
    unsigned char* scratch; /* [threads][per_thread]  per-worker scratch */
    size_t per_thread;
    float* partials;        /* split-KV partial states, when decode-shaped */
    float* kt_all;          /* [B*Hkv][n_kv_tiles] packed K tiles, when prepacking */
    float* vt_all;          /* [B*Hkv][n_kv_tiles] packed V tiles */
} core_ws;

static void core_layout(const mh_kernels* k, int threads, const mh_attn_problem* p, int prepack_ok,
                        mh_ws* ws, core_ws* out) {
    memset(out, 0, sizeof *out);
    out->per_thread = per_thread_bytes(k, p);
    if (out->per_thread == 0) ws->overflow = 1;
    out->scratch = mh_ws_take(ws, (size_t)threads, out->per_thread, 1);
    size_t heads = 0;
    if (!mh_mul_size((size_t)p->batch, (size_t)p->n_kv_heads, &heads)) ws->overflow = 1;
    if (n_query_tiles(k, p) == 1) /* room for split-KV partial states */
        out->partials = mh_split_take(ws, heads, block_rows(k, p), (size_t)p->head_dim_v);
    if (use_prepack(k, p, prepack_ok)) {
        size_t tiles = 0;
        if (!mh_mul_size(heads, n_kv_tiles(k, p), &tiles)) ws->overflow = 1;
        out->kt_all = mh_ws_take(ws, tiles, kt_floats(k, p), sizeof(float));
        out->vt_all = mh_ws_take(ws, tiles, vt_floats(k, p), sizeof(float));
    }
}

void* mh_core_attention_carve(const mh_kernels* k, int threads, const mh_attn_problem* p,
                              int prepack_ok, mh_ws* ws) {
    core_ws c;
    core_layout(k, threads, p, prepack_ok, ws, &c);
    return c.scratch;
}

/* Every layout part grows with n_q except the split-KV partials, which exist only while the
 * call has one query tile: the largest layout is the one at n_q or at one full tile. */
void* mh_core_attention_carve_upto(const mh_kernels* k, int threads, const mh_attn_problem* p,
                                   int prepack_ok, mh_ws* ws) {
    mh_attn_problem one_tile = *p;
    one_tile.n_q = (int)q_tile(k, p);
    mh_ws a = mh_ws_begin(NULL), b = mh_ws_begin(NULL);
    core_ws unused;
    core_layout(k, threads, p, prepack_ok, &a, &unused);
    core_layout(k, threads, &one_tile, prepack_ok, &b, &unused);
    if (a.overflow || b.overflow) ws->overflow = 1;
    return mh_ws_take(ws, a.used > b.used ? a.used : b.used, 1, 1);
}

/* One task: batch b, KV head kvh, queries [i0, i0 + nr). */
typedef struct task {
    int b, kvh;
    size_t i0, nr;
} task;

/* Decode blocks (one query per head) of up to this many rows (query heads sharing a KV head)
 * stay on the direct kernels, in chunks: streaming K/V once beats packing it for a GEMM that
 * has too few rows to pay for the packing. */
#define DIRECT_MAX_ROWS 16

static int use_direct(const mh_kernels* k, const mh_score_block* blk, size_t rows) {
    return rows < k->attn_direct_rows || (blk->rows_per_head == 1 && rows <= DIRECT_MAX_ROWS);
}

/* Finished scores (Q.K^T, then the score step) of keys [j0, j0 + nc) into sc->s. Decode
 * blocks read K in place (use_direct); larger ones pack the tile and use the GEMM
 * micro-kernel. */
static void score_tile(const mh_kernels* k, const mh_attn_problem* p, const mh_score_block* blk,
                       const void* kbase, const float* kt_pre, size_t rows, int64_t j0, size_t nc,
                       scratch* sc) {
    const size_t dqk = (size_t)p->head_dim_qk, tk = k->attn_kv_tile, mr = k->gemm_mr, nr = k->gemm_nr;
    const void* ksrc = mh_dtype_at(kbase, p->k_dtype, (ptrdiff_t)j0 * p->k.stride_token);
    if (use_direct(k, blk, rows)) { /* chunks the kernel takes; the K tile stays in cache */
        for (size_t r = 0; r < rows; r += k->attn_direct_rows - 1)
            k->qk_direct(min_size(k->attn_direct_rows - 1, rows - r), nc, dqk, sc->q + r * dqk, dqk,
                         ksrc, p->k.stride_token, p->k_dtype, sc->s + r * tk, tk);
    } else {
        const float* kt = kt_pre;
        if (!kt) {
            k->pack_kt(nc, dqk, ksrc, p->k.stride_token, p->k_dtype, sc->kt);
            kt = sc->kt;
        }
        for (size_t c0 = 0; c0 < nc; c0 += nr) {
            const float* panel = kt + (c0 / nr) * dqk * nr;
            for (size_t r = 0; r < rows; r += mr) {
                const size_t m = min_size(mr, rows - r), n = min_size(nr, nc - c0);
                float* srow = sc->s + r * tk + c0;
                if (mh_score_rows_dropped(blk, r, m, j0)) { /* before the diagonal: all -inf */
                    for (size_t i = 0; i < m; i++)
                        for (size_t j = 0; j < n; j++) srow[i * tk + j] = -INFINITY;
                    continue;
                }
                k->gemm(m, n, dqk, sc->q + r * dqk, dqk, panel, NULL, srow, tk);
            }
        }
    }
    mh_score_tile(blk, sc->s, tk, j0, nc);
}

/* o = alpha * o + P.V for keys [j0, j0 + nc). Rows causality drops entirely have P = 0 and
 * alpha = 1 here, so they are skipped. vt_pre, if given, is the tile packed for vt_cols keys
 * (>= nc) starting at j0. */
static void accumulate_pv(const mh_kernels* k, const mh_attn_problem* p, const mh_score_block* blk,
                          const void* vbase, const float* vt_pre, size_t vt_cols, size_t rows,
                          int64_t j0, size_t nc, scratch* sc) {
    const size_t dv = (size_t)p->head_dim_v, tk = k->attn_kv_tile, mr = k->gemm_mr, nr = k->gemm_nr;
    const void* vsrc = mh_dtype_at(vbase, p->v_dtype, (ptrdiff_t)j0 * p->v.stride_token);
    if (use_direct(k, blk, rows)) {
        for (size_t r = 0; r < rows; r += k->attn_direct_rows - 1)
            k->pv_direct(min_size(k->attn_direct_rows - 1, rows - r), nc, dv, sc->s + r * tk, tk, vsrc,
                         p->v.stride_token, p->v_dtype, sc->alpha + r, sc->o + r * dv, dv);
        return;
    }
    const float* vt = vt_pre;
    if (!vt) {
        k->pack_v(nc, dv, vsrc, p->v.stride_token, p->v_dtype, sc->vt);
        vt = sc->vt, vt_cols = nc;
    }
    for (size_t d0 = 0; d0 < dv; d0 += nr) {
        const float* panel = vt + (d0 / nr) * vt_cols * nr;
        for (size_t r = 0; r < rows; r += mr)
            if (!mh_score_rows_dropped(blk, r, min_size(mr, rows - r), j0))
                k->gemm_acc(min_size(mr, rows - r), min_size(nr, dv - d0), nc, sc->s + r * tk, tk,
                            panel, sc->alpha + r, sc->o + r * dv + d0, dv);
    }
}

/* probs[b, h, i, :] for the block, from the final max m and sum l (zeros where dropped). */
static void write_probs(const mh_kernels* k, const mh_attn_problem* p, const mh_attn_options* opt,
                        const mh_score_block* blk, const task* t, const void* kbase,
                        int64_t j_begin, int64_t j_end, scratch* sc) {
    const size_t g = group_size(p), rows = g * t->nr, tk = k->attn_kv_tile;
    const size_t M = (size_t)p->n_kv, N = (size_t)p->n_q;
    for (size_t r = 0; r < rows; r++) {
        const size_t h = (size_t)t->kvh * g + r / t->nr, i = t->i0 + r % t->nr;
        memset(opt->probs + (((size_t)t->b * p->n_heads + h) * N + i) * M, 0, M * sizeof(float));
    }
    for (int64_t j0 = j_begin; j0 < j_end; j0 += (int64_t)tk) {
        const size_t nc = (size_t)min_size(tk, (size_t)(j_end - j0));
        score_tile(k, p, blk, kbase, NULL, rows, j0, nc, sc);
        for (size_t r = 0; r < rows; r++) {
            if (sc->m[r] == -INFINITY) continue;
            const size_t h = (size_t)t->kvh * g + r / t->nr, i = t->i0 + r % t->nr;
            float* prow = opt->probs + (((size_t)t->b * p->n_heads + h) * N + i) * M + j0;
            const float inv_l = 1.0f / sc->l[r];
            for (size_t c = 0; c < nc; c++) prow[c] = expf(sc->s[r * tk + c] - sc->m[r]) * inv_l;
        }
    }
}

/* Everything about one task that does not depend on the key chunk. */
typedef struct task_ctx {
    task t;
    size_t rows;
    int h0;
    mh_score_block blk;
    int64_t j_begin, j_end;
    const void *kbase, *vbase;
    const int32_t* q_row;  /* [nr] tokens of the task's rows (mh_core_extra), or NULL */
    const float* o_scale;  /* [nr] output row multipliers, or NULL */
} task_ctx;

/* Token of the task's row ii in Q and O. */
static ptrdiff_t task_token(const task_ctx* c, size_t ii) {
    return c->q_row ? (ptrdiff_t)c->q_row[ii] : (ptrdiff_t)(c->t.i0 + ii);
}

static void task_setup(const mh_kernels* k, const mh_attn_problem* p, const mh_attn_options* opt,
                       const mh_core_extra* ex, size_t ti, task_ctx* c) {
    const size_t tq = q_tile(k, p), n_qt = n_query_tiles(k, p), g = group_size(p);
    task* t = &c->t;
    t->kvh = (int)((ti / n_qt) % (size_t)p->n_kv_heads);
    t->b = (int)(ti / (n_qt * (size_t)p->n_kv_heads));
    t->i0 = (ti % n_qt) * tq;
    t->nr = min_size(tq, (size_t)p->n_q - t->i0);
    c->rows = g * t->nr;
    c->h0 = t->kvh * (int)g;
    const int64_t kv_len = opt->kv_len ? opt->kv_len[t->b] : p->n_kv;
    const int64_t q0 = opt->q_offset == MH_Q_OFFSET_END ? kv_len - p->n_q : opt->q_offset;
    mh_score_block blk = {t->nr, g, q0 + (int64_t)t->i0, opt->causal, opt->window, opt->softcap,
                          opt->alibi_slopes ? opt->alibi_slopes + c->h0 : NULL, NULL,
                          opt->mask_stride_head, opt->mask_stride_row, NULL};
    if (ex->q_pos) {
        blk.pos = ex->q_pos + (ptrdiff_t)t->b * p->n_q + (ptrdiff_t)t->i0;
        blk.p_first = blk.pos[0];
    }
    if (opt->mask)
        blk.mask = opt->mask + t->b * opt->mask_stride_batch + c->h0 * opt->mask_stride_head +
                   (ptrdiff_t)t->i0 * opt->mask_stride_row;
    c->blk = blk;
    const ptrdiff_t row0 = (ptrdiff_t)t->b * p->n_q + (ptrdiff_t)t->i0;
    c->q_row = ex->q_row ? ex->q_row + row0 : NULL;
    c->o_scale = ex->o_scale ? ex->o_scale + row0 : NULL;
    mh_score_key_range(&blk, kv_len, &c->j_begin, &c->j_end);
    c->kbase = mh_dtype_at(p->k.data, p->k_dtype, t->b * p->k.stride_batch + t->kvh * p->k.stride_head);
    c->vbase = mh_dtype_at(p->v.data, p->v_dtype, t->b * p->v.stride_batch + t->kvh * p->v.stride_head);
}

/* Online softmax over keys [j_lo, j_hi) of the task into sc->m, sc->l, sc->o (unnormalised).
 * With prepacked tiles (ws->kt_all), tiles are the call's fixed grid of kv_tile keys: the
 * range starts at the tile holding j_lo, and keys before j_lo in it are dropped by the score
 * step like any other masked key. */
static void attend(const mh_kernels* k, const mh_attn_problem* p, const core_ws* ws,
                   const task_ctx* c, float scale, int64_t j_lo, int64_t j_hi, scratch* sc) {
    const size_t rows = c->rows, tk = k->attn_kv_tile;
    const size_t dqk = (size_t)p->head_dim_qk, dv = (size_t)p->head_dim_v;
    const float* q = (const float*)p->q.data;
    for (size_t r = 0; r < rows; r++) { /* gather and pre-scale the query block */
        const size_t hh = r / c->t.nr, ii = r % c->t.nr;
        const float* src = q + c->t.b * p->q.stride_batch + task_token(c, ii) * p->q.stride_token +
                           (ptrdiff_t)(c->h0 + (int)hh) * p->q.stride_head;
        for (size_t d = 0; d < dqk; d++) sc->q[r * dqk + d] = src[d] * scale;
        sc->m[r] = -INFINITY;
        sc->l[r] = 0.0f;
    }
    memset(sc->o, 0, rows * dv * sizeof(float));
    const size_t head = (size_t)c->t.b * (size_t)p->n_kv_heads + (size_t)c->t.kvh;
    if (ws->kt_all && j_lo > 0) j_lo -= j_lo % (int64_t)tk;
    for (int64_t j0 = j_lo; j0 < j_hi; j0 += (int64_t)tk) {
        const size_t nc = min_size(tk, (size_t)(j_hi - j0));
        const float *kt = NULL, *vt = NULL;
        size_t vt_cols = 0;
        if (ws->kt_all) {
            const size_t tile = head * n_kv_tiles(k, p) + (size_t)j0 / tk;
            kt = ws->kt_all + tile * kt_floats(k, p);
            vt = ws->vt_all + tile * vt_floats(k, p);
            vt_cols = min_size(tk, (size_t)p->n_kv - (size_t)j0);
        }
        score_tile(k, p, &c->blk, c->kbase, kt, rows, j0, nc, sc);
        k->softmax_tile(rows, nc, sc->s, tk, sc->m, sc->l, sc->alpha);
        accumulate_pv(k, p, &c->blk, c->vbase, vt, vt_cols, rows, j0, nc, sc);
    }
}

/* Packs K/V tile `item` of the call's grid (head-major) into ws->kt_all / vt_all. */
static void prepack_tile(const mh_kernels* k, const mh_attn_problem* p, const core_ws* ws, size_t item) {
    const size_t n_tiles = n_kv_tiles(k, p), tk = k->attn_kv_tile;
    const size_t head = item / n_tiles, j0 = (item % n_tiles) * tk;
    const size_t b = head / (size_t)p->n_kv_heads, kvh = head % (size_t)p->n_kv_heads;
    const size_t nc = min_size(tk, (size_t)p->n_kv - j0);
    const void* ksrc = mh_dtype_at(p->k.data, p->k_dtype, (ptrdiff_t)b * p->k.stride_batch +
                               (ptrdiff_t)kvh * p->k.stride_head + (ptrdiff_t)j0 * p->k.stride_token);
    const void* vsrc = mh_dtype_at(p->v.data, p->v_dtype, (ptrdiff_t)b * p->v.stride_batch +
                               (ptrdiff_t)kvh * p->v.stride_head + (ptrdiff_t)j0 * p->v.stride_token);
    k->pack_kt(nc, (size_t)p->head_dim_qk, ksrc, p->k.stride_token, p->k_dtype,
               ws->kt_all + item * kt_floats(k, p));
    k->pack_v(nc, (size_t)p->head_dim_v, vsrc, p->v.stride_token, p->v_dtype,
              ws->vt_all + item * vt_floats(k, p));
}

/* Folds in the sink logit, normalises and writes the task's output rows from (m, l, acc);
 * leaves the final m and l behind for the probabilities. A row that kept no key (m = -inf)
 * gets zeros. acc rows are dv apart. */
static void finish(const mh_attn_problem* p, const mh_attn_options* opt, const task_ctx* c,
                   float* m, float* l, const float* acc_base) {
    const size_t dv = (size_t)p->head_dim_v;
    const float* sinks = opt->sinks ? opt->sinks + c->h0 : NULL;
    for (size_t r = 0; r < c->rows; r++) {
        const size_t hh = r / c->t.nr, ii = r % c->t.nr;
        float* dst = p->o.data + c->t.b * p->o.stride_batch + task_token(c, ii) * p->o.stride_token +
                     (ptrdiff_t)(c->h0 + (int)hh) * p->o.stride_head;
        const float* acc = acc_base + r * dv;
        if (m[r] == -INFINITY) {
            memset(dst, 0, dv * sizeof(float));
            continue;
        }
        const float a = sinks ? mh_fold_sink(&m[r], &l[r], sinks[hh]) : 1.0f;
        const float inv_l = 1.0f / l[r];
        for (size_t d = 0; d < dv; d++) dst[d] = acc[d] * a * inv_l;
        if (c->o_scale)
            for (size_t d = 0; d < dv; d++) dst[d] *= c->o_scale[ii];
    }
}

/* Everything the workers of one call share. */
typedef struct call {
    const mh_kernels* k;
    const mh_attn_problem* p;
    const mh_attn_options* opt;
    const mh_core_extra* ex;
    core_ws cw;
    size_t n_pack;    /* K/V tiles to prepack (0 = none) */
    size_t n_tasks;   /* (batch, KV head, query tile) tasks */
    mh_split_kv split; /* key chunks per task (split-KV decode) and their partial states */
    float scale;
    long next_item;   /* the dynamic schedule's counter */
} call;

static int task_active(const call* c, const task_ctx* t) {
    return !c->ex->kv_active || c->ex->kv_active[t->t.b * c->p->n_kv_heads + t->t.kvh];
}

/* Runs item `item` (task item / n_split, key chunk item % n_split). */
static void run_item(call* c, size_t item, scratch* sc) {
    const mh_kernels* k = c->k;
    const mh_attn_problem* p = c->p;
    const mh_attn_options* opt = c->opt;
    const size_t ti = item / c->split.n_split, ci = item % c->split.n_split;
    task_ctx t;
    task_setup(k, p, opt, c->ex, ti, &t);
    if (!task_active(c, &t)) return;
    if (c->split.n_split == 1) {
        attend(k, p, &c->cw, &t, c->scale, t.j_begin, t.j_end, sc);
        finish(p, opt, &t, sc->m, sc->l, sc->o);
        if (opt->probs) write_probs(k, p, opt, &t.blk, &t.t, t.kbase, t.j_begin, t.j_end, sc);
        return;
    }
    int64_t lo, hi;
    mh_split_chunk(&c->split, ci, t.j_begin, t.j_end, k->attn_kv_tile, &lo, &hi);
    attend(k, p, &c->cw, &t, c->scale, lo, hi, sc);
    mh_split_store(&c->split, ti, ci, sc->m, sc->l, sc->o);
}

/* One worker: prepack its share of K/V tiles, then take items until none is left (dynamic:
 * causal tasks differ in cost; which worker runs an item never changes its result), then
 * merge its share of split tasks. */
static void worker(void* arg, int tid, int nth) {
    call* c = arg;
    mh_ws ws = mh_ws_begin(c->cw.scratch + (size_t)tid * c->cw.per_thread);
    scratch sc;
    carve_scratch(c->k, c->p, &ws, &sc);
    if (c->n_pack) {
        for (size_t i = (size_t)tid; i < c->n_pack; i += (size_t)nth) prepack_tile(c->k, c->p, &c->cw, i);
        mh_barrier(nth);
    }
    const size_t n_items = c->n_tasks * c->split.n_split;
    for (long item; (item = mh_next_item(&c->next_item)) < (long)n_items;) run_item(c, (size_t)item, &sc);
    if (c->split.n_split == 1) return;
    mh_barrier(nth);
    for (size_t ti = (size_t)tid; ti < c->n_tasks; ti += (size_t)nth) {
        task_ctx t;
        task_setup(c->k, c->p, c->opt, c->ex, ti, &t);
        if (!task_active(c, &t)) continue;
        float* base = mh_split_merge(&c->split, ti);
        finish(c->p, c->opt, &t, base, base + t.rows, base + 2 * t.rows);
    }
}

void mh_core_attention(const mh_kernels* k, int threads, const mh_attn_problem* p,
                       const mh_attn_options* opt, int prepack_ok, void* ws_base) {
    const mh_core_extra none = {NULL, NULL, NULL, NULL};
    mh_core_attention_ex(k, threads, p, opt, prepack_ok, ws_base, &none);
}

void mh_core_attention_ex(const mh_kernels* k, int threads, const mh_attn_problem* p,
                          const mh_attn_options* opt, int prepack_ok, void* ws_base,
                          const mh_core_extra* ex) {
    call c;
    memset(&c, 0, sizeof c);
    c.k = k, c.p = p, c.opt = opt, c.ex = ex;
    mh_ws layout = mh_ws_begin(ws_base);
    core_layout(k, threads, p, prepack_ok, &layout, &c.cw);
    c.n_tasks = (size_t)p->batch * (size_t)p->n_kv_heads * n_query_tiles(k, p);
    c.split = mh_split_plan(c.cw.partials, block_rows(k, p), (size_t)p->head_dim_v,
                            mh_split_count(n_query_tiles(k, p), opt, p->n_kv));
    c.n_pack = c.cw.kt_all ? (size_t)p->batch * (size_t)p->n_kv_heads * n_kv_tiles(k, p) : 0;
    c.scale = p->scale != 0.0f ? p->scale : 1.0f / sqrtf((float)p->head_dim_qk);
    const double flops = 2.0 * (double)p->batch * p->n_q * p->n_kv * p->n_heads *
                         (p->head_dim_qk + p->head_dim_v); /* upper bound (ignores masks) */
    mh_parallel(mh_workers(threads, c.n_tasks * c.split.n_split, flops), worker, &c);
}
