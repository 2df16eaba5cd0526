/* The double-precision DCMHA oracle (docs/variants.md, "DCMHA"), written from the math the
 * slow obvious way: every factor per token, every composition per (query, key) pair. */
#ifndef MH_TEST_ORACLE_DCMHA_H
#define MH_TEST_ORACLE_DCMHA_H
#include "multihead.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The composition form: the low-rank sums of the paper's Compose, or the per-pair dense
 * H x H matrix W_ts = I + W_b + qw1^T qw2 + diag(qdd) + kw1^T kw2 + diag(kdd) of the official
 * decode path (a cross-check of each other). */
typedef enum oracle_compose { ORACLE_COMPOSE_LOWRANK = 0, ORACLE_COMPOSE_DENSE = 1 } oracle_compose;

/* Per-token factors of the tokens x [rows, d_model]: w1, w2 [rows][4][G][R][Hg] (w1
 * RMS-normalised), dd [rows][4][G][Hg]; branch 0 = pre/query, 1 = pre/key, 2 = post/query,
 * 3 = post/key. cfg resolved. */
void oracle_dcmha_factors(const mh_layer_config* cfg, const mh_layer_weights* w, const float* x,
                          int rows, double* w1, double* w2, double* dd);

/* Output rows rows[0 .. n_rows-1] of one sequence x [M, d_model] (self-attention over all M
 * tokens, causal or not). out [n_rows, d_model]. */
void oracle_dcmha_rows(const mh_layer_config* cfg, const mh_layer_weights* w, const float* x, int M,
                       int causal, const int* rows, int n_rows, oracle_compose form, double* out);

/* The layer forward, self-attention, causal if args->opt && args->opt->causal.
 * out [B, N, d_model]. */
void oracle_dcmha_forward(const mh_layer_config* cfg, const mh_layer_weights* w,
                          const mh_forward_args* args, oracle_compose form, double* out);

#ifdef __cplusplus
}
#endif
#endif
