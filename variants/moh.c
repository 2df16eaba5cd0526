/*
 * MoH, mixture-of-head attention (docs/variants.md, "MoH"), on the GQA projection layout.
 * Each token runs the shared heads and its top_k routed heads (variants/moh_router.c), and
 * the work of every other (token, head) pair is skipped, not masked:
 *
 * forward: route every token (learned router: logits = x W_router^T; norm router: Q first);
 *          list, per head, the rows that run it (plan); project K and V for every head;
 *          per head: gather its rows' Q (learned router: project only those rows), run the
 *          core on them with their real positions, gate the outputs and project them through
 *          that head's block of W_O, adding into the output rows.
 * decode:  K/V of every head go to the cache; the core runs densely over the KV heads that
 *          some new token of the sequence uses and skips (never reads) the others; the out
 *          projection is the same per-head gathered one.
 */
#include <string.h>

#include "core/gathered.h"
#include "core/parallel.h"
#include "moh_router.h"
#include "positions.h"
#include "util/alloc.h"
#include "variant.h"

/* What a MoH layer holds beside L->wk, L->wv (and L->wq with the norm router). */
typedef struct moh_state {
    mh_packed_matrix router;   /* [router_rows, d_model] learned router, else empty */
    mh_packed_matrix* wq_head; /* [H] learned router: head h's rows of W_Q [D, d_model] and b_q */
    mh_packed_matrix* wo_head; /* [H] head h's column block of W_O as [d_model, Dv], no bias */
    mh_packed_matrix wq_all;   /* norm router on a shard: the full layer's W_Q and b_q, to route on
                                  every head's Q; else empty */
    float* b_o;                /* [d_model] or NULL */
} moh_state;

static const mh_moh_config defaults = {MH_VARIANT_MOH, MH_MOH_ROUTER_LEARNED, 0, 0};

mh_moh_config mh_moh_config_default(void) { return defaults; }

mh_moh_weights mh_moh_weights_default(void) {
    return (mh_moh_weights){MH_VARIANT_MOH, NULL, NULL, NULL};
}

static const mh_moh_config* moh_cfg(const mh_layer* L) { return L->cfg.variant_config; }

static int learned(const mh_layer* L) { return moh_cfg(L)->router == MH_MOH_ROUTER_LEARNED; }

static mh_status resolve(mh_layer_config* c, void* vcfg) {
    (void)vcfg; /* c->variant_config, which mh_moh_check_config reads */
    const mh_status st = mh_variant_resolve_kv_heads(c, c->n_heads);
    return st == MH_OK ? mh_moh_check_config(c) : st;
}

/* Gathered rows have no per-row mask or probabilities. */
static mh_status check_forward(const mh_layer* L, const mh_forward_args* a) {
    (void)L;
    return a->opt && (a->opt->mask || a->opt->probs) ? MH_ERR_UNSUPPORTED : MH_OK;
}

static void free_heads(mh_packed_matrix* m, int n) {
    if (!m) return;
    for (int h = 0; h < n; h++) mh_packed_matrix_free(&m[h]);
    mh_free(m);
}

static void destroy(mh_layer* L) {
    mh_packed_matrix_free(&L->wq);
    mh_packed_matrix_free(&L->wk);
    mh_packed_matrix_free(&L->wv);
    moh_state* s = L->ext;
    if (!s) return;
    mh_packed_matrix_free(&s->router);
    mh_packed_matrix_free(&s->wq_all);
    free_heads(s->wq_head, L->cfg.n_heads);
    free_heads(s->wo_head, L->cfg.n_heads);
    mh_free(s->b_o);
    mh_free(s);
    L->ext = NULL;
    L->ext_bytes = 0;
}

static mh_status pack_router(mh_layer* L, const mh_moh_weights* w, moh_state* s) {
    const int rows = mh_moh_router_rows(&L->full), d = L->cfg.d_model;
    size_t bytes;
    if (!mh_mul3_size((size_t)rows, (size_t)d, sizeof(float), &bytes)) return MH_ERR_SIZE_OVERFLOW;
    float* cat = mh_alloc(bytes);
    if (!cat) return MH_ERR_OUT_OF_MEMORY;
    mh_moh_router_concat(&L->full, w, cat);
    const mh_status st = mh_variant_pack(L, cat, NULL, rows, d, &s->router);
    mh_free(cat);
    return st;
}

