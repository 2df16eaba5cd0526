/* Helpers shared by the variant modules (declared in variant.h). */
#include <math.h>
#include <string.h>

#include "positions.h"
#include "variant.h"

/* The tag every variant config and weights struct starts with. */
static mh_variant tag_of(const void* variant_struct) { return *(const mh_variant*)variant_struct; }

mh_status mh_variant_resolve(const mh_variant_ops* ops, mh_layer_config* c,
                             const mh_layer_weights* w, void* vcfg) {
    if (c->variant_config && (!ops->config_size || tag_of(c->variant_config) != c->variant))
        return MH_ERR_INVALID_ARGUMENT;
    if (w && w->variant_weights && (!ops->has_weights || tag_of(w->variant_weights) != c->variant))
        return MH_ERR_INVALID_ARGUMENT;
    if (ops->config_size)
        memcpy(vcfg, c->variant_config ? c->variant_config : ops->config_default, ops->config_size);
    c->variant_config = vcfg;
    if (c->head_dim_v == 0) c->head_dim_v = c->head_dim;
    if (c->kdim == 0) c->kdim = c->d_model;
    if (c->vdim == 0) c->vdim = c->d_model;
    mh_status st = ops->resolve_config(c, vcfg);
    if (st == MH_OK && c->scale == 0.0f) c->scale = 1.0f / sqrtf((float)c->head_dim);
    if (st == MH_OK) st = mh_positions_resolve(c, ops->caps);
    return st;
}

mh_status mh_variant_resolve_kv_heads(mh_layer_config* c, int dflt) {
    if (c->n_kv_heads == 0) c->n_kv_heads = dflt;
    if (c->n_kv_heads <= 0 || c->n_heads % c->n_kv_heads != 0) return MH_ERR_INVALID_ARGUMENT;
    return MH_OK;
}

void mh_variant_kv_heads_layout(const mh_layer* L, mh_cache_layout* out) {
    const mh_layer_config* c = &L->cfg;
    *out = (mh_cache_layout){c->n_kv_heads, c->head_dim, c->n_kv_heads, c->head_dim_v, 0};
}

mh_kv_seqs mh_variant_decode_seqs(const mh_decode_args* a) {
    return (mh_kv_seqs){a->batch, a->n_new, a->seq_ids, a->n_new_seq};
}

void mh_variant_decode_carve(const mh_layer* L, int B, int n, mh_ws* ws, mh_decode_bufs* d) {
    const size_t rows = (size_t)B * (size_t)n;
    d->rows = mh_ws_take(ws, rows, (size_t)L->cfg.d_model, sizeof(float));
    d->kv_len = mh_ws_take(ws, (size_t)B, 1, sizeof(int32_t));
    d->q_pos = mh_ws_take(ws, rows, 1, sizeof(int64_t));
}

/* 1 when some count is below n (the public rows are then packed, the variant's padded). */
static int ragged_counts(const mh_kv_seqs* s) {
    for (int b = 0; s->count && b < s->batch; b++)
        if (s->count[b] != s->n) return 1;
    return 0;
}

/* Copies the rows of every batch row between the packed (public) and padded layouts. */
static void move_rows(const mh_layer* L, const mh_kv_seqs* s, const float* src, float* dst, int to_padded) {
    const size_t d = (size_t)L->cfg.d_model;
    size_t packed = 0;
    for (int b = 0; b < s->batch; b++) {
        const size_t n = (size_t)mh_kv_seq_count(s, b), padded = (size_t)b * (size_t)s->n;
        if (to_padded) {
            memcpy(dst + padded * d, src + packed * d, n * d * sizeof(float));
            memset(dst + (padded + n) * d, 0, ((size_t)s->n - n) * d * sizeof(float));
        } else {
            memcpy(dst + packed * d, src + padded * d, n * d * sizeof(float));
        }
        packed += n;
    }
}

const float* mh_variant_rows_in(const mh_layer* L, const mh_kv_seqs* s, const float* x, const mh_decode_bufs* d) {
    if (!ragged_counts(s)) return x;
    move_rows(L, s, x, d->rows, 1);
    return d->rows;
}

float* mh_variant_rows_at(const mh_kv_seqs* s, float* out, const mh_decode_bufs* d) {
    return ragged_counts(s) ? d->rows : out;
}

void mh_variant_rows_out(const mh_layer* L, const mh_kv_seqs* s, const float* padded, float* out) {
    if (padded != out) move_rows(L, s, padded, out, 0);
}

int mh_variant_decode_positions(const struct mh_kv_cache* cache, const mh_kv_seqs* s, const mh_decode_bufs* d) {
    return mh_kv_cache_positions(cache, s, d->kv_len, d->q_pos);
}

void mh_variant_decode_view(const struct mh_kv_cache* cache, const mh_kv_seqs* s, const mh_decode_bufs* d, int n_kv,
                            mh_attn_problem* p, mh_attn_options* opt, mh_core_extra* ex, mh_kv_pages* pages) {
    const int ragged = ragged_counts(s);
    p->n_kv = n_kv;
    ex->pages = mh_kv_cache_views(cache, s, &p->k, &p->v, pages);
    p->k_dtype = p->v_dtype = mh_kv_cache_dtype(cache);
    opt->causal = 1;
    opt->kv_len = d->kv_len; /* queries at kv_len - n .. kv_len - 1 (MH_Q_OFFSET_END) ... */
    if (ragged) ex->q_pos = d->q_pos; /* ... or, when counts differ, at these positions */
}

mh_status mh_variant_pack(const mh_layer* L, const float* w, const float* bias, int n_out, int k_in,
                          mh_packed_matrix* out) {
    return mh_pack_matrix(L->kernels, L->cfg.compute, w, bias, n_out, k_in, out);
}

void mh_variant_free_projections(mh_layer* L) {
    mh_packed_matrix_free(&L->wq);
    mh_packed_matrix_free(&L->wk);
    mh_packed_matrix_free(&L->wv);
    mh_packed_matrix_free(&L->wo);
}

mh_attn_options mh_variant_options(const mh_layer* L, const mh_attn_options* call) {
    mh_attn_options o = call ? *call : mh_attn_options_default();
    o.window = L->cfg.window, o.softcap = L->cfg.softcap;
    o.alibi_slopes = L->alibi, o.sinks = L->sinks;
    o.compute = L->cfg.compute; /* resolved at create; a layer call's own is refused */
    return o;
}

void mh_variant_out_projection(const mh_layer* L, size_t rows, const float* o, float* out) {
    mh_gemm_packed(L->kernels, L->threads, rows, o, (size_t)L->wo.k_in, &L->wo, out,
                   (size_t)L->cfg.d_model);
}
