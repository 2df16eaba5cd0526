/*
 * The MoH oracle in double, written from docs/variants.md section "MoH" (spec 3.2 and 3.3) the
 * slowest obvious way: every head is computed densely and multiplied by its gate, the
 * reference code's form (no skipping). Independent of the library.
 */
#ifndef MH_TEST_ORACLE_MOH_H
#define MH_TEST_ORACLE_MOH_H
#include "multihead.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Gates g [rows, H] (0 where a head does not run) and sel [rows, H] (1 where it runs) of the
 * rows of x [rows, d_model]: learned router (softmax, top-K of the probabilities with ties to
 * the lower index, renormalised times K, shared softmax times h_s, stage softmax times 2) or
 * norm router (top-K of ||x W_Q^h + b_Q^h|| over the routed heads). cfg resolved. */
void oracle_moh_gates(const mh_layer_config* cfg, const mh_layer_weights* w, const float* x,
                      int rows, double* g, unsigned char* sel);

/* The MoH layer forward: dense attention of every head (oracle_attention), then
 * out = b_O + sum_h g_h O_h W_O^h. out [B, N, d_model]; g, sel as above for the B*N query
 * rows, or NULL. */
void oracle_moh_forward(const mh_layer_config* cfg, const mh_layer_weights* w,
                        const mh_forward_args* args, double* out, double* g, unsigned char* sel);

/* Rows `rows` [n_rows] of one sequence's MoH layer output: queries x [n, d_model], keys and
 * values from xkv [m, kdim] (kdim == vdim; self-attention: xkv = x, m = n), query i at
 * position m - n + i (causal: keys up to it), no options; out [n_rows, d_model]. The cheap
 * form for long sequences (K/V projected once, Q and attention only at the rows). */
void oracle_moh_rows(const mh_layer_config* cfg, const mh_layer_weights* w, const float* x,
                     const float* xkv, int m, int causal, const int* rows, int n_rows,
                     int n, double* out);

#ifdef __cplusplus
}
#endif
#endif
