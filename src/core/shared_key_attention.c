/*
 * Tiled online-softmax attention over one key stream shared by all heads (CollabHead).
 *
 * A task is (batch, query tile) and holds the rows of ALL heads for its queries, head-major
 * (r = h * tq + i), each row the query mixed with its head's row, q~_i * m_h, pre-scaled. The
 * scores of every head are then one GEMM (or one direct pass for decode) against the shared
 * key tile, so each K tile is read once for all heads; the content bias bias[j][h] is added
 * per (head, key); P.V runs per head on that head's values.
 *
 * Decode-shaped calls (one query tile) split the keys into up to MAX_SPLIT chunks merged in
 * order, so one sequence can use several threads. Every split and every task's arithmetic
 * depends only on the shapes, never on the thread count: results are bitwise identical.
 */
#include "core/shared_key_attention.h"

#include <math.h>
#include <string.h>

#include "core/parallel.h"
#include "core/score.h"
#include "util/dtype.h"

#define MAX_SPLIT 8
#define SPLIT_KEYS 1024

typedef struct scratch {
    float* q;     /* [rows][D~]                 mixed, pre-scaled queries */
    float* kt;    /* [kv_tile/NR][D~][NR]       packed shared K tile */
    float* vt;    /* [ceil(Dv/NR)][kv_tile][NR] packed V tile of one head */
    float* s;     /* [rows][kv_tile]            scores, then probabilities */
    float* o;     /* [rows][Dv]                 running output */
    float *m, *l, *alpha; /* [rows] */
} scratch;

static size_t min_size(size_t a, size_t b) { return a < b ? a : b; }

/* Queries per task: the H heads together fill about attn_block_rows rows. */
static size_t q_tile(const mh_kernels* k, const mh_shared_key_problem* p) {
    const size_t per_head = k->attn_block_rows / (size_t)p->n_heads;
    return min_size(per_head ? per_head : 1, (size_t)p->n_q);
}

static size_t block_rows(const mh_kernels* k, const mh_shared_key_problem* p) {
    return (size_t)p->n_heads * q_tile(k, p);
}

static size_t n_query_tiles(const mh_kernels* k, const mh_shared_key_problem* p) {
    const size_t tq = q_tile(k, p);
    return ((size_t)p->n_q + tq - 1) / tq;
}

static size_t n_splits(const mh_kernels* k, const mh_shared_key_problem* p, const mh_attn_options* opt) {
    if (n_query_tiles(k, p) != 1 || opt->probs) return 1;
    const size_t n = (size_t)p->n_kv / SPLIT_KEYS;
    return n < 1 ? 1 : n > MAX_SPLIT ? MAX_SPLIT : n;
}

static size_t partial_floats(const mh_kernels* k, const mh_shared_key_problem* p) {
    return block_rows(k, p) * ((size_t)p->head_dim_v + 2);
}

static void carve_scratch(const mh_kernels* k, const mh_shared_key_problem* p, mh_ws* ws, scratch* sc) {
    const size_t rows = block_rows(k, p), tk = k->attn_kv_tile, nr = k->gemm_nr;
    const size_t dqk = (size_t)p->dim_qk, dv = (size_t)p->head_dim_v;
    sc->q = mh_ws_take(ws, rows, dqk, sizeof(float));
    sc->kt = mh_ws_take(ws, dqk, tk, sizeof(float));
    sc->vt = mh_ws_take(ws, (dv + nr - 1) / nr * nr, tk, sizeof(float));
    sc->s = mh_ws_take(ws, rows, tk, sizeof(float));
    sc->o = mh_ws_take(ws, rows, dv, sizeof(float));
    sc->m = mh_ws_take(ws, rows, 1, sizeof(float));
    sc->l = mh_ws_take(ws, rows, 1, sizeof(float));
    sc->alpha = mh_ws_take(ws, rows, 1, sizeof(float));
}

/* The workspace of one call: per-worker scratch, then the split partial states. */
typedef struct sk_ws {
    unsigned char* scratch; /* [threads][per_thread] */
    size_t per_thread;
    float* partials;        /* [B][MAX_SPLIT][partial_floats], decode-shaped calls only */
} sk_ws;