/* Head h's rows of W_Q (and b_q), packed one head at a time. */
static mh_status pack_q_heads(mh_layer* L, const mh_layer_weights* w, moh_state* s) {
    const mh_layer_config* c = &L->cfg;
    const size_t D = (size_t)c->head_dim, d = (size_t)c->d_model;
    s->wq_head = mh_alloc((size_t)c->n_heads * sizeof(mh_packed_matrix));
    if (!s->wq_head) return MH_ERR_OUT_OF_MEMORY;
    mh_status st = MH_OK;
    for (int h = 0; h < c->n_heads && st == MH_OK; h++)
        st = mh_variant_pack(L, w->w_q + (size_t)h * D * d, w->b_q ? w->b_q + (size_t)h * D : NULL,
                             c->head_dim, c->d_model, &s->wq_head[h]);
    return st;
}

/* Head h's column block W_O[:, h*Dv : (h+1)*Dv], copied out and packed one head at a time. */
static mh_status pack_o_heads(mh_layer* L, const mh_layer_weights* w, moh_state* s) {
    const mh_layer_config* c = &L->cfg;
    const size_t dv = (size_t)c->head_dim_v, d = (size_t)c->d_model, hdv = (size_t)c->n_heads * dv;
    size_t bytes;
    if (!mh_mul3_size(d, dv, sizeof(float), &bytes)) return MH_ERR_SIZE_OVERFLOW;
    float* block = mh_alloc(bytes);
    s->wo_head = mh_alloc((size_t)c->n_heads * sizeof(mh_packed_matrix));
    mh_status st = block && s->wo_head ? MH_OK : MH_ERR_OUT_OF_MEMORY;
    for (int h = 0; h < c->n_heads && st == MH_OK; h++) {
        for (size_t r = 0; r < d; r++) memcpy(block + r * dv, w->w_o + r * hdv + (size_t)h * dv, dv * sizeof(float));
        st = mh_variant_pack(L, block, NULL, c->d_model, c->head_dim_v, &s->wo_head[h]);
    }
    mh_free(block);
    return st;
}

static size_t state_bytes(const mh_layer* L, const moh_state* s) {
    size_t bytes = s->router.bytes + s->wq_all.bytes + (s->b_o ? (size_t)L->cfg.d_model * sizeof(float) : 0);
    for (int h = 0; h < L->cfg.n_heads; h++)
        bytes += (s->wq_head ? s->wq_head[h].bytes : 0) + s->wo_head[h].bytes;
    return bytes;
}

static mh_status create(mh_layer* L, const mh_layer_weights* w) {
    const mh_layer_config* c = &L->cfg;
    const mh_moh_weights none = mh_moh_weights_default();
    const mh_moh_weights* mw = w->variant_weights ? w->variant_weights : &none;
    mh_status st = mh_moh_check_weights(&L->full, mw); /* the router's: the full head set */
    if (st != MH_OK) return st;
    moh_state* s = mh_alloc(sizeof *s);
    if (!s) return MH_ERR_OUT_OF_MEMORY;
    L->ext = s;
    const int kvd = c->n_kv_heads * c->head_dim, kvdv = c->n_kv_heads * c->head_dim_v;
    st = mh_variant_pack(L, w->w_k, w->b_k, kvd, c->kdim, &L->wk);
    if (st == MH_OK) st = mh_variant_pack(L, w->w_v, w->b_v, kvdv, c->vdim, &L->wv);
    if (st == MH_OK && learned(L)) st = pack_router(L, mw, s);
    if (st == MH_OK && learned(L)) st = pack_q_heads(L, w, s);
    if (st == MH_OK && !learned(L))
        st = mh_variant_pack(L, w->w_q, w->b_q, c->n_heads * c->head_dim, c->d_model, &L->wq);
    if (st == MH_OK && !learned(L) && L->shard.count > 1) { /* a shard's rows lie inside the full W_Q */
        const size_t back = (size_t)L->shard.head_begin * (size_t)c->head_dim;
        st = mh_variant_pack(L, w->w_q - back * (size_t)c->d_model, w->b_q ? w->b_q - back : NULL,
                             L->full.n_heads * c->head_dim, c->d_model, &s->wq_all);
    }
    if (st == MH_OK) st = pack_o_heads(L, w, s);
    if (st == MH_OK && w->b_o) {
        s->b_o = mh_alloc((size_t)c->d_model * sizeof(float));
        if (s->b_o) memcpy(s->b_o, w->b_o, (size_t)c->d_model * sizeof(float));
        else st = MH_ERR_OUT_OF_MEMORY;
    }
    if (st != MH_OK) {
        destroy(L);
        return st;
    }
    L->ext_bytes = state_bytes(L, s);
    return MH_OK;
}

