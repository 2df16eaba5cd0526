/*
 * The GQA family: MHA (Hkv = H), GQA (H % Hkv == 0) and MQA (Hkv = 1) are one module; the core
 * maps query head h to KV head h / (H / Hkv) by index and never repeats K/V.
 *
 * forward: Q = query Wq^T + bq, K = key Wk^T + bk, V = value Wv^T + bv   (packed GEMMs)
 *          O = attention(Q, K, V)                                          (the core)
 *          out = O Wo^T + bo
 * decode:  the same with K/V appended to the cache first and causal attention over it.
 */
#include <string.h>

#include "api/kv_cache.h"
#include "core/attention.h"
#include "layer_common.h"
#include "variant.h"

static mh_status resolve_common(mh_layer_config* c) {
    if (c->head_dim_v == 0) c->head_dim_v = c->head_dim;
    if (c->kdim == 0) c->kdim = c->d_model;
    if (c->vdim == 0) c->vdim = c->d_model;
    if (c->n_kv_heads <= 0 || c->n_heads % c->n_kv_heads != 0) return MH_ERR_INVALID_ARGUMENT;
    return MH_OK;
}

static mh_status resolve_mha(mh_layer_config* c) {
    if (c->n_kv_heads == 0) c->n_kv_heads = c->n_heads;
    if (c->n_kv_heads != c->n_heads) return MH_ERR_INVALID_ARGUMENT;
    return resolve_common(c);
}

static mh_status resolve_gqa(mh_layer_config* c) { return resolve_common(c); }

static mh_status resolve_mqa(mh_layer_config* c) {
    if (c->n_kv_heads == 0) c->n_kv_heads = 1;
    if (c->n_kv_heads != 1) return MH_ERR_INVALID_ARGUMENT;
    return resolve_common(c);
}

static void destroy(mh_layer* L) {
    mh_packed_matrix_free(&L->wq);
    mh_packed_matrix_free(&L->wk);
    mh_packed_matrix_free(&L->wv);
    mh_packed_matrix_free(&L->wo);
}

static mh_status create(mh_layer* L, const mh_layer_weights* w) {
    const mh_layer_config* c = &L->cfg;
    const int hd = c->n_heads * c->head_dim, kvd = c->n_kv_heads * c->head_dim;
    const int kvdv = c->n_kv_heads * c->head_dim_v, hdv = c->n_heads * c->head_dim_v;
    mh_status st = mh_pack_matrix(L->kernels, w->w_q, w->b_q, hd, c->d_model, &L->wq);
    if (st == MH_OK) st = mh_pack_matrix(L->kernels, w->w_k, w->b_k, kvd, c->kdim, &L->wk);
    if (st == MH_OK) st = mh_pack_matrix(L->kernels, w->w_v, w->b_v, kvdv, c->vdim, &L->wv);
    if (st == MH_OK) st = mh_pack_matrix(L->kernels, w->w_o, w->b_o, c->d_model, hdv, &L->wo);
    if (st != MH_OK) destroy(L);
    return st;
}

static void cache_layout(const mh_layer* L, mh_cache_layout* out) {
    const mh_layer_config* c = &L->cfg;
    *out = (mh_cache_layout){c->n_kv_heads, c->head_dim, c->n_kv_heads, c->head_dim_v, 0};
}

/* The workspace of one call: projected Q/K/V, the attention output and the core's scratch.
 *   q [B*N, H*D]   k [B*M, Hkv*D]   v [B*M, Hkv*Dv]   o [B*N, H*Dv] */
typedef struct buffers {
    float *q, *k, *v, *o;
    void* attn;
} buffers;

/* The core problem over contiguous projected buffers (pointers may be NULL while measuring). */
static mh_attn_problem problem(const mh_layer* L, int B, int N, int M, const buffers* b) {
    const mh_layer_config* c = &L->cfg;
    const ptrdiff_t hd = (ptrdiff_t)c->n_heads * c->head_dim, kvd = (ptrdiff_t)c->n_kv_heads * c->head_dim;
    const ptrdiff_t kvdv = (ptrdiff_t)c->n_kv_heads * c->head_dim_v;
    const ptrdiff_t hdv = (ptrdiff_t)c->n_heads * c->head_dim_v;
    mh_attn_problem p;
    memset(&p, 0, sizeof p);
    p.batch = B, p.n_q = N, p.n_kv = M, p.n_heads = c->n_heads, p.n_kv_heads = c->n_kv_heads;
    p.head_dim_qk = c->head_dim, p.head_dim_v = c->head_dim_v, p.scale = c->scale;
    p.q = (mh_tensor){b->q, N * hd, hd, c->head_dim};
    p.k = (mh_tensor){b->k, M * kvd, kvd, c->head_dim};
    p.v = (mh_tensor){b->v, M * kvdv, kvdv, c->head_dim_v};
    p.k_dtype = p.v_dtype = MH_DTYPE_F32;
    p.o = b->o, p.o_stride_batch = N * hdv, p.o_stride_token = hdv, p.o_stride_head = c->head_dim_v;
    return p;
}

