/* Steps every layer variant shares around its attention core. */
#ifndef MH_VARIANTS_LAYER_COMMON_H
#define MH_VARIANTS_LAYER_COMMON_H
#include "variant.h"

/* The layer's model-level options (window, softcap, ALiBi, sinks) over the call's per-call
 * ones (call may be NULL: defaults). */
mh_attn_options mh_layer_options(const mh_layer* L, const mh_attn_options* call);

/* out [rows, d_model] = o [rows, H*Dv] Wo^T + bo. */
void mh_layer_out_projection(const mh_layer* L, size_t rows, const float* o, float* out);

#endif