/* The workspace of one call. R = B*N token rows; "gathered" rows are (head, token) pairs that
 * run, listed head by head, then sequence by sequence, then by token. */
typedef struct buffers {
    float* logits;            /* [R, router_rows]  learned router */
    float* gate;              /* [R, H]  0 where the head does not run (a shard: its heads) */
    unsigned char* sel;       /* [R, H]  1 where the head runs */
    float* gate_all;          /* [R, full H] the router's gates and selection: gate and sel */
    unsigned char* sel_all;   /* themselves, unless the layer is a shard */
    mh_gathered g;            /* the rows with a nonzero gate, per (head, sequence) */
    uint16_t* xr;             /* [R, ldr] x rounded to bf16 once (bf16 compute, where every packed
                                 matrix is bf16; project_x) */
    float* xg;                /* [R, d_model]  one head's gathered inputs (learned router; bf16
                                 compute: their rounded rows, [R, ldr] of bf16) */
    float* q;                 /* [R, H*D]  dense Q (norm router, and decode) */
    float* q_all;             /* [R, full H*D]  what the norm router routes on: q, unless a shard */
    float* qg;                /* [R*H, D]  gathered Q */
    float *k, *v;             /* [B*M, Hkv*D], [B*M, Hkv*Dv] */
    float* o;                 /* [R, H*Dv]  dense head outputs (decode) */
    float* og;                /* [R*H, Dv]  gathered head outputs, gated */
    float* y;                 /* [R, d_model]  one head's out-projection rows */
    unsigned char* kv_active; /* [B, Hkv]  decode: KV heads some new token uses */
    int64_t *q_pos, *k_pos;   /* [R], [B*M]  rows' positions (rotary or QK-norm; forward only) */
    void* attn;               /* decode: the dense core's workspace */
} buffers;

/* The core's view of `heads` query heads per row over all KV heads' rows of K/V (pointers are
 * set by the caller). heads == 1 is one gathered head (n_kv_heads 1, K/V at its KV head). */
static mh_attn_problem problem(const mh_layer* L, int B, int N, int M, int heads) {
    const mh_layer_config* c = &L->cfg;
    const ptrdiff_t hd = (ptrdiff_t)heads * c->head_dim, hdv = (ptrdiff_t)heads * c->head_dim_v;
    const ptrdiff_t kvd = (ptrdiff_t)c->n_kv_heads * c->head_dim;
    const ptrdiff_t kvdv = (ptrdiff_t)c->n_kv_heads * c->head_dim_v;
    mh_attn_problem p;
    memset(&p, 0, sizeof p);
    p.batch = B, p.n_q = N, p.n_kv = M, p.n_heads = heads;
    p.n_kv_heads = heads == 1 ? 1 : c->n_kv_heads;
    p.head_dim_qk = c->head_dim, p.head_dim_v = c->head_dim_v, p.scale = c->scale;
    p.q = (mh_tensor){.data = NULL, .stride_batch = N * hd, .stride_token = hd, .stride_head = c->head_dim};
    p.k = (mh_tensor){.data = NULL, .stride_batch = M * kvd, .stride_token = kvd, .stride_head = c->head_dim};
    p.v = (mh_tensor){.data = NULL, .stride_batch = M * kvdv, .stride_token = kvdv, .stride_head = c->head_dim_v};
    p.k_dtype = p.v_dtype = MH_DTYPE_F32;
    p.o = (mh_tensor_out){NULL, N * hdv, hdv, c->head_dim_v};
    return p;
}

