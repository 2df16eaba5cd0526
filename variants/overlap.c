/*
 * Overlapping heads (MOHSA; docs/variants.md, "Overlapping heads"). Head i attends with the
 * window [i*D - o, i*D + D + o) of its projected row padded with o zeros on each side, for Q,
 * K and V alike; the H enlarged outputs (D + 2o each) go through W' [d_model, H*(D + 2o)].
 *
 * The projections write into rows of width H*D + 2o whose o-wide halos are zero, and the core
 * reads every head's window in place: a strided view with head stride D and head width D + 2o
 * (the windows overlap; the core reads its inputs through strides and never assumes disjoint
 * heads). The KV cache keeps those padded K/V rows, one stream of H*D + 2o per token, so decode
 * views them in place too.
 */
#include <limits.h>
#include <math.h>
#include <string.h>

#include "api/kv_cache.h"
#include "core/attention.h"
#include "util/checked.h"
#include "variant.h"

/* The fields of the other variants must be left 0/NULL. */
static int foreign_config(const mh_layer_config* c) {
    static const mh_dcmha_config no_dcmha;
    return c->moh.router != MH_MOH_ROUTER_LEARNED || c->moh.shared_heads || c->moh.top_k ||
           c->collab_dim || memcmp(&c->dcmha, &no_dcmha, sizeof no_dcmha) != 0;
}

static mh_status resolve(mh_layer_config* c) {
    if (c->n_kv_heads == 0) c->n_kv_heads = c->n_heads;
    if (c->head_dim_v == 0) c->head_dim_v = c->head_dim;
    if (c->kdim == 0) c->kdim = c->d_model;
    if (c->vdim == 0) c->vdim = c->d_model;
    /* Windows slide over all H heads of Q, K and V alike: one KV head per query head, D = Dv. */
    if (c->n_kv_heads != c->n_heads || c->head_dim_v != c->head_dim) return MH_ERR_INVALID_ARGUMENT;
    if (c->overlap < 0 || c->overlap > c->head_dim || foreign_config(c)) return MH_ERR_INVALID_ARGUMENT;
    /* W' is [d, H*(D + 2o)]; the padded rows (H*D + 2o) are no wider */
    size_t wide;
    if (!mh_mul_size((size_t)c->n_heads, (size_t)c->head_dim + 2 * (size_t)c->overlap, &wide) ||
        wide > INT_MAX)
        return MH_ERR_SIZE_OVERFLOW;
    /* The paper's scale is unverified; default to timm's head_dim**-0.5 on the enlarged head. */
    if (c->scale == 0.0f) c->scale = 1.0f / sqrtf((float)(c->head_dim + 2 * c->overlap));
    return MH_OK;
}

static mh_status create(mh_layer* L, const mh_layer_weights* w) {
    if (w->moh_w_router || w->moh_w_shared || w->moh_w_stage || w->collab_mix || w->collab_content ||
        w->dcmha_w1 || w->dcmha_w2 || w->dcmha_wd || w->dcmha_wb_pre || w->dcmha_wb_post)
        return MH_ERR_INVALID_ARGUMENT;
    const mh_layer_config* c = &L->cfg;
    const int hd = c->n_heads * c->head_dim, wide = c->n_heads * (c->head_dim + 2 * c->overlap);
    mh_status st = mh_pack_matrix(L->kernels, w->w_q, w->b_q, hd, c->d_model, &L->wq);
    if (st == MH_OK) st = mh_pack_matrix(L->kernels, w->w_k, w->b_k, hd, c->kdim, &L->wk);
    if (st == MH_OK) st = mh_pack_matrix(L->kernels, w->w_v, w->b_v, hd, c->vdim, &L->wv);
    if (st == MH_OK) st = mh_pack_matrix(L->kernels, w->w_o, w->b_o, c->d_model, wide, &L->wo);
    if (st != MH_OK) mh_variant_free_projections(L);
    return st;
}

/* Width of a padded projected row: H*D + 2o. */
static size_t padded_width(const mh_layer_config* c) {
    return (size_t)c->n_heads * (size_t)c->head_dim + 2 * (size_t)c->overlap;
}

/* One K and one V stream of padded rows per token: 2*(H*D + 2o) elements, of which 4o are the
 * zero halos (kept so decode reads the windows in place, as the forward does). */
static void cache_layout(const mh_layer* L, mh_cache_layout* out) {
    const int w = (int)padded_width(&L->cfg);
    *out = (mh_cache_layout){1, w, 1, w, 0};
}

/* The workspace of one call:
 *   q [B*N, H*D + 2o]   k, v [B*M, H*D + 2o]   (padded rows, zero halos)
 *   o [B*N, H*(D + 2o)]  (the enlarged head outputs, W' input) */
typedef struct buffers {
    float *q, *k, *v, *o;
    void* attn;
} buffers;

