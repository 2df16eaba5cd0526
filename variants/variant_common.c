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
    return o;
}

void mh_variant_out_projection(const mh_layer* L, size_t rows, const float* o, float* out) {
    mh_gemm_packed(L->kernels, L->threads, rows, o, (size_t)L->wo.k_in, &L->wo, out,
                   (size_t)L->cfg.d_model);
}
