/*
 * The projected layers: MHA (Hkv = H), GQA (H % Hkv == 0), MQA (Hkv = 1) and overlapping heads
 * (MOHSA; docs/variants.md "Overlapping heads") are one module. The core maps query head h to
 * KV head h / (H / Hkv) by index and never repeats K/V.
 *
 * forward: Q = query Wq^T + bq, K = key Wk^T + bk, V = value Wv^T + bv   (packed GEMMs)
 *          O = attention(Q, K, V)                                          (the core)
 *          out = O Wo^T + bo
 * decode:  the same with K/V appended to the cache first and causal attention over it.
 *
 * Overlapping heads add a halo o (mh_overlap_config.overlap; 0 for MHA/GQA/MQA): the
 * projections write into rows of width heads*dim + 2o whose o-wide ends are zero, head h's
 * window is the D + 2o elements from h*D of that row (Q, K and V alike), and W' reads the H
 * enlarged outputs [H*(D + 2o)]. The core reads the windows in place through strides (head stride D, head width
 * D + 2o; it never assumes disjoint heads). With o = 0 every row and problem is the plain
 * contiguous MHA/GQA/MQA one: the same GEMMs and the same core problem.
 */
#include <limits.h>
#include <math.h>
#include <string.h>

#include "core/attention.h"
#include "positions.h"
#include "util/checked.h"
#include "variant.h"

static const mh_overlap_config overlap_defaults = {MH_VARIANT_OVERLAP, 0};

mh_overlap_config mh_overlap_config_default(void) { return overlap_defaults; }

/* The halo o: 0 for MHA/GQA/MQA, which have no variant config. */
static int overlap_of(const mh_layer_config* c) {
    const mh_overlap_config* o = c->variant_config;
    return o ? o->overlap : 0;
}

static mh_status resolve_mha(mh_layer_config* c, void* vcfg) {
    (void)vcfg;
    if (c->n_kv_heads == 0) c->n_kv_heads = c->n_heads;
    if (c->n_kv_heads != c->n_heads) return MH_ERR_INVALID_ARGUMENT;
    return MH_OK;
}

static mh_status resolve_gqa(mh_layer_config* c, void* vcfg) {
    (void)vcfg;
    return mh_variant_resolve_kv_heads(c, 0);
}

static mh_status resolve_mqa(mh_layer_config* c, void* vcfg) {
    (void)vcfg;
    if (c->n_kv_heads == 0) c->n_kv_heads = 1;
    return c->n_kv_heads == 1 ? mh_variant_resolve_kv_heads(c, 1) : MH_ERR_INVALID_ARGUMENT;
}

static mh_status resolve_overlap(mh_layer_config* c, void* vcfg) {
    const int o = ((const mh_overlap_config*)vcfg)->overlap;
    mh_status st = resolve_mha(c, NULL);
    if (st != MH_OK) return st;
    /* Windows slide over all H heads of Q, K and V alike: one KV head per query head, D = Dv. */
    if (c->head_dim_v != c->head_dim) return MH_ERR_INVALID_ARGUMENT;
    if (o < 0 || o > c->head_dim) return MH_ERR_INVALID_ARGUMENT;
    /* W' is [d, H*(D + 2o)]; the padded rows (H*D + 2o) are no wider */
    size_t wide;
    if (!mh_mul_size((size_t)c->n_heads, (size_t)c->head_dim + 2 * (size_t)o, &wide) ||
        wide > INT_MAX)
        return MH_ERR_SIZE_OVERFLOW;
    /* The paper's scale is unverified; default to timm's head_dim**-0.5 on the enlarged head. */
    if (c->scale == 0.0f) c->scale = 1.0f / sqrtf((float)(c->head_dim + 2 * o));
    return MH_OK;
}

