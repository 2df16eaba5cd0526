/*
 * MoH routing (docs/variants.md, "MoH"): which heads each token runs and with what gate.
 * Heads 0..h_s-1 are shared (always run), heads h_s..H-1 are routed; a token runs the top_k
 * routed heads by its router logits, ties going to the lower head index.
 */
#ifndef MH_VARIANTS_MOH_ROUTER_H
#define MH_VARIANTS_MOH_ROUTER_H
#include "multihead.h"

/* Every function here reads the MoH config at c->variant_config (a resolved layer config). */

/* Checks the MoH rules of a config whose n_heads is valid: router, 0 <= h_s <= H,
 * 0 <= K <= H - h_s, and K = 0 only with h_s = H (every head shared). */
mh_status mh_moh_check_config(const mh_layer_config* c);

/* Which learned-router weights the config uses: W_r iff K > 0, W_h iff K > 0 and h_s > 0,
 * W_s iff h_s > 1. The norm router uses none. MH_ERR_INVALID_ARGUMENT when a used one is
 * missing or an unused one is given. */
mh_status mh_moh_check_weights(const mh_layer_config* c, const mh_moh_weights* w);

/* Rows of the learned router's logit matrix: [E routed][h_s shared, if h_s > 1]
 * [2 stage, if K > 0 and h_s > 0]; 0 for the norm router. */
int mh_moh_router_rows(const mh_layer_config* c);

/* Copies the used router weights, in that row order, into w_cat [router_rows, d_model]. */
void mh_moh_router_concat(const mh_layer_config* c, const mh_moh_weights* w, float* w_cat);

/* One token, learned router: logits [router_rows] -> gates g [H] (0 where not selected) and
 * sel [H] (1 where the head runs). */
void mh_moh_route_learned(const mh_layer_config* c, const float* logits, float* g,
                          unsigned char* sel);

/* One token, norm router: q [H * D] (pre-projection bias included) -> binary g and sel: the
 * shared heads and the top_k routed heads by ||q_h||. */
void mh_moh_route_norm(const mh_layer_config* c, const float* q, float* g, unsigned char* sel);

#endif
