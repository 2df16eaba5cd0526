/* The double-precision oracle of the overlapping-heads layer (MOHSA, docs/variants.md). */
#ifndef MH_TEST_ORACLE_OVERLAP_H
#define MH_TEST_ORACLE_OVERLAP_H
#include "multihead.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The whole forward of an MH_VARIANT_OVERLAP layer in double, written from the definition:
 * Q/K/V are projected, padded with o zeros on both sides, each head's window
 * pad(Q)[i*D : i*D + D + 2o] is copied out, attended, and the H enlarged outputs go through
 * W' [d_model, H*(D + 2o)]. cfg must be resolved (scale, n_kv_heads, kdim, vdim set).
 * out [B, N, d_model]. */
void oracle_overlap_forward(const mh_layer_config* cfg, const mh_layer_weights* w,
                            const mh_forward_args* args, double* out);

#ifdef __cplusplus
}
#endif
#endif
