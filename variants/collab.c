/*
 * CollabHead (collaborative heads, Cordonnier et al. 2020): all heads share one query and one
 * key projection of width D~; head h mixes them with its row m_h and adds a content bias.
 *
 * forward: q~ = query W~_Q^T, k~ = key W~_K^T                       [.., D~] (no bias)
 *          c  = key C^T                                             [.., H]  content bias
 *          V  = value Wv^T + bv                                     [.., H*Dv]
 *          S_h[t,s] = scale * (sum_r q~_t[r] m_h[r] k~_s[r] + c_s[h])   (shared-key core)
 *          out = concat_h softmax(S_h) V_h  Wo^T + bo
 * decode:  k~, V and c of the new tokens go to the cache (K: one stream of D~, V: H streams of
 *          Dv, aux: H floats), then the same core runs causally over the cache.
 */
#include <string.h>

#include "core/shared_key_attention.h"
#include "util/alloc.h"
#include "variant.h"

/* The layer's own state beyond wq/wk/wv/wo (wq, wk are W~_Q, W~_K [D~, in]). */
typedef struct collab_state {
    float* mix;                 /* [H, D~] */
    mh_packed_matrix content;   /* C [H, kdim] packed */
} collab_state;

static const mh_collab_config defaults = {MH_VARIANT_COLLAB, 0};

mh_collab_config mh_collab_config_default(void) { return defaults; }

mh_collab_weights mh_collab_weights_default(void) {
    return (mh_collab_weights){MH_VARIANT_COLLAB, NULL, NULL};
}

/* D~, the shared query/key width, of a resolved config. */
static int dim_of(const mh_layer_config* c) {
    return ((const mh_collab_config*)c->variant_config)->collab_dim;
}

static mh_status resolve(mh_layer_config* c, void* vcfg) {
    (void)vcfg; /* c->variant_config */
    /* one shared key stream: n_kv_heads has no meaning and must stay 0 */
    if (dim_of(c) <= 0 || c->n_kv_heads != 0) return MH_ERR_INVALID_ARGUMENT;
    return MH_OK;
}

static void destroy(mh_layer* L) {
    collab_state* s = L->ext;
    mh_variant_free_projections(L);
    if (s) {
        mh_free(s->mix);
        mh_packed_matrix_free(&s->content);
        mh_free(s);
    }
    L->ext = NULL;
}

static mh_status create(mh_layer* L, const mh_layer_weights* w) {
    const mh_layer_config* c = &L->cfg;
    const int H = c->n_heads, Dt = dim_of(c), hdv = H * c->head_dim_v;
    const mh_collab_weights* cw = w->variant_weights;
    if (!cw || !cw->mix || !cw->content) return MH_ERR_INVALID_ARGUMENT;
    size_t mix_bytes;
    if (!mh_mul3_size((size_t)H, (size_t)Dt, sizeof(float), &mix_bytes)) return MH_ERR_SIZE_OVERFLOW;
    collab_state* s = mh_alloc(sizeof *s);
    if (!s) return MH_ERR_OUT_OF_MEMORY;
    memset(s, 0, sizeof *s);
    L->ext = s;
    mh_status st = MH_OK;
    s->mix = mh_alloc(mix_bytes);
    if (!s->mix) st = MH_ERR_OUT_OF_MEMORY;
    else memcpy(s->mix, cw->mix, mix_bytes);
    if (st == MH_OK) st = mh_variant_pack(L, w->w_q, NULL, Dt, c->d_model, &L->wq);
    if (st == MH_OK) st = mh_variant_pack(L, w->w_k, NULL, Dt, c->kdim, &L->wk);
    if (st == MH_OK) st = mh_variant_pack(L, cw->content, NULL, H, c->kdim, &s->content);
    if (st == MH_OK) st = mh_variant_pack(L, w->w_v, w->b_v, hdv, c->vdim, &L->wv);
    if (st == MH_OK) st = mh_variant_pack(L, w->w_o, w->b_o, c->d_model, hdv, &L->wo);
    if (st != MH_OK) {
        destroy(L);
        return st;
    }
    L->ext_bytes = mix_bytes + s->content.bytes;
    return MH_OK;
}

static void cache_layout(const mh_layer* L, mh_cache_layout* out) {
    const mh_layer_config* c = &L->cfg;
    *out = (mh_cache_layout){1, dim_of(c), c->n_heads, c->head_dim_v, c->n_heads};
}

/* The workspace of one call:
 *   q [B*N, D~]   k [B*M, D~]   cb [B*M, H]   v [B*M, H*Dv]   o [B*N, H*Dv] */
typedef struct buffers {
    float *q, *k, *cb, *v, *o;
    void* attn;
} buffers;

/* The core problem over contiguous projected buffers (pointers may be NULL while measuring). */
static mh_shared_key_problem problem(const mh_layer* L, int B, int N, int M, const buffers* b) {
    const mh_layer_config* c = &L->cfg;
    const ptrdiff_t hdv = (ptrdiff_t)c->n_heads * c->head_dim_v;
    mh_shared_key_problem p;
    memset(&p, 0, sizeof p);
    p.batch = B, p.n_q = N, p.n_kv = M, p.n_heads = c->n_heads;
    p.dim_qk = dim_of(c), p.head_dim_v = c->head_dim_v, p.scale = c->scale;
    p.q = b->q, p.mix = ((const collab_state*)L->ext)->mix;
    p.k = b->k, p.k_stride_batch = (ptrdiff_t)M * dim_of(c);
    p.v = (mh_tensor){.data = b->v, .stride_batch = M * hdv, .stride_token = hdv, .stride_head = c->head_dim_v};
    p.k_dtype = p.v_dtype = MH_DTYPE_F32;
    p.bias = b->cb, p.bias_stride_batch = (ptrdiff_t)M * c->n_heads;
    p.o = b->o;
    return p;
}

