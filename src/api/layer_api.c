/* Public layer entry points: every check common to all variants happens here, before a
 * variant runs, so a failing call writes nothing. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api/compute.h"
#include "api/context.h"
#include "api/validate.h"
#include "core/kv_cache.h"
#include "util/alloc.h"
#include "util/checked.h"
#include "positions.h"
#include "shard.h"
#include "variant.h"

static int fits_int(size_t a, size_t b) {
    size_t p;
    return mh_mul_size(a, b, &p) && p <= INT_MAX;
}

static mh_status check_config(const mh_layer_config* c) {
    if (c->d_model <= 0 || c->n_heads <= 0 || c->head_dim <= 0 || c->n_kv_heads < 0 ||
        c->head_dim_v < 0 || c->kdim < 0 || c->vdim < 0 || c->window < 0)
        return MH_ERR_INVALID_ARGUMENT;
    if ((c->bias != 0 && c->bias != 1) || !isfinite(c->scale) || !(c->softcap >= 0.0f) ||
        isinf(c->softcap))
        return MH_ERR_INVALID_ARGUMENT;
    return MH_OK;
}

static mh_status check_weights(const mh_variant_ops* ops, const mh_layer_config* c,
                               const mh_layer_weights* w) {
    if (!w->w_q || !w->w_k || !w->w_v || !w->w_o) return MH_ERR_INVALID_ARGUMENT;
    const int qk = ops->caps & MH_CAP_QK_NO_BIAS ? !w->b_q && !w->b_k : w->b_q && w->b_k;
    const int all = qk && w->b_v && w->b_o;
    const int none = !w->b_q && !w->b_k && !w->b_v && !w->b_o;
    if (c->bias ? !all : !none) return MH_ERR_INVALID_ARGUMENT;
    if (mh_positions_check_weights(c, w) != MH_OK) return MH_ERR_INVALID_ARGUMENT;
    if (!fits_int((size_t)c->n_heads, (size_t)c->head_dim) ||
        !fits_int((size_t)c->n_heads, (size_t)c->head_dim_v))
        return MH_ERR_SIZE_OVERFLOW;
    return MH_OK;
}

/* Copies n floats into a new buffer (NULL src gives NULL and success). */
static int copy_floats(const float* src, int n, float** dst) {
    *dst = NULL;
    if (!src) return 1;
    *dst = mh_alloc((size_t)n * sizeof(float));
    if (!*dst) return 0;
    memcpy(*dst, src, (size_t)n * sizeof(float));
    return 1;
}

/* Frees what mh_layer_create allocated beside the variant's own state. */
static void free_layer(mh_layer* L) {
    mh_free(L->alibi);
    mh_free(L->sinks);
    mh_positions_free(L);
    free(L->vcfg);
    free(L);
}

/* A layer, or shard `index` of `count` of it (variants/shard.h): the full config is resolved
 * and checked with the full weights, then the variant creates the layer of the shard's heads. */