/* decode: the workspace is sized without the cache length, so K/V are never prepacked. */
static void carve(const mh_layer* L, int B, int N, int M, int is_decode, mh_ws* ws, buffers* b) {
    const mh_layer_config* c = &L->cfg;
    const size_t rows_q = (size_t)B * (size_t)N, rows_kv = (size_t)B * (size_t)M;
    b->q = mh_ws_take(ws, rows_q, (size_t)c->n_heads * (size_t)c->head_dim, sizeof(float));
    b->k = mh_ws_take(ws, rows_kv, (size_t)c->n_kv_heads * (size_t)c->head_dim, sizeof(float));
    b->v = mh_ws_take(ws, rows_kv, (size_t)c->n_kv_heads * (size_t)c->head_dim_v, sizeof(float));
    b->o = mh_ws_take(ws, rows_q, (size_t)c->n_heads * (size_t)c->head_dim_v, sizeof(float));
    const mh_attn_problem p = problem(L, B, N, M, b);
    b->attn = mh_core_attention_carve(L->kernels, L->threads, &p, !is_decode, ws);
}

static void forward_carve(const mh_layer* L, int B, int N, int M, mh_ws* ws) {
    buffers b;
    carve(L, B, N, M, 0, ws, &b);
}

static void forward(const mh_layer* L, const mh_forward_args* a, void* workspace) {
    const mh_layer_config* c = &L->cfg;
    const int self = a->key == NULL, B = a->batch, N = a->n_q, M = self ? N : a->n_kv;
    const float* xk = self ? a->query : a->key;
    const float* xv = self ? a->query : a->value;
    mh_ws ws = mh_ws_begin(workspace);
    buffers b;
    carve(L, B, N, M, 0, &ws, &b);
    const size_t rows_q = (size_t)B * (size_t)N, rows_kv = (size_t)B * (size_t)M;
    mh_gemm_packed(L->kernels, L->threads, rows_q, a->query, (size_t)c->d_model, &L->wq, b.q,
                   (size_t)L->wq.n_out);
    mh_gemm_packed(L->kernels, L->threads, rows_kv, xk, (size_t)c->kdim, &L->wk, b.k, (size_t)L->wk.n_out);
    mh_gemm_packed(L->kernels, L->threads, rows_kv, xv, (size_t)c->vdim, &L->wv, b.v, (size_t)L->wv.n_out);
    const mh_attn_problem p = problem(L, B, N, M, &b);
    const mh_attn_options opt = mh_layer_options(L, a->opt);
    mh_core_attention(L->kernels, L->threads, &p, &opt, 1, b.attn);
    mh_layer_out_projection(L, rows_q, b.o, a->out);
}

/* Decode needs no K/V buffers of the cache's length: new K/V rows go to k/v, then the cache. */
static void decode_carve(const mh_layer* L, int B, int n, mh_ws* ws) {
    buffers b;
    carve(L, B, n, n, 1, ws, &b);
}

static void decode(const mh_layer* L, struct mh_kv_cache* cache, int B, int n, const float* x,
                   float* out, void* workspace) {
    const mh_layer_config* c = &L->cfg;
    mh_ws ws = mh_ws_begin(workspace);
    buffers b;
    carve(L, B, n, n, 1, &ws, &b);
    const size_t rows = (size_t)B * (size_t)n;
    mh_gemm_packed(L->kernels, L->threads, rows, x, (size_t)c->d_model, &L->wq, b.q, (size_t)L->wq.n_out);
    mh_gemm_packed(L->kernels, L->threads, rows, x, (size_t)c->d_model, &L->wk, b.k, (size_t)L->wk.n_out);
    mh_gemm_packed(L->kernels, L->threads, rows, x, (size_t)c->d_model, &L->wv, b.v, (size_t)L->wv.n_out);
    mh_kv_cache_write(cache, L->kernels, n, b.k, b.v);

    const int total = cache->length + n;
    mh_attn_problem p = problem(L, B, n, total, &b);
    mh_kv_cache_views(cache, &p.k, &p.v);
    p.k_dtype = p.v_dtype = cache->dtype;
    mh_attn_options opt = mh_layer_options(L, NULL);
    opt.causal = 1; /* queries sit at positions length .. length + n - 1 (MH_Q_OFFSET_END) */
    mh_core_attention(L->kernels, L->threads, &p, &opt, 0, b.attn);
    mh_layer_out_projection(L, rows, b.o, out);
    cache->length = total;
}

const mh_variant_ops mh_variant_mha = {"mha", resolve_mha, create, destroy, cache_layout,
                                       forward_carve, decode_carve, forward, decode};
const mh_variant_ops mh_variant_gqa = {"gqa", resolve_gqa, create, destroy, cache_layout,
                                       forward_carve, decode_carve, forward, decode};
const mh_variant_ops mh_variant_mqa = {"mqa", resolve_mqa, create, destroy, cache_layout,
                                       forward_carve, decode_carve, forward, decode};