static mh_status create(mh_layer* L, const mh_layer_weights* w) {
    const mh_layer_config* c = &L->cfg;
    const int hd = c->n_heads * c->head_dim, kvd = c->n_kv_heads * c->head_dim;
    const int kvdv = c->n_kv_heads * c->head_dim_v;
    const int wide = c->n_heads * (c->head_dim_v + 2 * overlap_of(c)); /* W' input: H*(Dv + 2o) */
    mh_status st = mh_variant_pack(L, w->w_q, w->b_q, hd, c->d_model, &L->wq);
    if (st == MH_OK) st = mh_variant_pack(L, w->w_k, w->b_k, kvd, c->kdim, &L->wk);
    if (st == MH_OK) st = mh_variant_pack(L, w->w_v, w->b_v, kvdv, c->vdim, &L->wv);
    if (st == MH_OK) st = mh_variant_pack(L, w->w_o, w->b_o, c->d_model, wide, &L->wo);
    if (st != MH_OK) mh_variant_free_projections(L);
    return st;
}

/* Width of a projected row of `heads` heads of `dim`: heads*dim + 2o (o-wide zero halos). */
static size_t row_width(const mh_layer_config* c, int heads, int dim) {
    return (size_t)heads * (size_t)dim + 2 * (size_t)overlap_of(c);
}

/* o = 0: one stream per KV head. o > 0: one K and one V stream of padded rows per token,
 * 2*(H*D + 2o) elements, of which 4o are the zero halos (kept so decode reads the windows in
 * place, as the forward does). */
static void cache_layout(const mh_layer* L, mh_cache_layout* out) {
    const mh_layer_config* c = &L->cfg;
    if (overlap_of(c) == 0) {
        mh_variant_kv_heads_layout(L, out);
    } else {
        const int kw = (int)row_width(c, c->n_kv_heads, c->head_dim);
        const int vw = (int)row_width(c, c->n_kv_heads, c->head_dim_v);
        *out = (mh_cache_layout){1, kw, 1, vw, 0};
    }
}

/* The workspace of one call: projected Q/K/V (o = 0: no halos), the attention output, the
 * rows' positions (rotary or QK-norm only) and the core's scratch.
 *   q [B*N, H*D + 2o]   k [B*M, Hkv*D + 2o]   v [B*M, Hkv*Dv + 2o]   o [B*N, H*(Dv + 2o)]
 *   q_pos [B*N]  k_pos [B*M]  (forward only; decode's positions are mh_decode_bufs.q_pos) */
typedef struct buffers {
    float *q, *k, *v, *o;
    int64_t *q_pos, *k_pos;
    void* attn;
} buffers;

/* The core problem over the projected rows (pointers may be NULL while measuring): head h's
 * window starts at h*D (h*Dv for V) and is D + 2o (Dv + 2o) wide. */
static mh_attn_problem problem(const mh_layer* L, int B, int N, int M, const buffers* b) {
    const mh_layer_config* c = &L->cfg;
    const int dqk = c->head_dim + 2 * overlap_of(c), dv = c->head_dim_v + 2 * overlap_of(c);
    const ptrdiff_t qw = (ptrdiff_t)row_width(c, c->n_heads, c->head_dim);
    const ptrdiff_t kw = (ptrdiff_t)row_width(c, c->n_kv_heads, c->head_dim);
    const ptrdiff_t vw = (ptrdiff_t)row_width(c, c->n_kv_heads, c->head_dim_v);
    const ptrdiff_t ow = (ptrdiff_t)c->n_heads * dv;
    mh_attn_problem p;
    memset(&p, 0, sizeof p);
    p.batch = B, p.n_q = N, p.n_kv = M, p.n_heads = c->n_heads, p.n_kv_heads = c->n_kv_heads;
    p.head_dim_qk = dqk, p.head_dim_v = dv, p.scale = c->scale;
    p.q = (mh_tensor){.data = b->q, .stride_batch = N * qw, .stride_token = qw, .stride_head = c->head_dim};
    p.k = (mh_tensor){.data = b->k, .stride_batch = M * kw, .stride_token = kw, .stride_head = c->head_dim};
    p.v = (mh_tensor){.data = b->v, .stride_batch = M * vw, .stride_token = vw, .stride_head = c->head_dim_v};
    p.k_dtype = p.v_dtype = MH_DTYPE_F32;
    p.o = (mh_tensor_out){b->o, N * ow, ow, dv};
    return p;
}

