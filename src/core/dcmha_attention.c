/*
 * DCMHA attention over (batch, head group, query tile) tasks. Post-composition mixes the
 * normalised probabilities of heads with different normalisers, so the online softmax of
 * attention.c does not apply; a task runs two passes over its keys, key tile by key tile:
 *   pass 1: Q.K^T for all Hg heads of its group, pre-composition across heads (kernel
 *           head_mix), the mask, then softmax_tile: the tile becomes exp(s - running max)
 *           and the running max/sum advance;
 *   pass 2: with each row's final max m and sum l, the tile's exponentials times
 *           exp(running max - m) / l (the composition's per-row input scale) are post-composed
 *           and accumulated as P'.V per head.
 * Pass 2 reads pass 1's tiles of exponentials back (each written once and read once) from
 *   materialised: a per-worker buffer (prefill; K/V packed once per call);
 *   two-pass:     a store of fixed size when they fit (decode), else it recomputes them as
 *                 pass 1 made them (same tiles, so the same bits).
 * Two-pass tasks of decode shape split their keys into chunks (fixed by the shapes) whose
 * statistics and outputs are merged in order, so results never depend on the thread count.
 */
#include "core/dcmha_attention.h"

#include <math.h>
#include <string.h>

#include "core/parallel.h"
#include "core/split_kv.h"
#include "util/dtype.h"

/* Keys per compute tile, rounded to a multiple of the GEMM's NR. Prefill: a tile of all Hg
 * heads' scores of a task (tq rows of tk keys per head), raw and composed, stays in L2.
 * Two-pass: as many keys as TWO_PASS_TILE_FLOATS allow over the task's rows, so each head's K/V
 * is read in long runs (a run restarts the prefetchers), at most TWO_PASS_MAX_KEYS. */
#define PREFILL_TILE_KEYS 64
#define TWO_PASS_TILE_FLOATS ((size_t)65536)
#define TWO_PASS_MAX_KEYS ((size_t)1024)
/* Query rows per task: up to MAX_ROW_BLOCKS GEMM row blocks, so each K/V tile a task packs or
 * streams serves that many rows; a materialised task's kept tiles stay within SCORE_BUDGET
 * bytes unless one row block alone needs more. */
#define MAX_ROW_BLOCKS 16
/* Decode keeps pass 1's tiles for pass 2 in a store of a size fixed by the shapes without M
 * (rows of the call times STORE_KEYS, at most STORE_BUDGET bytes): when a task's rows over all
 * M keys fit its share, pass 2 reads them instead of recomputing Q.K^T, the pre-composition
 * and the exponentials (the same bits either way). */
#define STORE_KEYS ((size_t)65536)
#define STORE_BUDGET ((size_t)16 << 20)
#define SCORE_BUDGET ((size_t)32 << 20)

static size_t min_size(size_t a, size_t b) { return a < b ? a : b; }

/* Shapes every part of a call derives the same way. */
typedef struct geom {
    size_t hg, fb, tq, tk, n_qt, n_tasks, n_tiles, m_pad, rows;
    size_t hs;       /* head stride of a score tile [Hg][hs], rows tk apart (tile_head_stride) */
    size_t v_panels; /* V columns rounded up to NR */
} geom;

void mh_dcmha_store_key(const mh_dcmha_key_factors* kf, int b, size_t pos, const float* pre, const float* post) {
    const size_t tk = MH_DCMHA_KEY_TILE, j0 = pos / tk * tk, n = min_size(tk, kf->cols - j0), c = pos - j0;
    float* tile = kf->data + (ptrdiff_t)b * kf->stride_batch + j0 * 2 * kf->branch;
    for (size_t r = 0; r < kf->branch; r++) tile[r * n + c] = pre[r], tile[(kf->branch + r) * n + c] = post[r];
}

/* A score tile holds head h's tq rows of tk keys at h * hs. The composition reads one row of
 * every head at a time: one cache line more than tq * tk puts the heads' rows in different L1
 * sets (tq * tk floats is a multiple of 4 KiB for most shapes, so they would all share one). */
#define TILE_PAD 16 /* floats */
static size_t tile_head_stride(size_t tq, size_t tk) { return tq * tk + TILE_PAD; }

/* n rounded to a multiple of NR, at least NR. */
static size_t panel_keys(const mh_kernels* k, size_t n) { return n < k->gemm_nr ? k->gemm_nr : n / k->gemm_nr * k->gemm_nr; }

