/* Random layers for tests: owns PyTorch-layout weights, creates the layer, runs calls with
 * fresh aligned workspaces. Builds the weights of every variant it is given (for CollabHead:
 * W_Q [D~, d_model], W_K [D~, kdim], mixing and content, no b_Q/b_K). */
#ifndef MH_TEST_LAYER_FIXTURE_H
#define MH_TEST_LAYER_FIXTURE_H
#include "multihead.h"
#include "rng.h"

/* Storage for any variant's config struct (the tag first in each). */
typedef union variant_config_copy {
    mh_variant tag;
    mh_moh_config moh;
    mh_overlap_config overlap;
    mh_collab_config collab;
    mh_dcmha_config dcmha;
} variant_config_copy;

/* Copies cfg->variant_config (if any) into *store and points cfg->variant_config there. */
void copy_variant_config(mh_layer_config* cfg, variant_config_copy* store);

/* o of an overlapping-heads config; 0 for any other variant. */
int config_overlap(const mh_layer_config* cfg);

typedef struct layer_fixture {
    mh_layer_config cfg; /* resolved (as mh_layer_get_config returns it); variant_config
                            points at vcfg */
    variant_config_copy vcfg;
    mh_layer_weights w;  /* CollabHead: variant_weights points at collab_w */
    mh_collab_weights collab_w;
    float *wq, *wk, *wv, *wo, *bq, *bk, *bv, *bo;
    float *mix, *content; /* CollabHead: [H, D~], [H, kdim] */
    size_t n_wq, n_wk, n_wv, n_wo, n_content; /* elements of wq ... content */
    float *qn, *kn;       /* [D] QK-norm weights in [0.5, 1.5) when cfg.qk_norm */
    mh_layer* layer;
} layer_fixture;

/* Random weights in [-amp, amp) (mixing rows in [-1, 1)) for cfg (defaults resolved here;
 * for CollabHead the scale too), then mh_layer_create.
 * Returns the create status; on success f->layer is set. */
mh_status fixture_make(layer_fixture* f, const mh_context* ctx, const mh_layer_config* cfg,
                       test_rng* r, float amp);
/* Creates another layer from the same weights (e.g. with another context or variant). */
mh_status fixture_recreate(const layer_fixture* f, const mh_context* ctx,
                           const mh_layer_config* cfg, mh_layer** out);
void fixture_free(layer_fixture* f);
/* Rounds the weights the layer's GEMMs read (W_Q, W_K, W_V, W_O, CollabHead's content) to
 * bf16 in place; biases, mixing and QK-norm weights stay f32. Layers made before keep theirs. */
void fixture_round_bf16(layer_fixture* f);

mh_status run_forward(const mh_layer* layer, const mh_forward_args* args);
mh_status run_decode(const mh_layer* layer, mh_kv_cache* cache, int batch, int n_new,
                     const float* x, float* out);

/* Decodes x [batch, T, d_model] into y (same shape) in steps of chunks[0], chunks[1], ...
 * tokens (the last one cut at T; chunks NULL: one token at a time), checking every step's
 * status and the cache length at the end. */
void decode_in_chunks(const mh_layer* layer, mh_kv_cache* cache, int batch, int T, int d_model,
                      const float* x, float* y, const int* chunks);

/* v[i] = step * k, k uniform in [-range, range]: values exact in f16/bf16 for small ranges. */
void fill_dyadic(test_rng* r, float* v, size_t n, float step, int range);

#endif