/* decode: sized for any n_new up to N, so one size serves a prompt and the steps after it. */
static void carve(const mh_layer* L, int B, int N, int M, int is_decode, mh_ws* ws, buffers* b) {
    const mh_layer_config* c = &L->cfg;
    const size_t rows_q = (size_t)B * (size_t)N, rows_kv = (size_t)B * (size_t)M;
    const size_t H = (size_t)c->n_heads, hdv = H * (size_t)c->head_dim_v;
    b->q = mh_ws_take(ws, rows_q, (size_t)dim_of(c), sizeof(float));
    b->k = mh_ws_take(ws, rows_kv, (size_t)dim_of(c), sizeof(float));
    b->cb = mh_ws_take(ws, rows_kv, H, sizeof(float));
    b->v = mh_ws_take(ws, rows_kv, hdv, sizeof(float));
    b->o = mh_ws_take(ws, rows_q, hdv, sizeof(float));
    const mh_shared_key_problem p = problem(L, B, N, M, b);
    b->attn = is_decode ? mh_shared_key_attention_carve_upto(L->kernels, L->threads, &p, ws)
                        : mh_shared_key_attention_carve(L->kernels, L->threads, &p, 1, ws);
}

static void forward_carve(const mh_layer* L, int B, int N, int M, mh_ws* ws) {
    buffers b;
    carve(L, B, N, M, 0, ws, &b);
}

/* k~, the content bias and V of `rows` key/value input rows. */
static void project_kv(const mh_layer* L, size_t rows, const float* xk, const float* xv, const buffers* b) {
    const mh_layer_config* c = &L->cfg;
    const collab_state* s = L->ext;
    mh_gemm_packed(L->kernels, L->threads, rows, xk, (size_t)c->kdim, &L->wk, b->k, (size_t)dim_of(c));
    mh_gemm_packed(L->kernels, L->threads, rows, xk, (size_t)c->kdim, &s->content, b->cb, (size_t)c->n_heads);
    mh_gemm_packed(L->kernels, L->threads, rows, xv, (size_t)c->vdim, &L->wv, b->v, (size_t)L->wv.n_out);
}

static void forward(const mh_layer* L, const mh_forward_args* a, void* workspace) {
    const mh_layer_config* c = &L->cfg;
    const int self = a->key == NULL, B = a->batch, N = a->n_q, M = self ? N : a->n_kv;
    mh_ws ws = mh_ws_begin(workspace);
    buffers b;
    carve(L, B, N, M, 0, &ws, &b);
    const size_t rows_q = (size_t)B * (size_t)N;
    mh_gemm_packed(L->kernels, L->threads, rows_q, a->query, (size_t)c->d_model, &L->wq, b.q,
                   (size_t)dim_of(c));
    project_kv(L, (size_t)B * (size_t)M, self ? a->query : a->key, self ? a->query : a->value, &b);
    const mh_shared_key_problem p = problem(L, B, N, M, &b);
    const mh_attn_options opt = mh_variant_options(L, a->opt);
    mh_shared_key_attention(L->kernels, L->threads, &p, &opt, 1, b.attn);
    mh_variant_out_projection(L, rows_q, b.o, a->out);
}

/* Decode sizes its buffers for the new tokens only; the core reads K/V/bias from the cache. */
static void decode_carve(const mh_layer* L, int B, int n, mh_ws* ws) {
    buffers b;
    carve(L, B, n, n, 1, ws, &b);
}

static void decode(const mh_layer* L, struct mh_kv_cache* cache, const mh_decode_args* a,
                   void* workspace) {
    const mh_layer_config* c = &L->cfg;
    const int B = a->batch, n = a->n_new;
    const float* x = a->x;
    mh_ws ws = mh_ws_begin(workspace);
    buffers b;
    carve(L, B, n, n, 1, &ws, &b);
    const size_t rows = (size_t)B * (size_t)n;
    mh_gemm_packed(L->kernels, L->threads, rows, x, (size_t)c->d_model, &L->wq, b.q, (size_t)dim_of(c));
    project_kv(L, rows, x, x, &b);
    const mh_kv_seqs s = mh_variant_decode_seqs(a); /* sequences 0 .. B-1, advancing together */
    mh_kv_cache_write(cache, L->kernels, &s, b.k, b.v);
    mh_kv_cache_write_aux(cache, &s, b.cb);

    const int total = mh_kv_cache_seq_len(cache, 0) + n;
    mh_shared_key_problem p = problem(L, B, n, total, &b);
    mh_tensor kview;
    mh_kv_pages unused; /* batch row b is sequence b: the plain view */
    (void)mh_kv_cache_views(cache, &s, &kview, &p.v, &unused);
    p.k = kview.data, p.k_stride_batch = kview.stride_batch;
    p.k_dtype = p.v_dtype = mh_kv_cache_dtype(cache);
    p.bias = mh_kv_cache_aux(cache, &p.bias_stride_batch); /* [B][capacity][H] */
    mh_attn_options opt = mh_variant_options(L, NULL);
    opt.causal = 1; /* queries sit at positions length .. length + n - 1 (MH_Q_OFFSET_END) */
    mh_shared_key_attention(L->kernels, L->threads, &p, &opt, 0, b.attn);
    mh_variant_out_projection(L, rows, b.o, a->out);
}

const mh_variant_ops mh_variant_collab = {"collab", sizeof(mh_collab_config), &defaults, 1,
                                          MH_CAP_QK_NO_BIAS, resolve, NULL, create, destroy, cache_layout, forward_carve,
                                          decode_carve, forward, decode};