static geom make_geom(const mh_kernels* k, const mh_dcmha_problem* p, int materialise) {
    geom g;
    g.hg = (size_t)(p->n_heads / p->groups);
    g.fb = (size_t)(2 * p->rank + 1) * g.hg;
    size_t blocks = MAX_ROW_BLOCKS;
    if (materialise) {
        g.tk = panel_keys(k, PREFILL_TILE_KEYS);
        /* the worker's store (store_floats) for tq rows: hg * tq * (m_pad + n_tiles) floats plus
         * the tiles' padding, TILE_PAD * hg * n_tiles */
        const size_t n_tiles = ((size_t)p->n_kv + g.tk - 1) / g.tk;
        const size_t padding = TILE_PAD * g.hg * n_tiles * sizeof(float);
        const size_t per_block = g.hg * k->gemm_mr * (n_tiles * g.tk + n_tiles) * sizeof(float);
        blocks = SCORE_BUDGET > padding ? (SCORE_BUDGET - padding) / per_block : 1;
        blocks = blocks < 1 ? 1 : blocks > MAX_ROW_BLOCKS ? MAX_ROW_BLOCKS : blocks;
    }
    g.tq = min_size(blocks * k->gemm_mr, (size_t)p->n_q);
    g.n_qt = ((size_t)p->n_q + g.tq - 1) / g.tq;
    g.n_tasks = (size_t)p->batch * (size_t)p->groups * g.n_qt;
    g.rows = g.hg * g.tq;
    if (!materialise) g.tk = panel_keys(k, min_size(TWO_PASS_TILE_FLOATS / g.rows, TWO_PASS_MAX_KEYS));
    g.n_tiles = ((size_t)p->n_kv + g.tk - 1) / g.tk;
    g.m_pad = g.n_tiles * g.tk;
    g.hs = tile_head_stride(g.tq, g.tk);
    g.v_panels = ((size_t)p->head_dim_v + k->gemm_nr - 1) / k->gemm_nr * k->gemm_nr;
    return g;
}

/* One worker's buffers (rows = Hg * tq, head-major: r = h * tq + t). */
typedef struct scratch {
    float* q;     /* [rows][D]   the task's queries, pre-scaled */
    float* t1;    /* [Hg][hs]    score tile: raw scores, later post-composed probabilities */
    float* t2;    /* [Hg][hs]    composed scores, then their exponentials (unstored pass 2) */
    float* s;     /* [stored_floats] the task's stored exponentials (materialised) */
    float* o;     /* [rows][Dv]  output accumulator */
    float* m;     /* [rows]      softmax max */
    float* l;     /* [rows]      softmax sum */
    float* mrun;  /* [rows]      pass 2's running max, recomputing as pass 1 did */
    float* lrun;  /* [rows]      and its sum (unused) */
    float* alpha; /* [rows]      softmax_tile's rescale output */
    float* ones;  /* [rows]      P.V accumulates with alpha = 1 */
    float* scale; /* [tq][Hg]    a tile's exponentials to probabilities, per query row */
    float* kpack; /* [tk/NR][D][NR]        one head's K tile packed (two-pass GEMM tasks) */
    float* vpack; /* [ceil(Dv/NR)][tk][NR] one head's V tile packed */
} scratch;

static void carve_scratch(const geom* g, const mh_dcmha_problem* p, int materialise, mh_ws* ws,
                          scratch* sc) {
    sc->q = mh_ws_take(ws, g->rows, (size_t)p->head_dim_qk, sizeof(float));
    sc->t1 = mh_ws_take(ws, g->hg, g->hs, sizeof(float));
    sc->t2 = mh_ws_take(ws, g->hg, g->hs, sizeof(float));
    sc->s = materialise ? mh_ws_take(ws, g->n_tiles, g->hg * g->hs + g->rows, sizeof(float)) : NULL; /* store_floats */
    sc->o = mh_ws_take(ws, g->rows, (size_t)p->head_dim_v, sizeof(float));
    float** vecs[] = {&sc->m, &sc->l, &sc->mrun, &sc->lrun, &sc->alpha, &sc->ones, &sc->scale};
    for (size_t i = 0; i < sizeof vecs / sizeof vecs[0]; i++) *vecs[i] = mh_ws_take(ws, g->rows, 1, sizeof(float));
    sc->kpack = materialise ? NULL : mh_ws_take(ws, g->tk, (size_t)p->head_dim_qk, sizeof(float));
    sc->vpack = materialise ? NULL : mh_ws_take(ws, g->v_panels, g->tk, sizeof(float));
}