static void layout(const mh_kernels* k, int threads, const mh_shared_key_problem* p, mh_ws* ws, sk_ws* out) {
    memset(out, 0, sizeof *out);
    mh_ws measure = mh_ws_begin(NULL);
    scratch unused;
    carve_scratch(k, p, &measure, &unused);
    if (measure.overflow || !mh_align_size(measure.used, MH_WS_ALIGN, &out->per_thread)) ws->overflow = 1;
    out->scratch = mh_ws_take(ws, (size_t)threads, out->per_thread, 1);
    if (n_query_tiles(k, p) == 1)
        out->partials = mh_ws_take(ws, (size_t)p->batch * MAX_SPLIT, partial_floats(k, p), sizeof(float));
}

void* mh_shared_key_attention_carve(const mh_kernels* k, int threads, const mh_shared_key_problem* p,
                                    mh_ws* ws) {
    sk_ws w;
    layout(k, threads, p, ws, &w);
    return w.scratch;
}

/* Everything about one task (batch b, queries [i0, i0 + tq)) that does not depend on keys. */
typedef struct task_ctx {
    int b;
    size_t i0, tq, rows;
    int direct_qk, direct_pv;
    mh_score_block blk;
    int64_t j_begin, j_end;
    const void *kbase, *vbase;
    const float* bias; /* [M][H] of batch b */
} task_ctx;

static void task_setup(const mh_kernels* k, const mh_shared_key_problem* p, const mh_attn_options* opt,
                       size_t ti, task_ctx* c) {
    const size_t tq = q_tile(k, p), n_qt = n_query_tiles(k, p);
    c->b = (int)(ti / n_qt);
    c->i0 = (ti % n_qt) * tq;
    c->tq = min_size(tq, (size_t)p->n_q - c->i0);
    c->rows = (size_t)p->n_heads * c->tq;
    /* Decode's H rows share every key: packing the tile once (converted to f32) and one GEMM
     * beat the direct kernel, which reconverts each key for every chunk of rows it takes. */
    c->direct_qk = c->rows < k->attn_direct_rows;
    c->direct_pv = c->tq < k->attn_direct_rows;
    const int64_t kv_len = opt->kv_len ? opt->kv_len[c->b] : p->n_kv;
    const int64_t q0 = opt->q_offset == MH_Q_OFFSET_END ? kv_len - p->n_q : opt->q_offset;
    mh_score_block blk = {c->tq, (size_t)p->n_heads, q0 + (int64_t)c->i0, opt->causal, opt->window,
                          opt->softcap, opt->alibi_slopes, NULL, opt->mask_stride_head,
                          opt->mask_stride_row, NULL};
    if (opt->mask) blk.mask = opt->mask + c->b * opt->mask_stride_batch + (ptrdiff_t)c->i0 * opt->mask_stride_row;
    c->blk = blk;
    /* the key range any row may keep (causal / window / kv_len); the score step masks the rest */
    const int64_t p_last = blk.p_first + (int64_t)c->tq - 1;
    int64_t jb = 0, je = kv_len;
    if (opt->causal && p_last + 1 < je) je = p_last + 1;
    if (opt->window > 0) {
        if (blk.p_first - opt->window + 1 > jb) jb = blk.p_first - opt->window + 1;
        if (!opt->causal && p_last + opt->window < je) je = p_last + opt->window;
    }
    c->j_begin = jb, c->j_end = je;
    c->kbase = mh_dtype_at(p->k, p->k_dtype, c->b * p->k_stride_batch);
    c->vbase = mh_dtype_at(p->v.data, p->v_dtype, c->b * p->v.stride_batch);
    c->bias = p->bias + c->b * p->bias_stride_batch;
}

