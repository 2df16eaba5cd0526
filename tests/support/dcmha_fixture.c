#include "dcmha_fixture.h"

#include <stdlib.h>
#include <string.h>

static float* filled(test_rng* r, size_t n, float amp) {
    float* m = calloc(n ? n : 1, sizeof(float));
    if (amp > 0.0f) rng_fill(r, m, n, -amp, amp);
    return m;
}

static void make_dyadic(test_rng* r, float* x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = 0.125f * (float)rng_int(r, -4, 4);
}

mh_status dcmha_fixture_rebuild(dcmha_fixture* f, const mh_context* ctx) {
    mh_layer_destroy(f->layer);
    f->layer = NULL;
    f->dw = mh_dcmha_weights_default();
    f->dw.w1 = f->w1, f->dw.w2 = f->w2, f->dw.wd = f->wd;
    f->dw.wb_pre = f->wb_pre, f->dw.wb_post = f->wb_post;
    f->w = f->base.w;
    f->w.variant_weights = &f->dw;
    return mh_layer_create(ctx, &f->cfg, &f->w, &f->layer);
}

mh_status dcmha_fixture_make(dcmha_fixture* f, const mh_context* ctx, const mh_layer_config* cfg,
                             test_rng* r, float amp, float dyn_amp, int dyadic) {
    memset(f, 0, sizeof *f);
    mh_layer_config mha = *cfg;
    mha.variant = MH_VARIANT_MHA;
    mha.variant_config = NULL;
    mh_status st = fixture_make(&f->base, ctx, &mha, r, amp);
    if (st != MH_OK) return st;
    if (dyadic) {
        const layer_fixture* b = &f->base;
        const size_t hd = (size_t)b->cfg.n_heads * (size_t)b->cfg.head_dim, dm = (size_t)b->cfg.d_model;
        make_dyadic(r, b->wq, hd * dm), make_dyadic(r, b->wk, hd * dm), make_dyadic(r, b->wv, hd * dm);
        if (b->bq) make_dyadic(r, b->bq, hd), make_dyadic(r, b->bk, hd), make_dyadic(r, b->bv, hd);
        mh_layer_destroy(f->base.layer);
        f->base.layer = NULL;
        st = fixture_recreate(&f->base, ctx, &mha, &f->base.layer);
        if (st != MH_OK) return st;
    }
    f->cfg = *cfg;
    f->cfg.n_kv_heads = f->base.cfg.n_kv_heads, f->cfg.head_dim_v = f->base.cfg.head_dim_v;
    f->cfg.kdim = f->base.cfg.kdim, f->cfg.vdim = f->base.cfg.vdim;
    f->dcfg = cfg->variant_config ? *(const mh_dcmha_config*)cfg->variant_config
                                  : mh_dcmha_config_default();
    f->cfg.variant_config = &f->dcfg;
    mh_dcmha_config* d = &f->dcfg;
    if (d->rank == 0) d->rank = 2;
    if (d->groups == 0) d->groups = 1;
    if (d->hidden == 0) d->hidden = 4 * (cfg->n_heads / d->groups);
    const size_t dm = (size_t)cfg->d_model, G = (size_t)d->groups, C = (size_t)d->hidden;
    const size_t hg = (size_t)(cfg->n_heads / d->groups), R = (size_t)d->rank;
    f->n_w1 = dm * G * 4 * C, f->n_w2 = G * 4 * C * 2 * R * hg, f->n_wd = dm * G * 4 * hg, f->n_wb = G * hg * hg;
    f->w1 = filled(r, f->n_w1, dyn_amp);
    f->w2 = filled(r, f->n_w2, dyn_amp);
    f->wd = filled(r, f->n_wd, dyn_amp);
    if (d->static_weights) f->wb_pre = filled(r, f->n_wb, dyn_amp), f->wb_post = filled(r, f->n_wb, dyn_amp);
    return dcmha_fixture_rebuild(f, ctx);
}

void dcmha_fixture_free(dcmha_fixture* f) {
    mh_layer_destroy(f->layer);
    free(f->w1), free(f->w2), free(f->wd), free(f->wb_pre), free(f->wb_post);
    fixture_free(&f->base);
    memset(f, 0, sizeof *f);
}