/* Elements of a row of x rounded to bf16 (b->xr): d_model rounded up to even (k pairs). */
static size_t rounded_ld(const mh_layer* L) { return ((size_t)L->cfg.d_model + 1) / 2 * 2; }

static void carve(const mh_layer* L, int B, int N, int M, int is_decode, mh_ws* ws, buffers* b) {
    const mh_layer_config* c = &L->cfg;
    const size_t R = (size_t)B * (size_t)N, H = (size_t)c->n_heads, d = (size_t)c->d_model;
    const size_t D = (size_t)c->head_dim, Dv = (size_t)c->head_dim_v, rows_kv = (size_t)B * (size_t)M;
    memset(b, 0, sizeof *b);
    b->logits = mh_ws_take(ws, R, (size_t)mh_moh_router_rows(&L->full), sizeof(float));
    b->gate = mh_ws_take(ws, R, H, sizeof(float));
    b->sel = mh_ws_take(ws, R, H, 1);
    b->gate_all = b->gate, b->sel_all = b->sel;
    if (L->shard.count > 1) {
        b->gate_all = mh_ws_take(ws, R, (size_t)L->full.n_heads, sizeof(float));
        b->sel_all = mh_ws_take(ws, R, (size_t)L->full.n_heads, 1);
    }
    if (L->cfg.compute == MH_COMPUTE_BF16) b->xr = mh_ws_take(ws, R, rounded_ld(L), sizeof(uint16_t));
    if (learned(L)) b->xg = mh_ws_take(ws, R, d, sizeof(float));
    if (!learned(L) || is_decode) b->q = mh_ws_take(ws, R, H * D, sizeof(float));
    b->q_all = !learned(L) && L->shard.count > 1 ? mh_ws_take(ws, R, (size_t)L->full.n_heads * D, sizeof(float)) : b->q;
    b->qg = mh_ws_take(ws, R, H * D, sizeof(float));
    b->k = mh_ws_take(ws, rows_kv, (size_t)c->n_kv_heads * D, sizeof(float));
    b->v = mh_ws_take(ws, rows_kv, (size_t)c->n_kv_heads * Dv, sizeof(float));
    if (is_decode) b->o = mh_ws_take(ws, R, H * Dv, sizeof(float));
    b->og = mh_ws_take(ws, R, H * Dv, sizeof(float));
    b->y = mh_ws_take(ws, R, d, sizeof(float));
    b->q_pos = is_decode ? NULL : mh_positions_take(L, R, ws); /* decode: mh_decode_bufs */
    b->k_pos = is_decode ? NULL : mh_positions_take(L, rows_kv, ws);
    const mh_attn_problem p = problem(L, B, N, M, c->n_heads);
    if (is_decode) {
        b->kv_active = mh_ws_take(ws, (size_t)B, (size_t)c->n_kv_heads, 1);
        b->attn = mh_core_attention_carve_upto(L->kernels, L->threads, &p, 0, ws); /* any n_new <= N */
        mh_gathered_carve_plan(&p, ws, &b->g);
    } else {
        mh_gathered_carve(L->kernels, L->threads, &p, 1, ws, &b->g);
    }
}

/* In bf16 compute, x [R, d_model] rounded to bf16 once into b->xr, which the GEMMs on x then
 * read (project_x, gather_q) instead of each rounding x again: the router, K and V (self
 * attention), and every head's gathered rows (layer d_model 1024, H 16, D 64, N 512, moh50,
 * Zen 5: the GEMMs' rounding and gathering had taken 13% of the samples). */
static void round_x(const mh_layer* L, size_t R, const float* x, buffers* b) {
    if (b->xr) mh_round_rows(L->kernels, R, (size_t)L->cfg.d_model, x, (size_t)L->cfg.d_model, b->xr, rounded_ld(L));
}

/* y [R, ldy] = x W^T (+ bias) for the R rows of x [R, d_model] (round_x), through b->xr when
 * x was rounded. */
