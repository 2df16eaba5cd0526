/* Random layers for tests: owns PyTorch-layout weights, creates the layer, runs calls with
 * fresh aligned workspaces. */
#ifndef MH_TEST_LAYER_FIXTURE_H
#define MH_TEST_LAYER_FIXTURE_H
#include "multihead.h"
#include "rng.h"

typedef struct layer_fixture {
    mh_layer_config cfg; /* resolved (as mh_layer_get_config returns it) */
    mh_layer_weights w;
    float *wq, *wk, *wv, *wo, *bq, *bk, *bv, *bo;
    mh_layer* layer;
} layer_fixture;

/* Random weights in [-amp, amp) for cfg (defaults resolved here), then mh_layer_create.
 * Returns the create status; on success f->layer is set. */
mh_status fixture_make(layer_fixture* f, const mh_context* ctx, const mh_layer_config* cfg,
                       test_rng* r, float amp);
/* Creates another layer from the same weights (e.g. with another context or variant). */
mh_status fixture_recreate(const layer_fixture* f, const mh_context* ctx,
                           const mh_layer_config* cfg, mh_layer** out);
void fixture_free(layer_fixture* f);

mh_status run_forward(const mh_layer* layer, const mh_forward_args* args);
mh_status run_decode(const mh_layer* layer, mh_kv_cache* cache, int batch, int n_new,
                     const float* x, float* out);

#endif
