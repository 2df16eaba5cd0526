/*
 * DCMHA (docs/variants.md, "DCMHA"): MHA projections, a per-token dynamic-weight generator
 * (dcmha_generator.c) and the cross-head attention driver (src/core/dcmha_attention.c).
 *
 * forward: Q, K, V = x Wq^T + bq, ...; F = generator(x) (all four branches per token)
 *          O = dcmha_attention(Q, K, V, query factors F[0, 2], key factors F[1, 3])
 *          out = O Wo^T + bo
 * decode:  K/V and the key-side factors F[1], F[3] of the new tokens go to the cache (its aux
 *          stream, 2 * (2RH + H) floats per token), then causal attention over the cache.
 */
#include <stdlib.h>
#include <string.h>

#include "core/dcmha_attention.h"
#include "dcmha.h"
#include "positions.h"

/* The composition runs on the head-mix kernels, whose rank bound is their own. */
_Static_assert(MH_DCMHA_MAX_RANK <= MH_HEAD_MIX_MAX_RANK, "DCMHA ranks beyond the head-mix kernels");

static const mh_dcmha_config defaults = {MH_VARIANT_DCMHA, 0, 0, 0, MH_GELU_ERF, 0};

mh_dcmha_config mh_dcmha_config_default(void) { return defaults; }

mh_dcmha_weights mh_dcmha_weights_default(void) {
    return (mh_dcmha_weights){MH_VARIANT_DCMHA, NULL, NULL, NULL, NULL, NULL};
}

static mh_status resolve(mh_layer_config* c, void* vcfg) {
    mh_dcmha_config* d = vcfg;
    if (c->n_kv_heads == 0) c->n_kv_heads = c->n_heads;
    if (d->rank == 0) d->rank = 2;
    if (d->groups == 0) d->groups = 1;
    if (c->n_kv_heads != c->n_heads || c->kdim != c->d_model || c->vdim != c->d_model)
        return MH_ERR_INVALID_ARGUMENT; /* MHA projections, self-attention only */
    if (c->window || c->softcap != 0.0f || c->alibi_slopes || c->sinks) return MH_ERR_INVALID_ARGUMENT;
    if (d->rank < 1 || d->rank > MH_DCMHA_MAX_RANK || d->groups < 1 || c->n_heads % d->groups != 0)
        return MH_ERR_INVALID_ARGUMENT;
    if (d->hidden == 0) d->hidden = 4 * (c->n_heads / d->groups);
    if (d->hidden < 1 || (d->gelu != MH_GELU_ERF && d->gelu != MH_GELU_TANH) ||
        (d->static_weights != 0 && d->static_weights != 1))
        return MH_ERR_INVALID_ARGUMENT;
    /* every generator shape must fit an int (the packed matrices' sizes) */
    const size_t z = 4 * (size_t)d->groups * (size_t)d->hidden + 4 * (size_t)c->n_heads;
    if (z > (size_t)INT32_MAX / 8 || (size_t)d->hidden > (size_t)INT32_MAX / 8) return MH_ERR_SIZE_OVERFLOW;
    return MH_OK;
}

/* DCMHA serves self-attention with at most the causal flag (docs/variants.md, "DCMHA"). */
static mh_status check_forward(const mh_layer* L, const mh_forward_args* a) {
    (void)L;
    const mh_attn_options* o = a->opt;
    return a->key || (o && (o->kv_len || o->mask || o->probs ||
                            (o->q_offset != MH_Q_OFFSET_END && o->q_offset != 0)))
               ? MH_ERR_UNSUPPORTED
               : MH_OK;
}

static void destroy(mh_layer* L) {
    mh_variant_free_projections(L);
    if (L->ext) mh_dcmha_generator_destroy(L->ext);
    free(L->ext);
    L->ext = NULL;
}

static mh_status create(mh_layer* L, const mh_layer_weights* w) {
    const mh_layer_config* c = &L->cfg;
    const int st_w = mh_dcmha_cfg(c)->static_weights;
    const mh_dcmha_weights* dw = w->variant_weights;
    if (!dw || !dw->w1 || !dw->w2 || !dw->wd || !dw->wb_pre != !st_w || !dw->wb_post != !st_w)
        return MH_ERR_INVALID_ARGUMENT;
    const int hd = c->n_heads * c->head_dim, hdv = c->n_heads * c->head_dim_v;
    mh_status st = mh_variant_pack(L, w->w_q, w->b_q, hd, c->d_model, &L->wq);
    if (st == MH_OK) st = mh_variant_pack(L, w->w_k, w->b_k, hd, c->kdim, &L->wk);
    if (st == MH_OK) st = mh_variant_pack(L, w->w_v, w->b_v, hdv, c->vdim, &L->wv);
    if (st == MH_OK) st = mh_variant_pack(L, w->w_o, w->b_o, c->d_model, hdv, &L->wo);
    if (st == MH_OK) {
        L->ext = calloc(1, sizeof(dcmha_state));
        st = L->ext ? mh_dcmha_generator_create(L, dw, L->ext) : MH_ERR_OUT_OF_MEMORY;
        if (st != MH_OK) free(L->ext), L->ext = NULL;
    }
    if (st == MH_OK) L->ext_bytes = mh_dcmha_generator_bytes(L);
    if (st != MH_OK) destroy(L);
    return st;
}