static void project_x(const mh_layer* L, size_t R, const float* x, const buffers* b, const mh_packed_matrix* w,
                      float* y, size_t ldy) {
    if (b->xr) mh_gemm_packed_rounded(L->kernels, L->threads, R, b->xr, rounded_ld(L), w, y, ldy);
    else mh_gemm_packed(L->kernels, L->threads, R, x, (size_t)L->cfg.d_model, w, y, ldy);
}

/* Gates and selection of every token row over the full head set (a shard routes like the
 * full layer), then a shard's own heads' columns. The norm router reads b->q_all (projected). */
static void route(const mh_layer* L, size_t R, const float* x, buffers* b) {
    const mh_layer_config* c = &L->full;
    const size_t H = (size_t)c->n_heads;
    if (learned(L)) {
        const moh_state* s = L->ext;
        const size_t nl = (size_t)s->router.n_out;
        project_x(L, R, x, b, &s->router, b->logits, nl);
        for (size_t r = 0; r < R; r++) mh_moh_route_learned(c, b->logits + r * nl, b->gate_all + r * H, b->sel_all + r * H);
    } else {
        const size_t hd = H * (size_t)c->head_dim;
        for (size_t r = 0; r < R; r++) mh_moh_route_norm(c, b->q_all + r * hd, b->gate_all + r * H, b->sel_all + r * H);
    }
    const size_t h0 = (size_t)L->shard.head_begin, n = (size_t)L->cfg.n_heads;
    for (size_t r = 0; r < R && b->gate_all != b->gate; r++) {
        memcpy(b->gate + r * n, b->gate_all + r * H + h0, n * sizeof(float));
        memcpy(b->sel + r * n, b->sel_all + r * H + h0, n);
    }
}

/* Norm router: the dense Q of the layer's heads from x [R, d_model] into b->q; a shard also
 * projects every head's Q into b->q_all, which it routes on. */
static void project_q_norm(const mh_layer* L, size_t R, const float* x, buffers* b) {
    const moh_state* s = L->ext;
    project_x(L, R, x, b, &L->wq, b->q, (size_t)L->wq.n_out);
    if (b->q_all != b->q) project_x(L, R, x, b, &s->wq_all, b->q_all, (size_t)s->wq_all.n_out);
}

/* Gathered Q of every head: learned router, x rows through that head's W_Q rows only; norm
 * router, copied out of the dense Q. */
static void gather_q(const mh_layer* L, int B, const float* x, buffers* b) {
    const mh_layer_config* c = &L->cfg;
    const moh_state* s = L->ext;
    const size_t d = (size_t)c->d_model, D = (size_t)c->head_dim, hd = (size_t)c->n_heads * D;
    for (int h = 0; h < c->n_heads; h++) {
        const int64_t e0 = b->g.seg[h * B], n = b->g.seg[(h + 1) * B] - e0;
        float* qg = b->qg + (size_t)e0 * D;
        if (!learned(L)) {
            for (int64_t i = 0; i < n; i++) memcpy(qg + i * D, b->q + (size_t)b->g.row[e0 + i] * hd + (size_t)h * D, D * sizeof(float));
            continue;
        }
        if (n == 0) continue;
        if (b->xr) { /* the rounded rows: half the bytes, no rounding */
            const size_t ldr = rounded_ld(L);
            uint16_t* xgr = (uint16_t*)(void*)b->xg;
            for (int64_t i = 0; i < n; i++) memcpy(xgr + i * ldr, b->xr + (size_t)b->g.row[e0 + i] * ldr, ldr * sizeof(uint16_t));
            mh_gemm_packed_rounded(L->kernels, L->threads, (size_t)n, xgr, ldr, &s->wq_head[h], qg, D);
            continue;
        }
        for (int64_t i = 0; i < n; i++) memcpy(b->xg + i * d, x + (size_t)b->g.row[e0 + i] * d, d * sizeof(float));
        mh_gemm_packed(L->kernels, L->threads, (size_t)n, b->xg, d, &s->wq_head[h], qg, D);
    }
}

/* Output rows per item of project_out. An item's rows of out and of one head's projection (y)
 * stay in L2 while every running head adds into them, and the items spread over the workers;
 * a pass per head over all the rows (a parallel GEMM, then a one-thread add) took 1.04x the
 * layer's time on 1 thread and 1.13-1.16x on 2 (docs/variants.md, "MoH"). */