/* Finished scores of keys [j0, j0 + nc) for all rows into sc->s. */
static void score_tile(const mh_kernels* k, const mh_shared_key_problem* p, const task_ctx* c,
                       int64_t j0, size_t nc, scratch* sc) {
    const size_t dqk = (size_t)p->dim_qk, tk = k->attn_kv_tile, mr = k->gemm_mr, nr = k->gemm_nr;
    const size_t rows = c->rows, H = (size_t)p->n_heads;
    const void* ksrc = mh_dtype_at(c->kbase, p->k_dtype, (ptrdiff_t)j0 * (ptrdiff_t)dqk);
    if (c->direct_qk) {
        for (size_t r = 0; r < rows; r += k->attn_direct_rows - 1)
            k->qk_direct(min_size(k->attn_direct_rows - 1, rows - r), nc, dqk, sc->q + r * dqk, dqk, ksrc,
                         (ptrdiff_t)dqk, p->k_dtype, sc->s + r * tk, tk);
    } else {
        k->pack_kt(nc, dqk, ksrc, (ptrdiff_t)dqk, p->k_dtype, sc->kt);
        for (size_t c0 = 0; c0 < nc; c0 += nr) {
            const float* panel = sc->kt + (c0 / nr) * dqk * nr;
            for (size_t r = 0; r < rows; r += mr) {
                const size_t m = min_size(mr, rows - r), n = min_size(nr, nc - c0);
                float* srow = sc->s + r * tk + c0;
                if (mh_score_rows_dropped(&c->blk, r, m, j0)) {
                    for (size_t i = 0; i < m; i++)
                        for (size_t j = 0; j < n; j++) srow[i * tk + j] = -INFINITY;
                    continue;
                }
                k->gemm(m, n, dqk, sc->q + r * dqk, dqk, panel, NULL, srow, tk);
            }
        }
    }
    for (size_t r = 0; r < rows; r++) { /* the content bias, scaled like the dot product */
        const float* b = c->bias + j0 * (int64_t)H + (int64_t)(r / c->tq);
        float* srow = sc->s + r * tk;
        for (size_t j = 0; j < nc; j++) srow[j] += p->scale * b[j * H];
    }
    mh_score_tile(&c->blk, sc->s, tk, j0, nc);
}

/* o = alpha * o + P_h.V_h for keys [j0, j0 + nc), head by head. */
static void accumulate_pv(const mh_kernels* k, const mh_shared_key_problem* p, const task_ctx* c,
                          int64_t j0, size_t nc, scratch* sc) {
    const size_t dv = (size_t)p->head_dim_v, tk = k->attn_kv_tile, mr = k->gemm_mr, nr = k->gemm_nr;
    const size_t tq = c->tq;
    for (int h = 0; h < p->n_heads; h++) {
        const size_t r0 = (size_t)h * tq;
        const void* vsrc = mh_dtype_at(c->vbase, p->v_dtype, j0 * p->v.stride_token + h * p->v.stride_head);
        if (c->direct_pv) {
            k->pv_direct(tq, nc, dv, sc->s + r0 * tk, tk, vsrc, p->v.stride_token, p->v_dtype,
                         sc->alpha + r0, sc->o + r0 * dv, dv);
            continue;
        }
        k->pack_v(nc, dv, vsrc, p->v.stride_token, p->v_dtype, sc->vt);
        for (size_t d0 = 0; d0 < dv; d0 += nr) {
            const float* panel = sc->vt + (d0 / nr) * nc * nr;
            for (size_t r = r0; r < r0 + tq; r += mr) {
                const size_t m = min_size(mr, r0 + tq - r);
                if (!mh_score_rows_dropped(&c->blk, r, m, j0))
                    k->gemm_acc(m, min_size(nr, dv - d0), nc, sc->s + r * tk, tk, panel, sc->alpha + r,
                                sc->o + r * dv + d0, dv);
            }
        }
    }
}