static void cache_layout(const mh_layer* L, mh_cache_layout* out) {
    const mh_layer_config* c = &L->cfg;
    *out = (mh_cache_layout){c->n_heads, c->head_dim, c->n_heads, c->head_dim_v,
                             (int)(2 * mh_dcmha_dims(c).branch)};
}

/* One call's workspace:
 *   q [B*N, H*D]  k [B*M, H*D]  v [B*M, H*Dv]  o [B*N, H*Dv]
 *   z [B*N, 4GC + 4H]  f [B*N, 4 (2RH + H)]
 *   kf [B*M, 2 (2RH + H)] the key-side factors in mh_dcmha_key_factors' tiles (forward)
 *   pos [B*N] the rows' positions, q's and k's alike (rotary or QK-norm only)  attn */
typedef struct buffers {
    float *q, *k, *v, *o, *z, *f, *kf;
    int64_t* pos;
    void* attn;
} buffers;

static mh_dcmha_problem problem(const mh_layer* L, int B, int N, int M, const buffers* b) {
    const mh_layer_config* c = &L->cfg;
    const dcmha_dims d = mh_dcmha_dims(c);
    const ptrdiff_t hd = (ptrdiff_t)c->n_heads * c->head_dim, hdv = (ptrdiff_t)c->n_heads * c->head_dim_v;
    const ptrdiff_t row = (ptrdiff_t)d.row, br = (ptrdiff_t)d.branch;
    mh_dcmha_problem p;
    memset(&p, 0, sizeof p);
    p.batch = B, p.n_q = N, p.n_kv = M, p.n_heads = c->n_heads, p.groups = d.G, p.rank = d.R;
    p.head_dim_qk = c->head_dim, p.head_dim_v = c->head_dim_v, p.scale = c->scale;
    p.q = (mh_tensor){.data = b->q, .stride_batch = N * hd, .stride_token = hd, .stride_head = c->head_dim};
    p.k = (mh_tensor){.data = b->k, .stride_batch = M * hd, .stride_token = hd, .stride_head = c->head_dim};
    p.v = (mh_tensor){.data = b->v, .stride_batch = M * hdv, .stride_token = hdv, .stride_head = c->head_dim_v};
    p.k_dtype = p.v_dtype = MH_DTYPE_F32;
    p.o = b->o;
    p.qf = (mh_dcmha_factors){b->f, N * row, row, 0, 2 * br};
    p.kf = (mh_dcmha_key_factors){b->kf, M * 2 * br, (size_t)M, d.branch};
    p.wb = L->ext ? ((const dcmha_state*)L->ext)->wb : NULL;
    p.compute = c->compute;
    return p;
}

static void carve(const mh_layer* L, int B, int N, int M, int is_decode, mh_ws* ws, buffers* b) {
    const mh_layer_config* c = &L->cfg;
    const dcmha_dims d = mh_dcmha_dims(c);
    const size_t rows_q = (size_t)B * (size_t)N, rows_kv = (size_t)B * (size_t)M;
    const size_t hd = (size_t)c->n_heads * (size_t)c->head_dim, hdv = (size_t)c->n_heads * (size_t)c->head_dim_v;
    b->q = mh_ws_take(ws, rows_q, hd, sizeof(float));
    b->k = mh_ws_take(ws, rows_kv, hd, sizeof(float));
    b->v = mh_ws_take(ws, rows_kv, hdv, sizeof(float));
    b->o = mh_ws_take(ws, rows_q, hdv, sizeof(float));
    b->z = mh_ws_take(ws, rows_q, d.z, sizeof(float));
    b->f = mh_ws_take(ws, rows_q, d.row, sizeof(float));
    b->kf = is_decode ? NULL : mh_ws_take(ws, rows_kv, 2 * d.branch, sizeof(float));
    b->pos = mh_positions_take(L, rows_q, ws);
    const mh_dcmha_problem p = problem(L, B, N, M, b);
    /* decode: sized for any n_new up to N, so one size serves a prompt and the steps after it */
    b->attn = is_decode ? mh_dcmha_attention_carve_upto(L->kernels, L->threads, &p, ws)
                        : mh_dcmha_attention_carve(L->kernels, L->threads, &p, 1, ws);
}

static void forward_carve(const mh_layer* L, int B, int N, int M, mh_ws* ws) {
    buffers b;
    carve(L, B, N, M, 0, ws, &b);
}