#define OUT_ROWS 64

typedef struct out_call {
    const mh_layer* L;
    int B;
    size_t R;
    const buffers* b;
    float* out; /* [R, d_model] */
} out_call;

/* The first of head h's gathered rows [lo, hi) (ascending token rows) at token row r or later. */
static int64_t first_row_at(const int32_t* row, int64_t lo, int64_t hi, size_t r) {
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if ((size_t)row[mid] < r) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Rows [r0, r1) of out: b_o, then every running head in ascending order; a head that runs on
 * all of them adds its GEMM straight into out, another one's gathered rows go through y (its
 * rows from r0 on, so items never share them). */
static void out_rows(const out_call* oc, size_t r0, size_t r1) {
    const mh_layer* L = oc->L;
    const mh_layer_config* c = &L->cfg;
    const moh_state* s = L->ext;
    const buffers* b = oc->b;
    const size_t d = (size_t)c->d_model, Dv = (size_t)c->head_dim_v;
    for (size_t r = r0; r < r1; r++) {
        if (s->b_o) memcpy(oc->out + r * d, s->b_o, d * sizeof(float));
        else memset(oc->out + r * d, 0, d * sizeof(float));
    }
    for (int h = 0; h < c->n_heads; h++) {
        const int64_t e0 = b->g.seg[h * oc->B], e1 = b->g.seg[(h + 1) * oc->B];
        const int64_t lo = first_row_at(b->g.row, e0, e1, r0), n = first_row_at(b->g.row, lo, e1, r1) - lo;
        if (n == 0) continue;
        const float* og = b->og + (size_t)lo * Dv;
        if ((size_t)n == r1 - r0) { /* every row, in order */
            mh_gemm_packed_acc(L->kernels, 1, (size_t)n, og, Dv, &s->wo_head[h], oc->out + r0 * d, d);
            continue;
        }
        float* y = b->y + r0 * d;
        mh_gemm_packed(L->kernels, 1, (size_t)n, og, Dv, &s->wo_head[h], y, d);
        for (int64_t i = 0; i < n; i++) L->kernels->add_row(d, y + (size_t)i * d, oc->out + (size_t)b->g.row[lo + i] * d);
    }
}

static void out_worker(void* arg, int tid, int nth) {
    const out_call* oc = arg;
    for (size_t r0 = (size_t)tid * OUT_ROWS; r0 < oc->R; r0 += (size_t)nth * OUT_ROWS)
        out_rows(oc, r0, mh_min_size(r0 + OUT_ROWS, oc->R));
}

/* out = b_o + sum over running heads h (ascending) of gate * O_h W_O^h, in items of OUT_ROWS
 * rows, each head's rows of an item gathered into one GEMM. Each element is the same sum in
 * the same order on any number of workers. */
static void project_out(const mh_layer* L, int B, size_t R, buffers* b, float* out) {
    const mh_layer_config* c = &L->cfg;
    out_call oc = {L, B, R, b, out};
    const size_t items = (R + OUT_ROWS - 1) / OUT_ROWS;
    const double flops = 2.0 * (double)b->g.seg[(size_t)c->n_heads * (size_t)B] * c->head_dim_v * c->d_model;
    mh_parallel(mh_workers(L->threads, items, flops), out_worker, &oc);
}

/* The routing of the rows of x: token t of batch row b is padded row b * n + t (filler rows
 * are not recorded). */
static void record(const mh_layer* L, const mh_kv_seqs* s, const buffers* b, mh_routing_record* rec) {
    const size_t H = (size_t)L->full.n_heads; /* a shard records the full layer's routing */
    const size_t A = (size_t)(moh_cfg(L)->shared_heads + moh_cfg(L)->top_k);
    if (rec->load) memset(rec->load, 0, H * sizeof(int64_t));
    size_t packed = 0;
    for (int bb = 0; bb < s->batch; bb++)
        for (int t = 0; t < mh_kv_seq_count(s, bb); t++, packed++) {
            const size_t r = (size_t)bb * (size_t)s->n + (size_t)t;
            size_t a = 0;
            for (size_t h = 0; h < H; h++) {
                if (!b->sel_all[r * H + h]) continue;
                if (rec->heads) rec->heads[packed * A + a] = (int32_t)h;
                if (rec->gates) rec->gates[packed * A + a] = b->gate_all[r * H + h];
                if (rec->load) rec->load[h]++;
                a++;
            }
        }
}