static size_t per_thread_bytes(const geom* g, const mh_dcmha_problem* p, int materialise) {
    mh_ws measure = mh_ws_begin(NULL);
    scratch unused;
    size_t bytes;
    carve_scratch(g, p, materialise, &measure, &unused);
    if (measure.overflow || !mh_align_size(measure.used, MH_WS_ALIGN, &bytes)) return 0;
    return bytes;
}

static size_t kt_floats(const geom* g, const mh_dcmha_problem* p) { return g->tk * (size_t)p->head_dim_qk; }

static size_t vt_floats(const geom* g) { return g->v_panels * g->tk; }

typedef struct call_ws {
    unsigned char* scratch; /* [threads][per_thread] */
    size_t per_thread;
    float* kt_all;          /* [B*H][n_tiles] packed K tiles (materialised) */
    float* vt_all;          /* [B*H][n_tiles] packed V tiles */
    float* partials;        /* mh_split_take's, for the tasks' key chunks (two-pass) */
    float* store;           /* [store_floats] pass 1's exponentials per task (two-pass) */
    size_t store_floats;
} call_ws;

static void call_layout(const mh_kernels* k, int threads, const mh_dcmha_problem* p, int materialise,
                        mh_ws* ws, call_ws* out) {
    const geom g = make_geom(k, p, materialise);
    memset(out, 0, sizeof *out);
    out->per_thread = per_thread_bytes(&g, p, materialise);
    if (out->per_thread == 0) ws->overflow = 1;
    out->scratch = mh_ws_take(ws, (size_t)threads, out->per_thread, 1);
    if (materialise) {
        size_t tiles = 0;
        if (!mh_mul3_size((size_t)p->batch, (size_t)p->n_heads, g.n_tiles, &tiles)) ws->overflow = 1;
        out->kt_all = mh_ws_take(ws, tiles, kt_floats(&g, p), sizeof(float));
        out->vt_all = mh_ws_take(ws, tiles, vt_floats(&g), sizeof(float));
    } else {
        out->partials = mh_split_take(ws, g.n_tasks, g.rows, (size_t)p->head_dim_v);
        size_t rows_all = 0;
        if (!mh_mul_size(g.n_tasks, g.rows, &rows_all)) ws->overflow = 1;
        out->store_floats = rows_all <= STORE_BUDGET / sizeof(float) / STORE_KEYS ? rows_all * STORE_KEYS
                                                                                 : STORE_BUDGET / sizeof(float);
        out->store = mh_ws_take(ws, out->store_floats, 1, sizeof(float));
    }
}

void* mh_dcmha_attention_carve(const mh_kernels* k, int threads, const mh_dcmha_problem* p,
                               int materialise, mh_ws* ws) {
    call_ws c;
    call_layout(k, threads, p, materialise, ws, &c);
    return c.scratch;
}

/* Everything the workers of one call share. */
typedef struct call {
    const mh_kernels* k;
    const mh_dcmha_problem* p;
    geom g;
    call_ws cw;
    int materialise;
    mh_split_kv split; /* two-pass: key chunks per task, their statistics and outputs */
    int stored;        /* two-pass: pass 2 reads pass 1's tiles from cw.store */
    float scale;
    long next[2]; /* dynamic schedules of the two passes */
} call;

/* One task: batch b, group grp, queries [i0, i0 + nq). */
typedef struct task {
    size_t b, grp, i0, nq, h0;
    int64_t j_end; /* keys [0, j_end) may be kept by some row */
} task;

static task make_task(const call* c, size_t ti) {
    const mh_dcmha_problem* p = c->p;
    task t;
    t.i0 = (ti % c->g.n_qt) * c->g.tq;
    t.grp = (ti / c->g.n_qt) % (size_t)p->groups;
    t.b = ti / (c->g.n_qt * (size_t)p->groups);
    t.nq = min_size(c->g.tq, (size_t)p->n_q - t.i0);
    t.h0 = t.grp * c->g.hg;
    t.j_end = p->n_kv;
    const int64_t last = p->q_pos + (int64_t)(t.i0 + t.nq) - 1;
    if (p->causal && last + 1 < t.j_end) t.j_end = last + 1;
    return t;
}

/* Gathers the task's queries (pre-scaled) into sc->q, rows head-major. Rows past t.nq (the
 * last, short query tile) are zero. */
