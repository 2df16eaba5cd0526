/* Argument checks shared by the core entry point and the layers. Each returns MH_OK or the
 * documented error, and never writes anything. */
#ifndef MH_API_VALIDATE_H
#define MH_API_VALIDATE_H
#include "multihead.h"

/* Options for an attention over B sequences, N queries, M keys, H query heads. */
mh_status mh_validate_options(const mh_attn_options* opt, int batch, int n_q, int n_kv, int n_heads);

/* A whole pre-projected problem (shapes, pointers, strides, index ranges). */
mh_status mh_validate_problem(const mh_attn_problem* p);

/* 1 if a probabilities buffer [B, H, N, M] of floats is addressable. */
int mh_probs_fit(int batch, int n_heads, int n_q, int n_kv);

#endif