static void forward_carve(const mh_layer* L, int B, int N, int M, mh_ws* ws) {
    buffers b;
    carve(L, B, N, M, 0, ws, &b);
}

static void forward(const mh_layer* L, const mh_forward_args* a, void* workspace) {
    const mh_layer_config* c = &L->cfg;
    const int self = a->key == NULL, B = a->batch, N = a->n_q, M = self ? N : a->n_kv;
    mh_ws ws = mh_ws_begin(workspace);
    buffers b;
    carve(L, B, N, M, 0, &ws, &b);
    const size_t R = (size_t)B * (size_t)N, rows_kv = (size_t)B * (size_t)M;
    round_x(L, R, a->query, &b);
    if (!learned(L)) project_q_norm(L, R, a->query, &b);
    route(L, R, a->query, &b);
    mh_attn_problem p = problem(L, B, N, M, c->n_heads);
    p.k.data = b.k, p.v.data = b.v;
    const mh_attn_options opt = mh_variant_options(L, a->opt);
    mh_gathered_plan(&p, &opt, b.gate, &b.g);
    if (self) {
        project_x(L, R, a->query, &b, &L->wk, b.k, (size_t)L->wk.n_out);
        project_x(L, R, a->query, &b, &L->wv, b.v, (size_t)L->wv.n_out);
    } else {
        mh_gemm_packed(L->kernels, L->threads, rows_kv, a->key, (size_t)c->kdim, &L->wk, b.k, (size_t)L->wk.n_out);
        mh_gemm_packed(L->kernels, L->threads, rows_kv, a->value, (size_t)c->vdim, &L->wv, b.v, (size_t)L->wv.n_out);
    }
    if (mh_positions_on(L)) { /* after routing: the norm router reads the plain projection */
        mh_positions_from(0, B, M, b.k_pos);
        mh_positions_apply(L, 1, rows_kv, (size_t)c->n_kv_heads, b.k_pos, b.k, (size_t)L->wk.n_out);
        if (!learned(L)) { /* the dense Q; the learned router's gathered rows follow gather_q */
            mh_positions_queries(a->opt, B, N, M, b.q_pos);
            mh_positions_apply(L, 0, R, (size_t)c->n_heads, b.q_pos, b.q, (size_t)L->wq.n_out);
        }
    }
    gather_q(L, B, a->query, &b);
    if (learned(L)) /* each head's gathered rows, at the positions of their tokens */
        mh_positions_apply(L, 0, (size_t)b.g.seg[(size_t)c->n_heads * (size_t)B], 1, b.g.pos, b.qg, (size_t)c->head_dim);
    mh_gathered_attend(L->kernels, L->threads, &p, &opt, 1, &b.g, b.qg, b.og);
    project_out(L, B, R, &b, a->out);
    const mh_kv_seqs rows = {B, N, NULL, NULL};
    if (a->routing) record(L, &rows, &b, a->routing);
}

static void decode_carve(const mh_layer* L, int B, int n, mh_ws* ws) {
    buffers b;
    mh_decode_bufs d;
    carve(L, B, n, n, 1, ws, &b);
    mh_variant_decode_carve(L, B, n, ws, &d);
}

/* Every batch row's new tokens in the padded rows [B][n] (core/kv_cache.h: mh_kv_seqs); a
 * filler row runs no head. */