static void project(const mh_layer* L, size_t rows, const float* x, const buffers* b) {
    const size_t dm = (size_t)L->cfg.d_model;
    mh_gemm_packed(L->kernels, L->threads, rows, x, dm, &L->wq, b->q, (size_t)L->wq.n_out);
    mh_gemm_packed(L->kernels, L->threads, rows, x, dm, &L->wk, b->k, (size_t)L->wk.n_out);
    mh_gemm_packed(L->kernels, L->threads, rows, x, dm, &L->wv, b->v, (size_t)L->wv.n_out);
    mh_dcmha_generate(L, rows, x, b->z, b->f);
}

/* QK-norm and rotary of the projected rows, q and k of a row at the same position pos. */
static void position(const mh_layer* L, size_t rows, const buffers* b) {
    const size_t H = (size_t)L->cfg.n_heads;
    mh_positions_apply(L, 0, rows, H, b->pos, b->q, (size_t)L->wq.n_out);
    mh_positions_apply(L, 1, rows, H, b->pos, b->k, (size_t)L->wk.n_out);
}

/* The key-side branches 1 and 3 of tokens [0, n) of every sequence (factor rows f) into kf
 * at positions pos0 .. pos0 + n - 1. */
static void store_keys(const mh_layer* L, const mh_dcmha_key_factors* kf, int B, int n, size_t pos0, const float* f) {
    const dcmha_dims d = mh_dcmha_dims(&L->cfg);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < n; t++) {
            const float* row = f + ((size_t)b * (size_t)n + (size_t)t) * d.row;
            mh_dcmha_store_key(kf, b, pos0 + (size_t)t, row + d.branch, row + 3 * d.branch);
        }
}


/* Per-call options were checked by check_forward: self-attention, at most `causal` set. */
static void forward(const mh_layer* L, const mh_forward_args* a, void* workspace) {
    const int B = a->batch, N = a->n_q;
    mh_ws ws = mh_ws_begin(workspace);
    buffers b;
    carve(L, B, N, N, 0, &ws, &b);
    const size_t rows = (size_t)B * (size_t)N;
    project(L, rows, a->query, &b);
    if (mh_positions_on(L)) { /* self-attention from position 0: query i and key i at i */
        mh_positions_from(0, B, N, b.pos);
        position(L, rows, &b);
    }
    mh_dcmha_problem p = problem(L, B, N, N, &b);
    store_keys(L, &p.kf, B, N, 0, b.f);
    p.causal = a->opt ? a->opt->causal : 0;
    mh_dcmha_attention(L->kernels, L->threads, &p, 1, b.attn);
    mh_variant_out_projection(L, rows, b.o, a->out);
}

static void decode_carve(const mh_layer* L, int B, int n, mh_ws* ws) {
    buffers b;
    carve(L, B, n, n, 1, ws, &b);
}

static void decode(const mh_layer* L, struct mh_kv_cache* cache, const mh_decode_args* a,
                   void* workspace) {
    const dcmha_dims d = mh_dcmha_dims(&L->cfg);
    const mh_kv_seqs s = mh_variant_decode_seqs(a); /* sequences 0 .. B-1, advancing together */
    const int B = a->batch, n = a->n_new, length = mh_kv_cache_seq_len(cache, 0);
    const size_t capacity = (size_t)mh_kv_cache_capacity(cache);
    mh_ws ws = mh_ws_begin(workspace);
    buffers b;
    carve(L, B, n, n, 1, &ws, &b);
    const size_t rows = (size_t)B * (size_t)n;
    project(L, rows, a->x, &b);
    if (mh_positions_on(L)) { /* before k enters the cache */
        mh_positions_from(length, B, n, b.pos);
        position(L, rows, &b);
    }
    mh_kv_cache_write(cache, L->kernels, &s, b.k, b.v);
    /* the cache's aux stream [B][capacity][aux_dim] holds the key factors in tiles */
    mh_dcmha_key_factors kf = {NULL, 0, capacity, d.branch};
    kf.data = mh_kv_cache_aux(cache, &kf.stride_batch);
    store_keys(L, &kf, B, n, (size_t)length, b.f);

    const int total = length + n;
    mh_dcmha_problem p = problem(L, B, n, total, &b);
    mh_kv_pages unused; /* batch row b is sequence b: the plain view */
    (void)mh_kv_cache_views(cache, &s, &p.k, &p.v, &unused);
    p.k_dtype = p.v_dtype = mh_kv_cache_dtype(cache);
    p.kf = kf;
    p.causal = 1;
    p.q_pos = length;
    mh_dcmha_attention(L->kernels, L->threads, &p, 0, b.attn);
    mh_variant_out_projection(L, rows, b.o, a->out);
}

const mh_variant_ops mh_variant_dcmha = {"dcmha", sizeof(mh_dcmha_config), &defaults, 1, MH_CAP_POSITIONS,
                                         resolve, check_forward, create, destroy, cache_layout, forward_carve,
                                         decode_carve, forward, decode};