static void load_queries(const call* c, const task* t, scratch* sc) {
    const mh_dcmha_problem* p = c->p;
    const size_t d = (size_t)p->head_dim_qk, tq = c->g.tq;
    const float* q = (const float*)p->q.data;
    for (size_t h = 0; h < c->g.hg; h++)
        for (size_t i = 0; i < tq; i++) {
            float* dst = sc->q + (h * tq + i) * d;
            if (i >= t->nq) {
                memset(dst, 0, d * sizeof(float));
                continue;
            }
            const float* src = q + (ptrdiff_t)t->b * p->q.stride_batch +
                               (ptrdiff_t)(t->i0 + i) * p->q.stride_token +
                               (ptrdiff_t)(t->h0 + h) * p->q.stride_head;
            for (size_t dd = 0; dd < d; dd++) dst[dd] = src[dd] * c->scale;
        }
}

/* K (or V) rows of head h of the task from key j0, in the storage dtype. */
static const void* kv_rows(const mh_tensor* x, mh_dtype dt, const task* t, size_t h, int64_t j0) {
    return mh_dtype_at(x->data, dt, (ptrdiff_t)t->b * x->stride_batch + (ptrdiff_t)j0 * x->stride_token +
                                        (ptrdiff_t)(t->h0 + h) * x->stride_head);
}

/* Packed tiles (prepacked per call, or packed here per head for a two-pass task of enough
 * rows) feed the GEMM micro-kernels; a task of few rows (decode) reads K/V in place. */
static int use_gemm(const call* c, const task* t) {
    return c->cw.kt_all != NULL || t->nq >= c->k->attn_direct_rows;
}

static size_t tile_index(const call* c, const task* t, size_t h, int64_t j0) {
    return ((t->b * (size_t)c->p->n_heads + t->h0 + h) * c->g.n_tiles) + (size_t)j0 / c->g.tk;
}

/* Keys of [j0, j0 + nc) that query row i of the task may keep (a prefix: causality drops the
 * rest); for a block of rows, its last row's count covers them all. */
static size_t kept(const call* c, const task* t, size_t i, int64_t j0, size_t nc) {
    if (!c->p->causal) return nc;
    const int64_t n = c->p->q_pos + (int64_t)(t->i0 + i) + 1 - j0;
    return n <= 0 ? 0 : (size_t)n < nc ? (size_t)n : nc;
}

/* P.V runs over key chunks of this many so the V panel stays in L1 across the row blocks. */
#define PV_KEYS 64

/* Raw scores of keys [j0, j0 + nc) for every head of the task into the score tile sc->t1. */
static void qk_tile(const call* c, const task* t, int64_t j0, size_t nc, scratch* sc) {
    const mh_kernels* k = c->k;
    const mh_dcmha_problem* p = c->p;
    const size_t d = (size_t)p->head_dim_qk, tq = c->g.tq, tk = c->g.tk, nr = k->gemm_nr, mr = k->gemm_mr;
    for (size_t h = 0; h < c->g.hg; h++) {
        const float* qh = sc->q + h * tq * d;
        float* s = sc->t1 + h * c->g.hs;
        const void* ks = kv_rows(&p->k, p->k_dtype, t, h, j0);
        if (use_gemm(c, t)) {
            const float* kt = sc->kpack;
            if (c->cw.kt_all) kt = c->cw.kt_all + tile_index(c, t, h, j0) * kt_floats(&c->g, p);
            else k->pack_kt(nc, d, ks, p->k.stride_token, p->k_dtype, sc->kpack);
            for (size_t c0 = 0; c0 < nc; c0 += nr)
                for (size_t r = 0; r < t->nq; r += mr) {
                    const size_t m = min_size(mr, t->nq - r);
                    if (c0 < kept(c, t, r + m - 1, j0, nc)) /* else: all dropped, never read */
                        k->gemm(m, min_size(nr, nc - c0), d, qh + r * d, d, kt + (c0 / nr) * d * nr, NULL,
                                s + r * tk + c0, tk);
                }
        } else {
            const size_t step = k->attn_direct_rows - 1;
            for (size_t r = 0; r < t->nq; r += step)
                k->qk_direct(min_size(step, t->nq - r), nc, d, qh + r * d, d, ks, p->k.stride_token, p->k_dtype,
                             s + r * tk, tk);
        }
    }
}