/* The core problem on padded rows of `width` elements: head h's window starts at h*D. */
static mh_attn_problem problem(const mh_layer* L, int B, int N, int M, const buffers* b) {
    const mh_layer_config* c = &L->cfg;
    const int dw = c->head_dim + 2 * c->overlap;
    const ptrdiff_t width = (ptrdiff_t)padded_width(c), out_w = (ptrdiff_t)c->n_heads * dw;
    mh_attn_problem p;
    memset(&p, 0, sizeof p);
    p.batch = B, p.n_q = N, p.n_kv = M, p.n_heads = p.n_kv_heads = c->n_heads;
    p.head_dim_qk = p.head_dim_v = dw, p.scale = c->scale;
    p.q = (mh_tensor){b->q, N * width, width, c->head_dim};
    p.k = (mh_tensor){b->k, M * width, width, c->head_dim};
    p.v = (mh_tensor){b->v, M * width, width, c->head_dim};
    p.k_dtype = p.v_dtype = MH_DTYPE_F32;
    p.o = b->o, p.o_stride_batch = N * out_w, p.o_stride_token = out_w, p.o_stride_head = dw;
    return p;
}

static void carve(const mh_layer* L, int B, int N, int M, int is_decode, mh_ws* ws, buffers* b) {
    const mh_layer_config* c = &L->cfg;
    const size_t rows_q = (size_t)B * (size_t)N, rows_kv = (size_t)B * (size_t)M;
    const size_t width = padded_width(c);
    b->q = mh_ws_take(ws, rows_q, width, sizeof(float));
    b->k = mh_ws_take(ws, rows_kv, width, sizeof(float));
    b->v = mh_ws_take(ws, rows_kv, width, sizeof(float));
    b->o = mh_ws_take(ws, rows_q, (size_t)c->n_heads * (size_t)(c->head_dim + 2 * c->overlap),
                      sizeof(float));
    const mh_attn_problem p = problem(L, B, N, M, b);
    b->attn = mh_core_attention_carve(L->kernels, L->threads, &p, !is_decode, ws);
}

static void forward_carve(const mh_layer* L, int B, int N, int M, mh_ws* ws) {
    buffers b;
    carve(L, B, N, M, 0, ws, &b);
}

static void decode_carve(const mh_layer* L, int B, int n, mh_ws* ws) {
    buffers b;
    carve(L, B, n, n, 1, ws, &b);
}

/* rows x W^T + b into the middle H*D of padded rows, whose o-wide halos are set to zero. */
static void project_padded(const mh_layer* L, size_t rows, const float* x, size_t ldx,
                           const mh_packed_matrix* w, float* padded) {
    const size_t o = (size_t)L->cfg.overlap, width = padded_width(&L->cfg);
    for (size_t r = 0; r < rows && o > 0; r++) {
        memset(padded + r * width, 0, o * sizeof(float));
        memset(padded + r * width + width - o, 0, o * sizeof(float));
    }
    mh_gemm_packed(L->kernels, L->threads, rows, x, ldx, w, padded + o, width);
}

static void out_projection(const mh_layer* L, size_t rows, const buffers* b, float* out) {
    mh_gemm_packed(L->kernels, L->threads, rows, b->o, (size_t)L->wo.k_in, &L->wo, out,
                   (size_t)L->cfg.d_model);
}

static void forward(const mh_layer* L, const mh_forward_args* a, void* workspace) {
    const mh_layer_config* c = &L->cfg;
    const int self = a->key == NULL, B = a->batch, N = a->n_q, M = self ? N : a->n_kv;
    mh_ws ws = mh_ws_begin(workspace);
    buffers b;
    carve(L, B, N, M, 0, &ws, &b);
    const size_t rows_q = (size_t)B * (size_t)N, rows_kv = (size_t)B * (size_t)M;
    project_padded(L, rows_q, a->query, (size_t)c->d_model, &L->wq, b.q);
    project_padded(L, rows_kv, self ? a->query : a->key, (size_t)c->kdim, &L->wk, b.k);
    project_padded(L, rows_kv, self ? a->query : a->value, (size_t)c->vdim, &L->wv, b.v);
    const mh_attn_problem p = problem(L, B, N, M, &b);
    const mh_attn_options opt = mh_variant_options(L, a->opt);
    mh_core_attention(L->kernels, L->threads, &p, &opt, 1, b.attn);
    out_projection(L, rows_q, &b, a->out);
}

static void decode(const mh_layer* L, struct mh_kv_cache* cache, int B, int n, const float* x,
                   float* out, void* workspace) {
    const mh_layer_config* c = &L->cfg;
    mh_ws ws = mh_ws_begin(workspace);
    buffers b;
    carve(L, B, n, n, 1, &ws, &b);
    const size_t rows = (size_t)B * (size_t)n;
    project_padded(L, rows, x, (size_t)c->d_model, &L->wq, b.q);
    project_padded(L, rows, x, (size_t)c->d_model, &L->wk, b.k);
    project_padded(L, rows, x, (size_t)c->d_model, &L->wv, b.v);
    mh_kv_cache_write(cache, L->kernels, n, b.k, b.v);

    const int total = cache->length + n;
    mh_attn_problem p = problem(L, B, n, total, &b);
    mh_kv_cache_views(cache, &p.k, &p.v);
    p.k.stride_head = p.v.stride_head = c->head_dim; /* windows within the one padded stream */
    p.k_dtype = p.v_dtype = cache->dtype;
    mh_attn_options opt = mh_variant_options(L, NULL);
    opt.causal = 1; /* queries sit at positions length .. length + n - 1 (MH_Q_OFFSET_END) */
    mh_core_attention(L->kernels, L->threads, &p, &opt, 0, b.attn);
    out_projection(L, rows, &b, out);
    cache->length = total;
}

const mh_variant_ops mh_variant_overlap = {"overlap", resolve, create, mh_variant_free_projections, cache_layout,
                                           forward_carve, decode_carve, forward, decode};
