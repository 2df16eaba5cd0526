#include "shard.h"

#include <string.h>

#include "util/alloc.h"
#include "util/checked.h"

mh_status mh_shard_plan(const mh_layer_config* c, unsigned caps, int index, int count, mh_shard_info* out) {
    if (count < 1 || index < 0 || index >= count) return MH_ERR_INVALID_ARGUMENT;
    if (count > 1 && !(caps & MH_CAP_SHARD)) return MH_ERR_UNSUPPORTED;
    const int kv_shared = c->n_kv_heads == 1; /* MQA: every shard reads the one K/V head */
    if (c->n_heads % count != 0 || (!kv_shared && c->n_kv_heads % count != 0)) return MH_ERR_INVALID_ARGUMENT;
    const int h = c->n_heads / count, kv = kv_shared ? 1 : c->n_kv_heads / count;
    *out = (mh_shard_info){.index = index, .count = count, .head_begin = index * h, .n_heads = h,
                           .kv_head_begin = kv_shared ? 0 : index * kv, .n_kv_heads = kv};
    return MH_OK;
}

mh_layer_config mh_shard_config(const mh_layer_config* c, const mh_shard_info* s) {
    mh_layer_config l = *c;
    l.n_heads = s->n_heads, l.n_kv_heads = s->n_kv_heads;
    l.alibi_slopes = c->alibi_slopes ? c->alibi_slopes + s->head_begin : NULL;
    l.sinks = c->sinks ? c->sinks + s->head_begin : NULL;
    return l;
}

/* The rows of head `first` on of a [heads * dim, ...] matrix (or a [heads * dim] bias). */
static const float* rows_from(const float* x, int first, int dim, int width) {
    return x ? x + (size_t)first * (size_t)dim * (size_t)width : NULL;
}

mh_status mh_shard_weights(const mh_layer_config* c, const mh_shard_info* s, const mh_layer_weights* w,
                           mh_layer_weights* out, float** w_o) {
    *out = *w;
    *w_o = NULL;
    if (s->count == 1) return MH_OK;
    const int D = c->head_dim, Dv = c->head_dim_v;
    out->w_q = rows_from(w->w_q, s->head_begin, D, c->d_model);
    out->w_k = rows_from(w->w_k, s->kv_head_begin, D, c->kdim);
    out->w_v = rows_from(w->w_v, s->kv_head_begin, Dv, c->vdim);
    out->b_q = rows_from(w->b_q, s->head_begin, D, 1);
    out->b_k = rows_from(w->b_k, s->kv_head_begin, D, 1);
    out->b_v = rows_from(w->b_v, s->kv_head_begin, Dv, 1);
    out->b_o = s->index == 0 ? w->b_o : NULL;
    /* W_O [d_model, H * Dv]: the columns of the shard's heads, [d_model, n_heads * Dv] */
    const size_t d = (size_t)c->d_model, full = (size_t)c->n_heads * (size_t)Dv;
    const size_t cols = (size_t)s->n_heads * (size_t)Dv;
    size_t bytes;
    if (!mh_mul3_size(d, cols, sizeof(float), &bytes)) return MH_ERR_SIZE_OVERFLOW;
    float* o = mh_alloc(bytes);
    if (!o) return MH_ERR_OUT_OF_MEMORY;
    for (size_t r = 0; r < d; r++)
        memcpy(o + r * cols, w->w_o + r * full + (size_t)s->head_begin * (size_t)Dv, cols * sizeof(float));
    out->w_o = o;
    *w_o = o;
    return MH_OK;
}