/* o += P'.V for keys [j0, j0 + nc), P' in sc->t1. */
static void pv_tile(const call* c, const task* t, int64_t j0, size_t nc, scratch* sc) {
    const mh_kernels* k = c->k;
    const mh_dcmha_problem* p = c->p;
    const size_t dv = (size_t)p->head_dim_v, tq = c->g.tq, tk = c->g.tk, nr = k->gemm_nr, mr = k->gemm_mr;
    for (size_t h = 0; h < c->g.hg; h++) {
        const float* ph = sc->t1 + h * c->g.hs;
        float* oh = sc->o + h * tq * dv;
        const void* vs = kv_rows(&p->v, p->v_dtype, t, h, j0);
        if (use_gemm(c, t)) {
            const float* vt = sc->vpack;
            size_t vt_cols = nc; /* keys the packed tile holds */
            if (c->cw.vt_all) {
                vt = c->cw.vt_all + tile_index(c, t, h, j0) * vt_floats(&c->g);
                vt_cols = min_size(tk, (size_t)p->n_kv - (size_t)j0);
            } else {
                k->pack_v(nc, dv, vs, p->v.stride_token, p->v_dtype, sc->vpack);
            }
            for (size_t d0 = 0; d0 < dv; d0 += nr)
                for (size_t k0 = 0; k0 < nc; k0 += PV_KEYS)
                    for (size_t r = 0; r < t->nq; r += mr) {
                        const size_t m = min_size(mr, t->nq - r), kb = kept(c, t, r + m - 1, j0, nc);
                        if (k0 < kb) /* P' is 0 past kb */
                            k->gemm_acc(m, min_size(nr, dv - d0), min_size(PV_KEYS, kb - k0), ph + r * tk + k0, tk,
                                        vt + ((d0 / nr) * vt_cols + k0) * nr, sc->ones, oh + r * dv + d0, dv);
                    }
        } else {
            const size_t step = k->attn_direct_rows - 1;
            for (size_t r = 0; r < t->nq; r += step)
                k->pv_direct(min_size(step, t->nq - r), nc, dv, ph + r * tk, tk, vs, p->v.stride_token, p->v_dtype,
                             sc->ones, oh + r * dv, dv);
        }
    }
}

/* The factors of branch `post` (0 = pre, 1 = post) for query row i of the task and the keys
 * of the layout tile starting at jt, from key jt + off. */
static mh_head_mix_factors factors(const call* c, const task* t, int post, size_t i, size_t jt, size_t off) {
    const mh_dcmha_problem* p = c->p;
    const size_t hg = c->g.hg, R = (size_t)p->rank, fb = c->g.fb, br = p->kf.branch;
    const float* qrow = p->qf.data + (ptrdiff_t)t->b * p->qf.stride_batch +
                        (ptrdiff_t)(t->i0 + i) * p->qf.stride_token + (post ? p->qf.post : p->qf.pre) +
                        (ptrdiff_t)(t->grp * fb);
    const size_t n = min_size(MH_DCMHA_KEY_TILE, p->kf.cols - jt);
    const float* kw = p->kf.data + (ptrdiff_t)t->b * p->kf.stride_batch + jt * 2 * br +
                      ((post ? br : 0) + t->grp * fb) * n + off;
    mh_head_mix_factors f = {hg, R, qrow, qrow + R * hg, qrow + 2 * R * hg, NULL,
                            kw, kw + R * hg * n, kw + 2 * R * hg * n, n};
    if (p->wb) f.wb = p->wb + ((size_t)post * (size_t)p->groups + t->grp) * hg * hg;
    return f;
}

/* Composes query row i of the task over keys [j0, j0 + nc) of branch `post`: a and out point
 * at key j0 of head 0's row (heads lda, ldo apart). One kernel call per layout tile of the
 * key factors (MH_DCMHA_KEY_TILE keys, read row by row, in order). */
static void compose_row(const call* c, const task* t, int post, size_t i, int64_t j0, size_t nc,
                        const float* a, size_t lda, const float* ascale, float* out, size_t ldo) {
    for (size_t done = 0; done < nc;) {
        const size_t j = (size_t)j0 + done, jt = j / MH_DCMHA_KEY_TILE * MH_DCMHA_KEY_TILE;
        const size_t len = min_size(jt + MH_DCMHA_KEY_TILE - j, nc - done);
        const mh_head_mix_factors f = factors(c, t, post, i, jt, j - jt);
        c->k->head_mix(&f, len, a + done, lda, ascale, out + done, ldo);
        done += len;
    }
}