/* decode: the workspace is sized without the cache length, so K/V are never prepacked, and for
 * any n_new up to N, so one size serves a prompt and the steps after it. */
static void carve(const mh_layer* L, int B, int N, int M, int is_decode, mh_ws* ws, buffers* b) {
    const mh_layer_config* c = &L->cfg;
    const size_t rows_q = (size_t)B * (size_t)N, rows_kv = (size_t)B * (size_t)M;
    b->q = mh_ws_take(ws, rows_q, row_width(c, c->n_heads, c->head_dim), sizeof(float));
    b->k = mh_ws_take(ws, rows_kv, row_width(c, c->n_kv_heads, c->head_dim), sizeof(float));
    b->v = mh_ws_take(ws, rows_kv, row_width(c, c->n_kv_heads, c->head_dim_v), sizeof(float));
    b->o = mh_ws_take(ws, rows_q, (size_t)L->wo.k_in, sizeof(float));
    b->q_pos = is_decode ? NULL : mh_positions_take(L, rows_q, ws); /* decode: mh_decode_bufs */
    b->k_pos = is_decode ? NULL : mh_positions_take(L, rows_kv, ws);
    const mh_attn_problem p = problem(L, B, N, M, b);
    b->attn = is_decode ? mh_core_attention_carve_upto(L->kernels, L->threads, &p, 0, ws)
                        : mh_core_attention_carve(L->kernels, L->threads, &p, 1, ws);
}

static void forward_carve(const mh_layer* L, int B, int N, int M, mh_ws* ws) {
    buffers b;
    carve(L, B, N, M, 0, ws, &b);
}

/* x [rows, ldx] W^T + b into the middle of rows of width n_out + 2o, whose o-wide ends are set
 * to zero (o = 0: a plain contiguous GEMM). */
static void project(const mh_layer* L, size_t rows, const float* x, size_t ldx,
                    const mh_packed_matrix* w, float* y) {
    const size_t o = (size_t)overlap_of(&L->cfg), width = (size_t)w->n_out + 2 * o;
    for (size_t r = 0; r < rows && o > 0; r++) {
        memset(y + r * width, 0, o * sizeof(float));
        memset(y + r * width + width - o, 0, o * sizeof(float));
    }
    mh_gemm_packed(L->kernels, L->threads, rows, x, ldx, w, y + o, width);
}

static void forward(const mh_layer* L, const mh_forward_args* a, void* workspace) {
    const mh_layer_config* c = &L->cfg;
    const int self = a->key == NULL, B = a->batch, N = a->n_q, M = self ? N : a->n_kv;
    mh_ws ws = mh_ws_begin(workspace);
    buffers b;
    carve(L, B, N, M, 0, &ws, &b);
    const size_t rows_q = (size_t)B * (size_t)N, rows_kv = (size_t)B * (size_t)M;
    project(L, rows_q, a->query, (size_t)c->d_model, &L->wq, b.q);
    project(L, rows_kv, self ? a->query : a->key, (size_t)c->kdim, &L->wk, b.k);
    project(L, rows_kv, self ? a->query : a->value, (size_t)c->vdim, &L->wv, b.v);
    if (mh_positions_on(L)) {
        mh_positions_queries(a->opt, B, N, M, b.q_pos);
        mh_positions_from(0, B, M, b.k_pos);
        mh_positions_apply(L, 0, rows_q, (size_t)c->n_heads, b.q_pos, b.q, (size_t)L->wq.n_out);
        mh_positions_apply(L, 1, rows_kv, (size_t)c->n_kv_heads, b.k_pos, b.k, (size_t)L->wk.n_out);
    }
    const mh_attn_problem p = problem(L, B, N, M, &b);
    const mh_attn_options opt = mh_variant_options(L, a->opt);
    mh_core_attention(L->kernels, L->threads, &p, &opt, 1, b.attn);
    mh_variant_out_projection(L, rows_q, b.o, a->out);
}

/* Decode needs no K/V buffers of the cache's length: new K/V rows go to k/v, then the cache. */
static void decode_carve(const mh_layer* L, int B, int n, mh_ws* ws) {
    buffers b;
    mh_decode_bufs d;
    carve(L, B, n, n, 1, ws, &b);
    mh_variant_decode_carve(L, B, n, ws, &d);
}

