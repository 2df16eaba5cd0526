/*
 * Positions of a layer's q and k rows: QK-norm and rotary position embeddings
 * (include/multihead.h, "positions"), shared by the variants that take them (MH_CAP_POSITIONS:
 * MHA/GQA/MQA, MoH, DCMHA). Applied to the projected rows right after projection and bias,
 * before attention and before k enters a cache; a layer with neither does no extra work and
 * carves no extra workspace.
 */
#ifndef MH_VARIANT_POSITIONS_H
#define MH_VARIANT_POSITIONS_H
#include "variant.h"

/* Checks and resolves cfg's rotary, qk_norm and qk_norm_eps (head_dim known): rotary_dim 0 =
 * head_dim, theta 0 = 10000, qk_norm_eps 0 = 1e-6. MH_ERR_INVALID_ARGUMENT for a bad value,
 * then MH_ERR_UNSUPPORTED when either is on and caps lacks MH_CAP_POSITIONS. */
mh_status mh_positions_resolve(mh_layer_config* cfg, unsigned caps);

/* q_norm and k_norm are given exactly when cfg->qk_norm (MH_ERR_INVALID_ARGUMENT otherwise). */
mh_status mh_positions_check_weights(const mh_layer_config* cfg, const mh_layer_weights* w);

/* Copies into L the frequency table (the caller's, or the default one) and the QK-norm
 * weights, and points L->cfg.rotary.inv_freq at the copy. On error nothing is left allocated. */
mh_status mh_positions_create(mh_layer* L, const mh_layer_weights* w);
void mh_positions_free(mh_layer* L);
/* Bytes of those copies. */
size_t mh_positions_bytes(const mh_layer* L);

/* 1 if the layer has rotary or QK-norm. */
int mh_positions_on(const mh_layer* L);

/* Carves a positions array [rows] for one set of projected rows; NULL (and nothing carved)
 * when the layer has neither rotary nor QK-norm. */
int64_t* mh_positions_take(const mh_layer* L, size_t rows, mh_ws* ws);

/* Forward: the position of query row b*N + i (mh_attn_options' rule: q_offset + i, or
 * kv_len[b] - N + i with kv_len NULL meaning M; opt NULL = the defaults), pos [B*N]. */
void mh_positions_queries(const mh_attn_options* opt, int B, int N, int M, int64_t* pos);
/* Row b*n + i sits at first + i, pos [B*n]: a forward's keys (first 0), or the new tokens of
 * sequences that advance together from length `first` (a decode without MH_CAP_SEQS; the
 * others take mh_decode_bufs.q_pos). */
void mh_positions_from(int64_t first, int B, int n, int64_t* pos);

/* QK-norm then rotary on `rows` projected rows of `heads` heads of head_dim (x [rows, ldx]),
 * row r at position pos[r]; k = 0 for q rows (q_norm), 1 for k rows (k_norm). Nothing when
 * the layer has neither. */
void mh_positions_apply(const mh_layer* L, int k, size_t rows, size_t heads, const int64_t* pos,
                        float* x, size_t ldx);

#endif
