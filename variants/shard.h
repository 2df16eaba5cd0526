/*
 * Head-sharded layers (mh_layer_create_shard, docs/scale-out.md): which heads a shard holds
 * and its slice of the full layer's weights. A shard is a layer of the same variant over its
 * heads (config n_heads = H / count, n_kv_heads its K/V heads); the variant runs it as any
 * layer, except that MoH routes with the full config (mh_layer.full).
 */
#ifndef MH_VARIANTS_SHARD_H
#define MH_VARIANTS_SHARD_H
#include "variant.h"

/* The heads of shard `index` of `count` of the resolved full config c of a variant with
 * `caps`: MH_ERR_UNSUPPORTED without MH_CAP_SHARD, MH_ERR_INVALID_ARGUMENT when count < 1,
 * index is outside 0 .. count - 1, or H (or Hkv > 1) is not a multiple of count. Hkv = 1
 * (MQA) is replicated on every shard. */
mh_status mh_shard_plan(const mh_layer_config* c, unsigned caps, int index, int count, mh_shard_info* out);

/* The shard's config: c with the shard's head counts and its ALiBi slopes and sinks. */
mh_layer_config mh_shard_config(const mh_layer_config* c, const mh_shard_info* s);

/* The shard's weights out of the full ones w: its rows of W_Q, W_K, W_V and their biases (in
 * place), its columns of W_O copied into *w_o [d_model, n_heads * Dv] (allocated here, freed
 * by the caller with mh_free; NULL when count is 1), b_o on shard 0 only; the variant's
 * weights and QK-norm weights unchanged. MH_ERR_OUT_OF_MEMORY or MH_ERR_SIZE_OVERFLOW. */
mh_status mh_shard_weights(const mh_layer_config* c, const mh_shard_info* s, const mh_layer_weights* w,
                           mh_layer_weights* out, float** w_o);

#endif