/* Online softmax over keys [j_lo, j_hi) into sc->m, sc->l, sc->o (unnormalised). */
static void attend(const mh_kernels* k, const mh_shared_key_problem* p, const task_ctx* c, int64_t j_lo,
                   int64_t j_hi, scratch* sc) {
    const size_t dqk = (size_t)p->dim_qk, tk = k->attn_kv_tile;
    for (size_t r = 0; r < c->rows; r++) { /* q^_{i,h} = q~_i * m_h * scale */
        const float* q = p->q + ((size_t)c->b * (size_t)p->n_q + c->i0 + r % c->tq) * dqk;
        const float* mix = p->mix + (r / c->tq) * dqk;
        for (size_t d = 0; d < dqk; d++) sc->q[r * dqk + d] = q[d] * mix[d] * p->scale;
        sc->m[r] = -INFINITY;
        sc->l[r] = 0.0f;
    }
    memset(sc->o, 0, c->rows * (size_t)p->head_dim_v * sizeof(float));
    for (int64_t j0 = j_lo; j0 < j_hi; j0 += (int64_t)tk) {
        const size_t nc = min_size(tk, (size_t)(j_hi - j0));
        score_tile(k, p, c, j0, nc, sc);
        k->softmax_tile(c->rows, nc, sc->s, tk, sc->m, sc->l, sc->alpha);
        accumulate_pv(k, p, c, j0, nc, sc);
    }
}

/* Sink logit, normalisation and the task's output rows from (m, l, acc); a row that kept no
 * key gets zeros. Leaves the final m and l for the probabilities. */
static void finish(const mh_shared_key_problem* p, const mh_attn_options* opt, const task_ctx* c,
                   float* m, float* l, const float* acc_base) {
    const size_t dv = (size_t)p->head_dim_v;
    for (size_t r = 0; r < c->rows; r++) {
        const size_t h = r / c->tq, i = c->i0 + r % c->tq;
        float* dst = p->o + (((size_t)c->b * (size_t)p->n_q + i) * (size_t)p->n_heads + h) * dv;
        const float* acc = acc_base + r * dv;
        if (m[r] == -INFINITY) {
            memset(dst, 0, dv * sizeof(float));
            continue;
        }
        float a = 1.0f;
        if (opt->sinks && opt->sinks[h] > m[r]) { /* the sink becomes the max: rescale */
            a = expf(m[r] - opt->sinks[h]);
            l[r] *= a;
            m[r] = opt->sinks[h];
        }
        if (opt->sinks) l[r] += expf(opt->sinks[h] - m[r]);
        const float scale = a / l[r];
        for (size_t d = 0; d < dv; d++) dst[d] = acc[d] * scale;
    }
}

/* probs[b, h, i, :] of the task from the final m and l (zeros where dropped). */
static void write_probs(const mh_kernels* k, const mh_shared_key_problem* p, const mh_attn_options* opt,
                        const task_ctx* c, scratch* sc) {
    const size_t tk = k->attn_kv_tile, M = (size_t)p->n_kv, N = (size_t)p->n_q;
    for (size_t r = 0; r < c->rows; r++) {
        const size_t h = r / c->tq, i = c->i0 + r % c->tq;
        memset(opt->probs + (((size_t)c->b * (size_t)p->n_heads + h) * N + i) * M, 0, M * sizeof(float));
    }
    for (int64_t j0 = c->j_begin; j0 < c->j_end; j0 += (int64_t)tk) {
        const size_t nc = min_size(tk, (size_t)(c->j_end - j0));
        score_tile(k, p, c, j0, nc, sc);
        for (size_t r = 0; r < c->rows; r++) {
            if (sc->m[r] == -INFINITY) continue;
            const size_t h = r / c->tq, i = c->i0 + r % c->tq;
            float* prow = opt->probs + (((size_t)c->b * (size_t)p->n_heads + h) * N + i) * M + j0;
            const float inv_l = 1.0f / sc->l[r];
            for (size_t j = 0; j < nc; j++) prow[j] = expf(sc->s[r * tk + j] - sc->m[r]) * inv_l;
        }
    }
}

/* Merges the key chunks of one task in order into chunk 0 ([m rows][l rows][acc rows x dv]). */
static void merge(size_t rows, size_t dv, size_t n_split, float* base, size_t per_partial) {
    float *m = base, *l = base + rows, *acc = base + 2 * rows;
    for (size_t ci = 1; ci < n_split; ci++) {
        const float* pm = base + ci * per_partial;
        const float *pl = pm + rows, *pacc = pm + 2 * rows;
        for (size_t r = 0; r < rows; r++) {
            if (pm[r] == -INFINITY) continue;
            const float mx = pm[r] > m[r] ? pm[r] : m[r];
            const float a = expf(m[r] - mx), b = expf(pm[r] - mx);
            for (size_t d = 0; d < dv; d++) acc[r * dv + d] = acc[r * dv + d] * a + pacc[r * dv + d] * b;
            l[r] = l[r] * a + pl[r] * b;
            m[r] = mx;
        }
    }
}

