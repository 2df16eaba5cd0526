/*
 * The internal interface a variant implements, and the layer object they share.
 *
 * The public entry points (src/api/layer_api.c) check everything that is common to all
 * variants (pointers, sizes, workspace size, cache compatibility) before calling a variant, so
 * a variant's forward/decode may trust their arguments and must not fail.
 */
#ifndef MH_VARIANT_H
#define MH_VARIANT_H
#include "api/kv_cache.h"
#include "core/gemm.h"
#include "kernels/kernels.h"
#include "util/workspace.h"

struct mh_layer {
    mh_layer_config cfg; /* resolved: every 0-means-default field filled in; alibi_slopes and
                            sinks point at the layer's own copies below */
    const struct mh_variant_ops* ops;
    const mh_kernels* kernels;
    int threads;
    mh_packed_matrix wq; /* [H*D,    d_model] packed */
    mh_packed_matrix wk; /* [Hkv*D,  kdim]    packed */
    mh_packed_matrix wv; /* [Hkv*Dv, vdim]    packed */
    mh_packed_matrix wo; /* [d_model, H*Dv]   packed */
    float* alibi;        /* [H] or NULL */
    float* sinks;        /* [H] or NULL */
    void* ext;           /* the variant's own state (router, mixing, ...), or NULL */
    size_t ext_bytes;    /* bytes of weights held in ext, for mh_layer_weights_bytes */
};

typedef struct mh_variant_ops {
    const char* name;
    /* Fills the variant's defaults into cfg and checks its rules. */
    mh_status (*resolve_config)(mh_layer_config* cfg);
    /* Packs the weights into `layer` (cfg, kernels and threads are already set). On error it
     * leaves nothing allocated. */
    mh_status (*create)(mh_layer* layer, const mh_layer_weights* w);
    void (*destroy)(mh_layer* layer);
    /* What the layer's KV cache holds per token (api/kv_cache.h). */
    void (*cache_layout)(const mh_layer* layer, mh_cache_layout* out);
    /* Carve (or measure, with ws->base == NULL) the forward / decode workspace. */
    void (*forward_carve)(const mh_layer* layer, int batch, int n_q, int n_kv, mh_ws* ws);
    void (*decode_carve)(const mh_layer* layer, int batch, int n_new, mh_ws* ws);
    /* Run on validated arguments with a workspace of the carved size. */
    void (*forward)(const mh_layer* layer, const mh_forward_args* args, void* workspace);
    void (*decode)(const mh_layer* layer, struct mh_kv_cache* cache, int batch, int n_new,
                   const float* x, float* out, void* workspace);
} mh_variant_ops;

/* Helpers every variant shares (variants/variant_common.c). */
/* Frees wq, wk, wv and wo (a zeroed matrix is fine). */
void mh_variant_free_projections(mh_layer* L);
/* The layer's model-level options (window, soft-cap, ALiBi, sinks) over a call's per-call
 * ones (call may be NULL: the defaults). */
mh_attn_options mh_variant_options(const mh_layer* L, const mh_attn_options* call);
/* out [rows, d_model] = o [rows, wo.k_in] Wo^T + bo: the output projection. */
void mh_variant_out_projection(const mh_layer* L, size_t rows, const float* o, float* out);

/* The module serving `v`, or NULL for an unknown variant (variants/registry.c). */
const mh_variant_ops* mh_variant_lookup(mh_variant v);

#endif