static mh_status create_layer(const mh_context* ctx, const mh_layer_config* config, const mh_layer_weights* weights,
                              int index, int count, mh_layer** out) {
    if (!mh_context_valid(ctx) || !config || !weights || !out) return MH_ERR_INVALID_ARGUMENT;
    const mh_variant_ops* ops = mh_variant_lookup(config->variant);
    if (!ops) return MH_ERR_INVALID_ARGUMENT;
    mh_layer_config c = *config;
    mh_status st = check_config(&c);
    if (st == MH_OK) st = mh_compute_pick(ctx->kernels->isa, ctx->compute, &c.compute);
    if (st != MH_OK) return st;
    mh_layer* L = calloc(1, sizeof *L);
    if (!L) return MH_ERR_OUT_OF_MEMORY;
    if (ops->config_size && !(L->vcfg = malloc(ops->config_size))) st = MH_ERR_OUT_OF_MEMORY;
    if (st == MH_OK) st = mh_variant_resolve(ops, &c, weights, L->vcfg);
    if (st == MH_OK) st = check_weights(ops, &c, weights);
    if (st == MH_OK) st = mh_shard_plan(&c, ops->caps, index, count, &L->shard);
    mh_layer_weights w;
    float* w_o = NULL;
    if (st == MH_OK) st = mh_shard_weights(&c, &L->shard, weights, &w, &w_o);
    if (st != MH_OK) {
        free_layer(L);
        return st;
    }
    L->full = c;
    L->full.alibi_slopes = NULL, L->full.sinks = NULL;
    L->cfg = mh_shard_config(&c, &L->shard), L->ops = ops, L->kernels = ctx->kernels, L->threads = ctx->num_threads;
    if (!copy_floats(L->cfg.alibi_slopes, L->cfg.n_heads, &L->alibi) ||
        !copy_floats(L->cfg.sinks, L->cfg.n_heads, &L->sinks)) {
        st = MH_ERR_OUT_OF_MEMORY;
    } else {
        L->cfg.alibi_slopes = L->alibi, L->cfg.sinks = L->sinks;
        st = mh_positions_create(L, &w);
        if (st == MH_OK) st = ops->create(L, &w);
    }
    mh_free(w_o);
    if (st != MH_OK) {
        free_layer(L);
        return st;
    }
    *out = L;
    return MH_OK;
}

mh_status mh_layer_create(const mh_context* ctx, const mh_layer_config* config,
                          const mh_layer_weights* weights, mh_layer** out) {
    return create_layer(ctx, config, weights, 0, 1, out);
}

mh_status mh_layer_create_shard(const mh_context* ctx, const mh_layer_config* config,
                                const mh_layer_weights* weights, int index, int count, mh_layer** out) {
    return create_layer(ctx, config, weights, index, count, out);
}

mh_status mh_layer_get_shard(const mh_layer* layer, mh_shard_info* out) {
    if (!layer || !out) return MH_ERR_INVALID_ARGUMENT;
    *out = layer->shard;
    return MH_OK;
}

void mh_layer_destroy(mh_layer* layer) {
    if (!layer) return;
    layer->ops->destroy(layer);
    free_layer(layer);
}

mh_status mh_layer_get_config(const mh_layer* layer, mh_layer_config* out) {
    if (!layer || !out) return MH_ERR_INVALID_ARGUMENT;
    *out = layer->full;
    out->alibi_slopes = NULL, out->sinks = NULL, out->variant_config = NULL;
    out->rotary.inv_freq = NULL;
    return MH_OK;
}

mh_status mh_layer_get_variant_config(const mh_layer* layer, void* out) {
    if (!layer || !out || !layer->vcfg || *(const mh_variant*)out != layer->cfg.variant)
        return MH_ERR_INVALID_ARGUMENT;
    memcpy(out, layer->vcfg, layer->ops->config_size);
    return MH_OK;
}

size_t mh_layer_weights_bytes(const mh_layer* layer) {
    if (!layer) return 0;
    size_t extra = (size_t)(!!layer->alibi + !!layer->sinks) * (size_t)layer->cfg.n_heads * sizeof(float);
    return layer->wq.bytes + layer->wk.bytes + layer->wv.bytes + layer->wo.bytes + extra +
           mh_positions_bytes(layer) + layer->ext_bytes;
}

/* Measured workspace of a forward or decode (n_kv < 0 selects decode). */
static mh_status measure(const mh_layer* L, int B, int N, int M, size_t* bytes) {
    mh_ws ws = mh_ws_begin(NULL);
    if (M < 0) L->ops->decode_carve(L, B, N, &ws);
    else L->ops->forward_carve(L, B, N, M, &ws);
    if (ws.overflow) return MH_ERR_SIZE_OVERFLOW;
    *bytes = ws.used;
    return MH_OK;
}

/* rows x width elements must be addressable. */
static int rows_fit(int a, int b, int width) {
    size_t n;
    return mh_mul3_size((size_t)a, (size_t)b, (size_t)width, &n) && mh_mul_size(n, sizeof(float), &n) &&
           n <= PTRDIFF_MAX;
}

