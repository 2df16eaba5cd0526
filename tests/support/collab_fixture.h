/* Random CollabHead layers for tests: owns the weights, creates the layer. */
#ifndef MH_TEST_COLLAB_FIXTURE_H
#define MH_TEST_COLLAB_FIXTURE_H
#include "multihead.h"
#include "rng.h"

typedef struct collab_fixture {
    mh_layer_config cfg; /* resolved (head_dim_v, kdim, vdim, scale) */
    mh_layer_weights w;
    float *wq, *wk, *wv, *wo, *bv, *bo, *mix, *content;
    mh_layer* layer;
} collab_fixture;

/* Random weights in [-amp, amp) for cfg (variant MH_VARIANT_COLLAB), then mh_layer_create.
 * Returns the create status; on success f->layer is set. */
mh_status collab_make(collab_fixture* f, const mh_context* ctx, const mh_layer_config* cfg,
                      test_rng* r, float amp);
void collab_free(collab_fixture* f);

#endif
