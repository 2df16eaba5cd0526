/* The CollabHead layer in double precision (docs/variants.md, "CollabHead"), built on the
 * naive attention oracle. Independent of the library. */
#ifndef MH_TEST_ORACLE_COLLAB_H
#define MH_TEST_ORACLE_COLLAB_H
#include "multihead.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where the mixing row m_h is applied: (q~ * m_h) . k~ (the epfml package) or q~ . (k~ * m_h)
 * (the fairseq fork); the same math. */
typedef enum oracle_collab_mixing { ORACLE_MIX_QUERY = 0, ORACLE_MIX_KEY = 1 } oracle_collab_mixing;

/* The whole CollabHead forward. cfg resolved (head_dim_v, kdim, vdim, scale set); args->opt
 * may carry causal, q_offset, kv_len and mask (its probs are ignored). out [B, N, d_model];
 * probs [B, H, N, M] or NULL. */
void oracle_collab_forward(const mh_layer_config* cfg, const mh_layer_weights* w,
                           const mh_forward_args* args, oracle_collab_mixing mixing, double* out,
                           double* probs);

#ifdef __cplusplus
}
#endif
#endif