static mh_status check_workspace(size_t need, const void* ws, size_t have) {
    if (!ws || ((uintptr_t)ws & (MH_WS_ALIGN - 1))) return MH_ERR_INVALID_ARGUMENT;
    return have < need ? MH_ERR_WORKSPACE_TOO_SMALL : MH_OK;
}

mh_status mh_layer_forward_workspace_size(const mh_layer* layer, int batch, int n_q, int n_kv,
                                          size_t* bytes) {
    if (!layer || !bytes || batch <= 0 || n_q <= 0 || n_kv <= 0) return MH_ERR_INVALID_ARGUMENT;
    return measure(layer, batch, n_q, n_kv, bytes);
}

static mh_status check_forward(const mh_layer* L, const mh_forward_args* a) {
    const mh_layer_config* c = &L->cfg;
    if (a->batch <= 0 || a->n_q <= 0 || !a->query || !a->out) return MH_ERR_INVALID_ARGUMENT;
    if (a->routing && !(L->ops->caps & MH_CAP_ROUTING)) return MH_ERR_INVALID_ARGUMENT;
    if (a->opt && a->opt->head_gates) return MH_ERR_UNSUPPORTED; /* mh_attention only */
    const int self = a->key == NULL;
    if (self != (a->value == NULL)) return MH_ERR_INVALID_ARGUMENT;
    if (self && (c->kdim != c->d_model || c->vdim != c->d_model)) return MH_ERR_INVALID_ARGUMENT;
    if (!self && a->n_kv <= 0) return MH_ERR_INVALID_ARGUMENT;
    const int M = self ? a->n_q : a->n_kv;
    if (a->opt) {
        const mh_attn_options* o = a->opt;
        if (o->window || o->softcap != 0.0f || o->alibi_slopes || o->sinks || o->lse ||
            o->kv_offset || o->compute != MH_COMPUTE_DEFAULT) /* the layer's own, or core only */
            return MH_ERR_INVALID_ARGUMENT;
        mh_status st = mh_validate_options(o, a->batch, a->n_q, M, c->n_heads);
        if (st != MH_OK) return st;
        if (o->probs && !mh_probs_fit(a->batch, c->n_heads, a->n_q, M)) return MH_ERR_SIZE_OVERFLOW;
    }
    if (L->ops->check_forward) {
        const mh_status st = L->ops->check_forward(L, a);
        if (st != MH_OK) return st;
    }
    if (!rows_fit(a->batch, a->n_q, c->d_model) || !rows_fit(a->batch, M, c->kdim) ||
        !rows_fit(a->batch, M, c->vdim))
        return MH_ERR_SIZE_OVERFLOW;
    return MH_OK;
}

mh_status mh_layer_forward(const mh_layer* layer, const mh_forward_args* args, void* workspace,
                           size_t workspace_bytes) {
    if (!layer || !args) return MH_ERR_INVALID_ARGUMENT;
    mh_status st = check_forward(layer, args);
    size_t need;
    if (st == MH_OK)
        st = measure(layer, args->batch, args->n_q, args->key ? args->n_kv : args->n_q, &need);
    if (st == MH_OK) st = check_workspace(need, workspace, workspace_bytes);
    if (st != MH_OK) return st;
    layer->ops->forward(layer, args, workspace);
    return MH_OK;
}

mh_status mh_layer_decode_workspace_size(const mh_layer* layer, int batch, int n_new,
                                         size_t* bytes) {
    if (!layer || !bytes || batch <= 0 || n_new <= 0) return MH_ERR_INVALID_ARGUMENT;
    return measure(layer, batch, n_new, -1, bytes);
}

