/* Random DCMHA layers for tests: the base projections of a layer_fixture (whose layer is the
 * MHA over the same weights) plus the dynamic-weight generator's weights. */
#ifndef MH_TEST_DCMHA_FIXTURE_H
#define MH_TEST_DCMHA_FIXTURE_H
#include "layer_fixture.h"

typedef struct dcmha_fixture {
    layer_fixture base;  /* base.layer: MHA with the same projections */
    mh_layer_config cfg; /* the DCMHA config, defaults resolved; variant_config points at dcfg */
    mh_dcmha_config dcfg;
    mh_layer_weights w;  /* base.w plus variant_weights = &dw */
    mh_dcmha_weights dw;
    float *w1, *w2, *wd; /* [d, G, 4, C], [G, 4, C, 2R, Hg], [d, G, 4, Hg] */
    float *wb_pre, *wb_post; /* [G, Hg, Hg] when dcfg.static_weights */
    size_t n_w1, n_w2, n_wd, n_wb;
    mh_layer* layer;     /* the DCMHA layer */
} dcmha_fixture;

/* cfg: a DCMHA config (variant set; variant_config NULL or a mh_dcmha_config). Base weights in [-amp, amp); generator and static
 * weights in [-dyn_amp, dyn_amp) (0 gives zeros). With dyadic, base weights are multiples of
 * 1/8 (so K/V of dyadic inputs are exact in f16/bf16). Returns the DCMHA create status. */
mh_status dcmha_fixture_make(dcmha_fixture* f, const mh_context* ctx, const mh_layer_config* cfg,
                             test_rng* r, float amp, float dyn_amp, int dyadic);
/* Re-creates f->layer from the current weight arrays (after a test edited them). */
mh_status dcmha_fixture_rebuild(dcmha_fixture* f, const mh_context* ctx);
void dcmha_fixture_free(dcmha_fixture* f);

#endif