/* Pre-composed, masked scores of keys [j0, j0 + nc) into the score tile dst. */
static void composed_scores(const call* c, const task* t, int64_t j0, size_t nc, float* dst, scratch* sc) {
    const size_t tk = c->g.tk, hs = c->g.hs;
    qk_tile(c, t, j0, nc, sc);
    for (size_t i = 0; i < t->nq; i++) {
        const size_t keep = kept(c, t, i, j0, nc);
        compose_row(c, t, 0, i, j0, keep, sc->t1 + i * tk, hs, NULL, dst + i * tk, hs);
        for (size_t h = 0; h < c->g.hg; h++) /* the mask, after composing: same for every head */
            for (size_t j = keep; j < nc; j++) dst[h * hs + i * tk + j] = -INFINITY;
    }
}

/* Softmax step over nc keys of the task's rows in the score tile s (rows past nq of a short
 * tile are skipped), with running max m and sum l per row. */
static void softmax_rows(const call* c, const task* t, float* s, size_t nc, float* m, float* l, scratch* sc) {
    const size_t tq = c->g.tq;
    for (size_t h = 0; h < c->g.hg; h++)
        c->k->softmax_tile(t->nq, nc, s + h * c->g.hs, c->g.tk, m + h * tq, l + h * tq, sc->alpha);
}

/* A task's store: per key tile a score tile [Hg][hs] of exponentials (contiguous, so pass 2
 * reads it as one stream), then the tile maxima [n_tiles][rows]. */
static size_t store_floats(const geom* g) { return g->n_tiles * (g->hg * g->hs + g->rows); }

static float* store_block(const call* c, float* store, int64_t j0) {
    return store + (size_t)j0 / c->g.tk * c->g.hg * c->g.hs;
}

static float* store_max(const call* c, float* store, int64_t j0) {
    return store + c->g.n_tiles * c->g.hg * c->g.hs + (size_t)j0 / c->g.tk * c->g.rows;
}

/* Pass 1 over keys [lo, hi): tile by tile, the pre-composed scores become exp(s - running max)
 * (softmax_tile) and the running max and sum per row land in sc->m, sc->l. With a store the
 * exponentials stay there with the max they are relative to. */
static void stats_range(const call* c, const task* t, int64_t lo, int64_t hi, float* store, scratch* sc) {
    const size_t tk = c->g.tk;
    for (int64_t j0 = lo; j0 < hi; j0 += (int64_t)tk) {
        const size_t nc = min_size(tk, (size_t)(hi - j0));
        float* e = store ? store_block(c, store, j0) : sc->t2;
        composed_scores(c, t, j0, nc, e, sc);
        softmax_rows(c, t, e, nc, sc->m, sc->l, sc);
        if (store) memcpy(store_max(c, store, j0), sc->m, c->g.rows * sizeof(float));
    }
}

/* scale[i][h] = exp(mt - max) / sum of row (h, i): turns exponentials relative to the tile's
 * max mt into probabilities (0 where the row had kept no key yet). */
static void tile_scales(const call* c, const task* t, const float* mt, scratch* sc) {
    const size_t tq = c->g.tq, hg = c->g.hg;
    for (size_t h = 0; h < hg; h++)
        for (size_t i = 0; i < t->nq; i++) {
            const size_t r = h * tq + i;
            sc->scale[i * hg + h] = mt[r] == -INFINITY ? 0.0f : expf(mt[r] - sc->m[r]) / sc->l[r];
        }
}

/* Pass 2 over keys [lo, hi), with the final max and sum per row in sc->m, sc->l: the
 * probabilities (pass 1's exponentials, scaled by tile_scales) are post-composed and
 * accumulated as P'.V into sc->o. Without a store the exponentials are recomputed as pass 1
 * made them (the same tiles from lo, the running max restarted), so both give the same bits. */
static void output_range(const call* c, const task* t, int64_t lo, int64_t hi, float* store, scratch* sc) {
    const size_t tk = c->g.tk, hs = c->g.hs, rows = c->g.rows;
    for (size_t r = 0; r < rows; r++) sc->mrun[r] = -INFINITY, sc->lrun[r] = 0.0f;
    for (int64_t j0 = lo; j0 < hi; j0 += (int64_t)tk) {
        const size_t nc = min_size(tk, (size_t)(hi - j0));
        const float* e = store ? store_block(c, store, j0) : sc->t2;
        if (!store) {
            composed_scores(c, t, j0, nc, sc->t2, sc);
            softmax_rows(c, t, sc->t2, nc, sc->mrun, sc->lrun, sc);
        }
        tile_scales(c, t, store ? store_max(c, store, j0) : sc->mrun, sc);
        for (size_t i = 0; i < t->nq; i++) {
            const size_t keep = kept(c, t, i, j0, nc); /* masked probabilities are 0 and stay 0 */
            float* dst = sc->t1 + i * tk;
            compose_row(c, t, 1, i, j0, keep, e + i * tk, hs, sc->scale + i * c->g.hg, dst, hs);
            for (size_t h = 0; h < c->g.hg; h++) memset(dst + h * hs + keep, 0, (nc - keep) * sizeof(float));
        }
        pv_tile(c, t, j0, nc, sc);
    }
}

