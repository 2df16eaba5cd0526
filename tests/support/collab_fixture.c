#include "collab_fixture.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static float* random_floats(test_rng* r, size_t n, float amp) {
    float* m = malloc(n * sizeof(float));
    rng_fill(r, m, n, -amp, amp);
    return m;
}

mh_status collab_make(collab_fixture* f, const mh_context* ctx, const mh_layer_config* cfg,
                      test_rng* r, float amp) {
    memset(f, 0, sizeof *f);
    mh_layer_config c = *cfg;
    if (c.head_dim_v == 0) c.head_dim_v = c.head_dim;
    if (c.kdim == 0) c.kdim = c.d_model;
    if (c.vdim == 0) c.vdim = c.d_model;
    if (c.scale == 0.0f) c.scale = 1.0f / sqrtf((float)c.head_dim);
    f->cfg = c;
    const size_t H = (size_t)c.n_heads, Dt = (size_t)c.collab_dim, hdv = H * (size_t)c.head_dim_v;
    f->wq = random_floats(r, Dt * (size_t)c.d_model, amp);
    f->wk = random_floats(r, Dt * (size_t)c.kdim, amp);
    f->wv = random_floats(r, hdv * (size_t)c.vdim, amp);
    f->wo = random_floats(r, (size_t)c.d_model * hdv, amp);
    f->mix = random_floats(r, H * Dt, 1.0f);
    f->content = random_floats(r, H * (size_t)c.kdim, amp);
    if (c.bias) {
        f->bv = random_floats(r, hdv, amp);
        f->bo = random_floats(r, (size_t)c.d_model, amp);
    }
    mh_layer_weights w = {.w_q = f->wq, .w_k = f->wk, .w_v = f->wv, .w_o = f->wo, .b_v = f->bv,
                          .b_o = f->bo, .collab_mix = f->mix, .collab_content = f->content};
    f->w = w;
    return mh_layer_create(ctx, cfg, &f->w, &f->layer);
}

void collab_free(collab_fixture* f) {
    mh_layer_destroy(f->layer);
    free(f->wq), free(f->wk), free(f->wv), free(f->wo), free(f->bv), free(f->bo);
    free(f->mix), free(f->content);
    memset(f, 0, sizeof *f);
}
