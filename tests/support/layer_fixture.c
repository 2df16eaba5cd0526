#include "layer_fixture.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "oracle.h"

static float* random_matrix(test_rng* r, int rows, int cols, float amp) {
    size_t n = (size_t)rows * (size_t)cols;
    float* m = malloc(n * sizeof(float));
    rng_fill(r, m, n, -amp, amp);
    return m;
}

void copy_variant_config(mh_layer_config* cfg, variant_config_copy* store) {
    if (!cfg->variant_config) return;
    switch (cfg->variant) {
    case MH_VARIANT_MOH: store->moh = *(const mh_moh_config*)cfg->variant_config; break;
    case MH_VARIANT_OVERLAP: store->overlap = *(const mh_overlap_config*)cfg->variant_config; break;
    case MH_VARIANT_COLLAB: store->collab = *(const mh_collab_config*)cfg->variant_config; break;
    case MH_VARIANT_DCMHA: store->dcmha = *(const mh_dcmha_config*)cfg->variant_config; break;
    default: return; /* no variant config: left for mh_layer_create to refuse */
    }
    cfg->variant_config = store;
}

int config_overlap(const mh_layer_config* cfg) {
    if (cfg->variant != MH_VARIANT_OVERLAP || !cfg->variant_config) return 0;
    return ((const mh_overlap_config*)cfg->variant_config)->overlap;
}

/* CollabHead: a shared query/key of width D~, mixing and content, no b_Q/b_K. */
static void collab_weights(layer_fixture* f, test_rng* r, float amp) {
    const mh_layer_config* c = &f->cfg;
    const int H = c->n_heads, Dt = f->vcfg.collab.collab_dim, hdv = H * c->head_dim_v;
    f->wq = random_matrix(r, Dt, c->d_model, amp), f->n_wq = (size_t)Dt * c->d_model;
    f->wk = random_matrix(r, Dt, c->kdim, amp), f->n_wk = (size_t)Dt * c->kdim;
    f->wv = random_matrix(r, hdv, c->vdim, amp), f->n_wv = (size_t)hdv * c->vdim;
    f->wo = random_matrix(r, c->d_model, hdv, amp), f->n_wo = (size_t)c->d_model * hdv;
    f->mix = random_matrix(r, H, Dt, 1.0f);
    f->content = random_matrix(r, H, c->kdim, amp), f->n_content = (size_t)H * c->kdim;
    if (c->bias) {
        f->bv = random_matrix(r, 1, hdv, amp);
        f->bo = random_matrix(r, 1, c->d_model, amp);
    }
}

static void projection_weights(layer_fixture* f, test_rng* r, float amp) {
    const mh_layer_config* c = &f->cfg;
    const int hd = c->n_heads * c->head_dim, kvd = c->n_kv_heads * c->head_dim;
    const int kvdv = c->n_kv_heads * c->head_dim_v, hdv = c->n_heads * c->head_dim_v;
    f->wq = random_matrix(r, hd, c->d_model, amp), f->n_wq = (size_t)hd * c->d_model;
    f->wk = random_matrix(r, kvd, c->kdim, amp), f->n_wk = (size_t)kvd * c->kdim;
    f->wv = random_matrix(r, kvdv, c->vdim, amp), f->n_wv = (size_t)kvdv * c->vdim;
    /* W' of overlapping heads takes H enlarged heads of D + 2o (overlap is 0 elsewhere) */
    const int wide = hdv + 2 * c->n_heads * config_overlap(c);
    f->wo = random_matrix(r, c->d_model, wide, amp), f->n_wo = (size_t)c->d_model * wide;
    if (c->bias) {
        f->bq = random_matrix(r, 1, hd, amp);
        f->bk = random_matrix(r, 1, kvd, amp);
        f->bv = random_matrix(r, 1, kvdv, amp);
        f->bo = random_matrix(r, 1, c->d_model, amp);
    }
}