static void reset_rows(const call* c, scratch* sc) {
    for (size_t r = 0; r < c->g.rows; r++) sc->m[r] = -INFINITY, sc->l[r] = 0.0f, sc->ones[r] = 1.0f;
    memset(sc->o, 0, c->g.rows * (size_t)c->p->head_dim_v * sizeof(float));
    memset(sc->t1, 0, c->g.hg * c->g.hs * sizeof(float)); /* rows past nq stay 0 for the GEMMs */
}

/* Writes the task's output rows from sc-like storage o [rows][Dv]. */
static void store_output(const call* c, const task* t, const float* o) {
    const mh_dcmha_problem* p = c->p;
    const size_t dv = (size_t)p->head_dim_v, H = (size_t)p->n_heads;
    for (size_t h = 0; h < c->g.hg; h++)
        for (size_t i = 0; i < t->nq; i++)
            memcpy(p->o + ((t->b * (size_t)p->n_q + t->i0 + i) * H + t->h0 + h) * dv, o + (h * c->g.tq + i) * dv,
                   dv * sizeof(float));
}

/* A whole task at once, its exponentials kept in the worker's sc->s. */
static void run_materialised(const call* c, size_t ti, scratch* sc) {
    const task t = make_task(c, ti);
    reset_rows(c, sc);
    load_queries(c, &t, sc);
    stats_range(c, &t, 0, t.j_end, sc->s, sc);
    output_range(c, &t, 0, t.j_end, sc->s, sc);
    store_output(c, &t, sc->o);
}

/* Task ti's store (store_floats), or NULL when pass 2 recomputes. */
static float* stored_at(const call* c, size_t ti) { return c->stored ? c->cw.store + ti * store_floats(&c->g) : NULL; }

/* Work item `item` of a two-pass call: chunk ci of task ti, keys [lo, hi), the worker's rows
 * reset and the task's queries loaded. */
typedef struct chunk {
    size_t ti, ci;
    task t;
    int64_t lo, hi;
} chunk;

static chunk start_chunk(const call* c, size_t item, scratch* sc) {
    chunk k;
    k.ti = item / c->split.n_split, k.ci = item % c->split.n_split;
    k.t = make_task(c, k.ti);
    mh_split_chunk(&c->split, k.ci, 0, k.t.j_end, c->g.tk, &k.lo, &k.hi);
    reset_rows(c, sc);
    load_queries(c, &k.t, sc);
    return k;
}

/* Pass 1 of a chunk: its softmax statistics into its partial. */
static void pass_stats(const call* c, size_t item, scratch* sc) {
    const chunk k = start_chunk(c, item, sc);
    stats_range(c, &k.t, k.lo, k.hi, stored_at(c, k.ti), sc);
    float* part = mh_split_partial(&c->split, k.ti, k.ci);
    memcpy(part, sc->m, c->g.rows * sizeof(float));
    memcpy(part + c->g.rows, sc->l, c->g.rows * sizeof(float));
}

/* Pass 2 of a chunk: its share of the output, with the task's merged statistics, into its
 * partial. */
static void pass_output(const call* c, size_t item, scratch* sc) {
    const chunk k = start_chunk(c, item, sc);
    mh_split_merge_stats(&c->split, k.ti, sc->m, sc->l);
    output_range(c, &k.t, k.lo, k.hi, stored_at(c, k.ti), sc);
    memcpy(mh_split_partial(&c->split, k.ti, k.ci) + 2 * c->g.rows, sc->o,
           c->g.rows * (size_t)c->p->head_dim_v * sizeof(float));
}

/* Sums the task's chunk outputs in order (each is already normalised by the whole row's
 * statistics) and writes them. */