/* Every batch row's new tokens in the padded rows [B][n] (core/kv_cache.h: mh_kv_seqs). */
static void decode(const mh_layer* L, struct mh_kv_cache* cache, const mh_decode_args* a,
                   void* workspace) {
    const mh_layer_config* c = &L->cfg;
    const int B = a->batch, n = a->n_new;
    const mh_kv_seqs s = mh_variant_decode_seqs(a);
    mh_ws ws = mh_ws_begin(workspace);
    buffers b;
    mh_decode_bufs d;
    carve(L, B, n, n, 1, &ws, &b);
    mh_variant_decode_carve(L, B, n, &ws, &d);
    const float* x = mh_variant_rows_in(L, &s, a->x, &d);
    const int n_kv = mh_variant_decode_positions(cache, &s, &d); /* d.q_pos: each row's cache position */
    const size_t rows = (size_t)B * (size_t)n;
    project(L, rows, x, (size_t)c->d_model, &L->wq, b.q);
    project(L, rows, x, (size_t)c->d_model, &L->wk, b.k);
    project(L, rows, x, (size_t)c->d_model, &L->wv, b.v);
    if (mh_positions_on(L)) { /* before k enters the cache; d.q_pos: each row's cache position */
        mh_positions_apply(L, 0, rows, (size_t)c->n_heads, d.q_pos, b.q, (size_t)L->wq.n_out);
        mh_positions_apply(L, 1, rows, (size_t)c->n_kv_heads, d.q_pos, b.k, (size_t)L->wk.n_out);
    }
    mh_kv_cache_write(cache, L->kernels, &s, b.k, b.v);

    mh_attn_problem p = problem(L, B, n, n, &b);
    mh_attn_options opt = mh_variant_options(L, NULL);
    mh_core_extra ex = {0};
    mh_kv_pages pages;
    mh_variant_decode_view(cache, &s, &d, n_kv, &p, &opt, &ex, &pages);
    if (overlap_of(c) > 0) /* windows within the one padded stream per token (one int8 scale) */
        p.k.stride_head = c->head_dim, p.v.stride_head = c->head_dim_v, p.k.scale_stride_head = p.v.scale_stride_head = 0;
    mh_core_attention_ex(L->kernels, L->threads, &p, &opt, 0, b.attn, &ex);
    float* out = mh_variant_rows_at(&s, a->out, &d);
    mh_variant_out_projection(L, rows, b.o, out);
    mh_variant_rows_out(L, &s, out, a->out);
}

const mh_variant_ops mh_variant_mha = {"mha", 0, NULL, 0, MH_CAP_I8_CACHE | MH_CAP_POSITIONS | MH_CAP_SEQS | MH_CAP_SHARD, resolve_mha, NULL, create,
                                       mh_variant_free_projections, cache_layout, forward_carve,
                                       decode_carve, forward, decode};
const mh_variant_ops mh_variant_gqa = {"gqa", 0, NULL, 0, MH_CAP_I8_CACHE | MH_CAP_POSITIONS | MH_CAP_SEQS | MH_CAP_SHARD, resolve_gqa, NULL, create,
                                       mh_variant_free_projections, cache_layout, forward_carve,
                                       decode_carve, forward, decode};
const mh_variant_ops mh_variant_mqa = {"mqa", 0, NULL, 0, MH_CAP_I8_CACHE | MH_CAP_POSITIONS | MH_CAP_SEQS | MH_CAP_SHARD, resolve_mqa, NULL, create,
                                       mh_variant_free_projections, cache_layout, forward_carve,
                                       decode_carve, forward, decode};
const mh_variant_ops mh_variant_overlap = {"overlap", sizeof(mh_overlap_config), &overlap_defaults,
                                           0, MH_CAP_I8_CACHE | MH_CAP_SEQS, resolve_overlap, NULL, create, mh_variant_free_projections, cache_layout,
                                           forward_carve, decode_carve, forward, decode};