mh_status fixture_make(layer_fixture* f, const mh_context* ctx, const mh_layer_config* cfg,
                       test_rng* r, float amp) {
    memset(f, 0, sizeof *f);
    mh_layer_config c = *cfg;
    const int collab = c.variant == MH_VARIANT_COLLAB;
    if (c.n_kv_heads == 0 && !collab) c.n_kv_heads = c.variant == MH_VARIANT_MQA ? 1 : c.n_heads;
    if (c.head_dim_v == 0) c.head_dim_v = c.head_dim;
    if (c.kdim == 0) c.kdim = c.d_model;
    if (c.vdim == 0) c.vdim = c.d_model;
    if (collab && c.scale == 0.0f) c.scale = 1.0f / sqrtf((float)c.head_dim);
    f->cfg = c;
    copy_variant_config(&f->cfg, &f->vcfg);
    if (collab)
        collab_weights(f, r, amp);
    else
        projection_weights(f, r, amp);
    mh_layer_weights w = {.w_q = f->wq, .w_k = f->wk, .w_v = f->wv, .w_o = f->wo, .b_q = f->bq,
                          .b_k = f->bk, .b_v = f->bv, .b_o = f->bo};
    f->w = w;
    if (c.qk_norm) {
        f->qn = random_matrix(r, 1, c.head_dim, 0.5f), f->kn = random_matrix(r, 1, c.head_dim, 0.5f);
        for (int i = 0; i < c.head_dim; i++) f->qn[i] += 1.0f, f->kn[i] += 1.0f;
        f->w.q_norm = f->qn, f->w.k_norm = f->kn;
    }
    if (collab) {
        f->collab_w = mh_collab_weights_default();
        f->collab_w.mix = f->mix, f->collab_w.content = f->content;
        f->w.variant_weights = &f->collab_w;
    }
    return mh_layer_create(ctx, cfg, &f->w, &f->layer);
}

mh_status fixture_recreate(const layer_fixture* f, const mh_context* ctx,
                           const mh_layer_config* cfg, mh_layer** out) {
    return mh_layer_create(ctx, cfg, &f->w, out);
}

void fixture_free(layer_fixture* f) {
    mh_layer_destroy(f->layer);
    free(f->wq), free(f->wk), free(f->wv), free(f->wo);
    free(f->bq), free(f->bk), free(f->bv), free(f->bo), free(f->mix), free(f->content);
    free(f->qn), free(f->kn);
    memset(f, 0, sizeof *f);
}

void fixture_round_bf16(layer_fixture* f) {
    oracle_round_bf16_all(f->wq, f->n_wq);
    oracle_round_bf16_all(f->wk, f->n_wk);
    oracle_round_bf16_all(f->wv, f->n_wv);
    oracle_round_bf16_all(f->wo, f->n_wo);
    if (f->content) oracle_round_bf16_all(f->content, f->n_content);
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
    st = mh_layer_decode(layer, cache, &(mh_decode_args){.batch = batch, .n_new = n_new, .x = x, .out = out}, ws, bytes);
    free(ws);
    return st;
}

void decode_in_chunks(const mh_layer* layer, mh_kv_cache* cache, int batch, int T, int d_model,
                      const float* x, float* y, const int* chunks) {
    const size_t d = (size_t)d_model;
    float* xc = malloc(sizeof(float) * (size_t)batch * (size_t)T * d);
    float* yc = malloc(sizeof(float) * (size_t)batch * (size_t)T * d);
    for (int c = 0, t = 0; t < T; c++) {
        const int want = chunks ? chunks[c] : 1, n = want < T - t ? want : T - t;
        for (int b = 0; b < batch; b++)
            memcpy(xc + (size_t)b * n * d, x + ((size_t)b * T + t) * d, sizeof(float) * n * d);
        check_status("decode step", run_decode(layer, cache, batch, n, xc, yc), MH_OK);
        for (int b = 0; b < batch; b++)
            memcpy(y + ((size_t)b * T + t) * d, yc + (size_t)b * n * d, sizeof(float) * n * d);
        t += n;
    }
    check_true("cache length after decoding", mh_kv_cache_length(cache) == T);
    free(xc), free(yc);
}

void fill_dyadic(test_rng* r, float* v, size_t n, float step, int range) {
    for (size_t i = 0; i < n; i++) v[i] = step * (float)rng_int(r, -range, range);
}