static void decode(const mh_layer* L, struct mh_kv_cache* cache, const mh_decode_args* a,
                   void* workspace) {
    const mh_layer_config* c = &L->cfg;
    const int B = a->batch, n = a->n_new;
    const size_t H = (size_t)c->n_heads, D = (size_t)c->head_dim, Dv = (size_t)c->head_dim_v;
    const size_t R = (size_t)B * (size_t)n;
    const mh_kv_seqs s = mh_variant_decode_seqs(a);
    mh_ws ws = mh_ws_begin(workspace);
    buffers b;
    mh_decode_bufs db;
    carve(L, B, n, n, 1, &ws, &b);
    mh_variant_decode_carve(L, B, n, &ws, &db);
    const float* x = mh_variant_rows_in(L, &s, a->x, &db);
    const int n_kv = mh_variant_decode_positions(cache, &s, &db); /* db.q_pos: each row's cache position */
    round_x(L, R, x, &b);
    project_x(L, R, x, &b, &L->wk, b.k, (size_t)L->wk.n_out);
    project_x(L, R, x, &b, &L->wv, b.v, (size_t)L->wv.n_out);
    if (mh_positions_on(L)) /* before k enters the cache; db.q_pos: each row's cache position */
        mh_positions_apply(L, 1, R, (size_t)c->n_kv_heads, db.q_pos, b.k, (size_t)L->wk.n_out);
    mh_kv_cache_write(cache, L->kernels, &s, b.k, b.v);
    if (!learned(L)) project_q_norm(L, R, x, &b);
    route(L, R, x, &b);
    for (int bb = 0; bb < B; bb++) /* filler rows: no head runs */
        for (size_t r = (size_t)bb * (size_t)n + (size_t)mh_kv_seq_count(&s, bb); r < (size_t)(bb + 1) * (size_t)n; r++) {
            memset(b.gate + r * H, 0, H * sizeof(float));
            memset(b.sel + r * H, 0, H);
        }
    mh_attn_problem p = problem(L, B, n, n, c->n_heads);
    mh_attn_options opt = mh_variant_options(L, NULL);
    mh_core_extra ex = {0};
    mh_kv_pages pages;
    mh_variant_decode_view(cache, &s, &db, n_kv, &p, &opt, &ex, &pages);
    mh_gathered_plan(&p, &opt, b.gate, &b.g);
    if (learned(L)) { /* only the running heads' Q rows, scattered into a zeroed dense Q */
        gather_q(L, B, x, &b);
        memset(b.q, 0, R * H * D * sizeof(float));
        for (size_t h = 0; h < H; h++)
            for (int64_t e = b.g.seg[h * (size_t)B]; e < b.g.seg[(h + 1) * (size_t)B]; e++)
                memcpy(b.q + (size_t)b.g.row[e] * H * D + h * D, b.qg + (size_t)e * D, D * sizeof(float));
    }
    const size_t group = H / (size_t)c->n_kv_heads;
    memset(b.kv_active, 0, (size_t)B * (size_t)c->n_kv_heads);
    for (size_t r = 0; r < R; r++)
        for (size_t h = 0; h < H; h++)
            if (b.gate[r * H + h] != 0.0f) b.kv_active[(r / (size_t)n) * (size_t)c->n_kv_heads + h / group] = 1;

    /* the dense Q after routing (rows of heads that do not run are zeros and stay zeros) */
    mh_positions_apply(L, 0, R, H, db.q_pos, b.q, H * D);
    p.q.data = b.q, p.o.data = b.o;
    ex.kv_active = b.kv_active;
    mh_core_attention_ex(L->kernels, L->threads, &p, &opt, 0, b.attn, &ex);
    for (size_t h = 0; h < H; h++) /* the running heads' outputs, in the gathered order */
        for (int64_t e = b.g.seg[h * (size_t)B]; e < b.g.seg[(h + 1) * (size_t)B]; e++)
            memcpy(b.og + (size_t)e * Dv, b.o + (size_t)b.g.row[e] * H * Dv + h * Dv, Dv * sizeof(float));
    mh_gathered_scale(&p, &b.g, b.og);
    float* out = mh_variant_rows_at(&s, a->out, &db);
    project_out(L, B, R, &b, out);
    mh_variant_rows_out(L, &s, out, a->out);
    if (a->routing) record(L, &s, &b, a->routing);
}

/* Every KV head is cached: MoH does not shrink the cache. */
const mh_variant_ops mh_variant_moh = {"moh", sizeof(mh_moh_config), &defaults, 1, MH_CAP_ROUTING | MH_CAP_I8_CACHE | MH_CAP_POSITIONS | MH_CAP_SEQS | MH_CAP_SHARD,
                                       resolve, check_forward, create, destroy, mh_variant_kv_heads_layout,
                                       forward_carve, decode_carve, forward, decode};
