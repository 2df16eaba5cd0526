#include "layer_fixture.h"

#include <stdlib.h>
#include <string.h>

static float* random_matrix(test_rng* r, int rows, int cols, float amp) {
    size_t n = (size_t)rows * (size_t)cols;
    float* m = malloc(n * sizeof(float));
    rng_fill(r, m, n, -amp, amp);
    return m;
}

mh_status fixture_make(layer_fixture* f, const mh_context* ctx, const mh_layer_config* cfg,
                       test_rng* r, float amp) {
    memset(f, 0, sizeof *f);
    mh_layer_config c = *cfg;
    if (c.n_kv_heads == 0) c.n_kv_heads = c.variant == MH_VARIANT_MQA ? 1 : c.n_heads;
    if (c.head_dim_v == 0) c.head_dim_v = c.head_dim;
    if (c.kdim == 0) c.kdim = c.d_model;
    if (c.vdim == 0) c.vdim = c.d_model;
    f->cfg = c;
    const int hd = c.n_heads * c.head_dim, kvd = c.n_kv_heads * c.head_dim;
    const int kvdv = c.n_kv_heads * c.head_dim_v, hdv = c.n_heads * c.head_dim_v;
    f->wq = random_matrix(r, hd, c.d_model, amp);
    f->wk = random_matrix(r, kvd, c.kdim, amp);
    f->wv = random_matrix(r, kvdv, c.vdim, amp);
    /* W' of overlapping heads takes H enlarged heads of D + 2o (overlap is 0 elsewhere) */
    f->wo = random_matrix(r, c.d_model, hdv + 2 * c.n_heads * c.overlap, amp);
    if (c.bias) {
        f->bq = random_matrix(r, 1, hd, amp);
        f->bk = random_matrix(r, 1, kvd, amp);
        f->bv = random_matrix(r, 1, kvdv, amp);
        f->bo = random_matrix(r, 1, c.d_model, amp);
    }
    mh_layer_weights w = {.w_q = f->wq, .w_k = f->wk, .w_v = f->wv, .w_o = f->wo, .b_q = f->bq,
                          .b_k = f->bk, .b_v = f->bv, .b_o = f->bo};
    f->w = w;
    return mh_layer_create(ctx, cfg, &f->w, &f->layer);
}

mh_status fixture_recreate(const layer_fixture* f, const mh_context* ctx,
                           const mh_layer_config* cfg, mh_layer** out) {
    return mh_layer_create(ctx, cfg, &f->w, out);
}

void fixture_free(layer_fixture* f) {
    mh_layer_destroy(f->layer);
    free(f->wq), free(f->wk), free(f->wv), free(f->wo);
    free(f->bq), free(f->bk), free(f->bv), free(f->bo);
    memset(f, 0, sizeof *f);
}

static void* workspace(size_t bytes) { return aligned_alloc(64, (bytes + 63) / 64 * 64 + 64); }

mh_status run_forward(const mh_layer* layer, const mh_forward_args* a) {
    size_t bytes;
    mh_status st = mh_layer_forward_workspace_size(layer, a->batch, a->n_q,
                                                   a->key ? a->n_kv : a->n_q, &bytes);
    if (st != MH_OK) return st;
    void* ws = workspace(bytes);
    st = mh_layer_forward(layer, a, ws, bytes);
    free(ws);
    return st;
}

mh_status run_decode(const mh_layer* layer, mh_kv_cache* cache, int batch, int n_new,
                     const float* x, float* out) {
    size_t bytes;
    mh_status st = mh_layer_decode_workspace_size(layer, batch, n_new, &bytes);
    if (st != MH_OK) return st;
    void* ws = workspace(bytes);
    st = mh_layer_decode(layer, cache, batch, n_new, x, out, ws, bytes);
    free(ws);
    return st;
}