typedef struct call {
    const mh_kernels* k;
    const mh_shared_key_problem* p;
    const mh_attn_options* opt;
    sk_ws w;
    size_t n_tasks, n_split;
    long next_item;
} call;

static float* partial_at(const call* c, size_t ti, size_t ci) {
    return c->w.partials + (ti * MAX_SPLIT + ci) * partial_floats(c->k, c->p);
}

static void run_item(call* c, size_t item, scratch* sc) {
    const size_t ti = item / c->n_split, ci = item % c->n_split;
    task_ctx t;
    task_setup(c->k, c->p, c->opt, ti, &t);
    if (c->n_split == 1) {
        attend(c->k, c->p, &t, t.j_begin, t.j_end, sc);
        finish(c->p, c->opt, &t, sc->m, sc->l, sc->o);
        if (c->opt->probs) write_probs(c->k, c->p, c->opt, &t, sc);
        return;
    }
    const int64_t span = t.j_end > t.j_begin ? t.j_end - t.j_begin : 0;
    const int64_t tk = (int64_t)c->k->attn_kv_tile, n_split = (int64_t)c->n_split;
    const int64_t chunk = ((span + n_split - 1) / n_split + tk - 1) / tk * tk;
    const int64_t lo = t.j_begin + (int64_t)ci * chunk;
    const int64_t hi = lo + chunk < t.j_end ? lo + chunk : t.j_end;
    attend(c->k, c->p, &t, lo, hi > lo ? hi : lo, sc);
    float* part = partial_at(c, ti, ci);
    memcpy(part, sc->m, t.rows * sizeof(float));
    memcpy(part + t.rows, sc->l, t.rows * sizeof(float));
    memcpy(part + 2 * t.rows, sc->o, t.rows * (size_t)c->p->head_dim_v * sizeof(float));
}

static void worker(void* arg, int tid, int nth) {
    call* c = arg;
    mh_ws ws = mh_ws_begin(c->w.scratch + (size_t)tid * c->w.per_thread);
    scratch sc;
    carve_scratch(c->k, c->p, &ws, &sc);
    const size_t n_items = c->n_tasks * c->n_split;
    for (long item; (item = mh_next_item(&c->next_item)) < (long)n_items;) run_item(c, (size_t)item, &sc);
    if (c->n_split == 1) return;
    mh_barrier(nth);
    for (size_t ti = (size_t)tid; ti < c->n_tasks; ti += (size_t)nth) {
        task_ctx t;
        task_setup(c->k, c->p, c->opt, ti, &t);
        float* base = partial_at(c, ti, 0);
        merge(t.rows, (size_t)c->p->head_dim_v, c->n_split, base, partial_floats(c->k, c->p));
        finish(c->p, c->opt, &t, base, base + t.rows, base + 2 * t.rows);
    }
}

void mh_shared_key_attention(const mh_kernels* k, int threads, const mh_shared_key_problem* p,
                             const mh_attn_options* opt, void* ws_base) {
    call c;
    memset(&c, 0, sizeof c);
    c.k = k, c.p = p, c.opt = opt;
    mh_ws ws = mh_ws_begin(ws_base);
    layout(k, threads, p, &ws, &c.w);
    c.n_tasks = (size_t)p->batch * n_query_tiles(k, p);
    c.n_split = n_splits(k, p, opt);
    const double flops = 2.0 * (double)p->batch * p->n_q * p->n_kv * p->n_heads *
                         (p->dim_qk + p->head_dim_v); /* upper bound (ignores masks) */
    mh_parallel(mh_workers(threads, c.n_tasks * c.n_split, flops), worker, &c);
}