static void finish_two_pass(const call* c, size_t ti) {
    const size_t n = c->g.rows * (size_t)c->p->head_dim_v;
    float* acc = mh_split_partial(&c->split, ti, 0) + 2 * c->g.rows;
    for (size_t ci = 1; ci < c->split.n_split; ci++) {
        const float* part = mh_split_partial(&c->split, ti, ci) + 2 * c->g.rows;
        for (size_t e = 0; e < n; e++) acc[e] += part[e];
    }
    const task t = make_task(c, ti);
    store_output(c, &t, acc);
}

/* Packs K/V tile `item` (head-major grid over B*H heads) for the materialised path. */
static void prepack_tile(const call* c, size_t item) {
    const mh_kernels* k = c->k;
    const mh_dcmha_problem* p = c->p;
    const size_t head = item / c->g.n_tiles, j0 = (item % c->g.n_tiles) * c->g.tk;
    const size_t b = head / (size_t)p->n_heads, h = head % (size_t)p->n_heads;
    const size_t nc = min_size(c->g.tk, (size_t)p->n_kv - j0);
    const void* ks = mh_dtype_at(p->k.data, p->k_dtype, (ptrdiff_t)b * p->k.stride_batch +
                                 (ptrdiff_t)h * p->k.stride_head + (ptrdiff_t)j0 * p->k.stride_token);
    const void* vs = mh_dtype_at(p->v.data, p->v_dtype, (ptrdiff_t)b * p->v.stride_batch +
                                 (ptrdiff_t)h * p->v.stride_head + (ptrdiff_t)j0 * p->v.stride_token);
    k->pack_kt(nc, (size_t)p->head_dim_qk, ks, p->k.stride_token, p->k_dtype, c->cw.kt_all + item * kt_floats(&c->g, p));
    k->pack_v(nc, (size_t)p->head_dim_v, vs, p->v.stride_token, p->v_dtype,
              c->cw.vt_all + item * vt_floats(&c->g));
}

static void worker(void* arg, int tid, int nth) {
    call* c = arg;
    mh_ws ws = mh_ws_begin(c->cw.scratch + (size_t)tid * c->cw.per_thread);
    scratch sc;
    carve_scratch(&c->g, c->p, c->materialise, &ws, &sc);
    if (c->materialise) {
        const size_t n_pack = (size_t)c->p->batch * (size_t)c->p->n_heads * c->g.n_tiles;
        for (size_t i = (size_t)tid; i < n_pack; i += (size_t)nth) prepack_tile(c, i);
        mh_barrier(nth);
        for (long ti; (ti = mh_next_item(&c->next[0])) < (long)c->g.n_tasks;) run_materialised(c, (size_t)ti, &sc);
        return;
    }
    const long n_items = (long)(c->g.n_tasks * c->split.n_split);
    for (long item; (item = mh_next_item(&c->next[0])) < n_items;) pass_stats(c, (size_t)item, &sc);
    mh_barrier(nth);
    for (long item; (item = mh_next_item(&c->next[1])) < n_items;) pass_output(c, (size_t)item, &sc);
    mh_barrier(nth);
    for (size_t ti = (size_t)tid; ti < c->g.n_tasks; ti += (size_t)nth) finish_two_pass(c, ti);
}

void mh_dcmha_attention(const mh_kernels* k, int threads, const mh_dcmha_problem* p, int materialise,
                        void* ws_base) {
    call c;
    memset(&c, 0, sizeof c);
    c.k = k, c.p = p, c.materialise = materialise;
    c.g = make_geom(k, p, materialise);
    mh_ws layout = mh_ws_begin(ws_base);
    call_layout(k, threads, p, materialise, &layout, &c.cw);
    /* decode shape: split the keys (by the shapes only) */
    c.split = mh_split_plan(c.cw.partials, c.g.rows, (size_t)p->head_dim_v,
                            materialise ? 1 : mh_split_count(c.g.n_qt, NULL, p->n_kv));
    size_t unit = 0; /* store_floats, checked: M is unbounded here */
    c.stored = !materialise && mh_mul_size(c.g.n_tiles, c.g.hg * c.g.hs + c.g.rows, &unit) &&
               unit <= c.cw.store_floats / c.g.n_tasks;
    c.scale = p->scale != 0.0f ? p->scale : 1.0f / sqrtf((float)p->head_dim_qk);
    const double flops = 2.0 * (double)p->batch * p->n_q * p->n_kv * p->n_heads *
                         (p->head_dim_qk + p->head_dim_v + 4.0 * p->rank + 2.0);
    mh_parallel(mh_workers(threads, c.g.n_tasks * c.split.n_split, flops), worker, &c);
}