mh_status mh_layer_decode(const mh_layer* layer, mh_kv_cache* cache, const mh_decode_args* args,
                          void* workspace, size_t workspace_bytes) {
    if (!layer || !mh_kv_cache_valid(cache) || !args || !args->x || !args->out || args->batch <= 0 || args->n_new <= 0)
        return MH_ERR_INVALID_ARGUMENT;
    if (args->routing && !(layer->ops->caps & MH_CAP_ROUTING)) return MH_ERR_INVALID_ARGUMENT;
    const mh_layer_config* c = &layer->cfg;
    if (c->kdim != c->d_model || c->vdim != c->d_model) return MH_ERR_UNSUPPORTED;
    mh_cache_layout want;
    layer->ops->cache_layout(layer, &want);
    const mh_kv_seqs seqs = mh_variant_decode_seqs(args);
    mh_status st = mh_kv_cache_check(cache, &want, &seqs);
    if (st != MH_OK) return st;
    if (!(layer->ops->caps & MH_CAP_SEQS) && !mh_kv_cache_uniform(cache, &seqs)) return MH_ERR_UNSUPPORTED;
    if (!rows_fit(args->batch, args->n_new, c->d_model)) return MH_ERR_SIZE_OVERFLOW;
    size_t need;
    st = measure(layer, args->batch, args->n_new, -1, &need);
    if (st == MH_OK) st = check_workspace(need, workspace, workspace_bytes);
    if (st != MH_OK) return st;
    mh_kv_cache_reserve(cache, &seqs); /* the blocks the new tokens go to (cannot fail now) */
    layer->ops->decode(layer, cache, args, workspace);
    mh_kv_cache_advance(cache, &seqs); /* the only place a sequence's length grows */
    return MH_OK;
}

/* The config's rules, n_blocks resolved. A paged cache needs a variant that reads block
 * tables (MH_CAP_SEQS) and key tiles that never straddle two blocks: block_size a multiple of
 * the driver's key tile, and no sliding window (its tiles start at the window's first key,
 * anywhere in a block). */
static mh_status check_cache_config(const mh_layer* layer, mh_kv_cache_config* c) {
    const mh_dtype dt = c->dtype;
    if (c->max_seqs <= 0 || c->capacity <= 0 || c->block_size < 0 || c->n_blocks < 0 ||
        (c->block_size == 0 && c->n_blocks != 0))
        return MH_ERR_INVALID_ARGUMENT;
    if (dt != MH_DTYPE_F32 && dt != MH_DTYPE_F16 && dt != MH_DTYPE_BF16 && dt != MH_DTYPE_I8)
        return MH_ERR_INVALID_ARGUMENT;
    if (dt == MH_DTYPE_I8 && !(layer->ops->caps & MH_CAP_I8_CACHE)) return MH_ERR_UNSUPPORTED;
    const mh_layer_config* cfg = &layer->cfg;
    if (cfg->kdim != cfg->d_model || cfg->vdim != cfg->d_model) return MH_ERR_UNSUPPORTED;
    if (c->block_size == 0) return MH_OK;
    if (!(layer->ops->caps & MH_CAP_SEQS) || cfg->window > 0) return MH_ERR_UNSUPPORTED;
    if ((size_t)c->block_size % layer->kernels->attn_kv_tile != 0) return MH_ERR_INVALID_ARGUMENT;
    if (c->n_blocks == 0) {
        const int64_t n = (int64_t)c->max_seqs * (((int64_t)c->capacity + c->block_size - 1) / c->block_size);
        if (n > INT_MAX) return MH_ERR_SIZE_OVERFLOW;
        c->n_blocks = (int)n;
    }
    return MH_OK;
}

/* The layer's cache layout decides the streams; a cross-attention layer has nothing to cache. */
mh_status mh_kv_cache_create_ex(const mh_layer* layer, const mh_kv_cache_config* config, mh_kv_cache** out) {
    if (!layer || !config || !out) return MH_ERR_INVALID_ARGUMENT;
    mh_kv_cache_config c = *config;
    const mh_status st = check_cache_config(layer, &c);
    if (st != MH_OK) return st;
    mh_cache_layout layout;
    layer->ops->cache_layout(layer, &layout);
    return mh_kv_cache_alloc(&layout, &c, out);
}

mh_status mh_kv_cache_create(const mh_layer* layer, int batch, int capacity, mh_dtype dtype,
                             mh_kv_cache** out) {
    mh_kv_cache_config c = mh_kv_cache_config_default();
    c.max_seqs = batch, c.capacity = capacity, c.dtype = dtype;
    return mh_kv_cache_create_ex(layer, &c, out);
}
