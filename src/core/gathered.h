/*
 * Attention over gathered query rows: every (query head, sequence) runs the core only on the
 * rows whose gate for that head is nonzero, packed densely, each keeping its real position
 * (causal and window limits stay exact). Shared by mh_attention's head_gates and the MoH
 * layer, so skipped (token, head) pairs cost no Q.K, softmax or P.V work.
 */
#ifndef MH_CORE_GATHERED_H
#define MH_CORE_GATHERED_H
#include "core/attention.h"

/* The plan of one call and its core workspace. "Gathered rows" are (head, token) pairs with a
 * nonzero gate, listed head by head, then sequence by sequence, then by token. */
typedef struct mh_gathered {
    int64_t* seg; /* [H*B + 1]  first gathered row of (head h, sequence s) at h*B + s */
    int32_t* row; /* [B*N*H]    gathered row -> token row b*N + t */
    int64_t* pos; /* [B*N*H]    gathered row -> absolute query position */
    void* attn;   /* the core's workspace for one (head, sequence) of up to N rows */
} mh_gathered;

/* Carves the plan only (g->attn = NULL) for the shapes of the dense problem p. */
void mh_gathered_carve_plan(const mh_attn_problem* p, mh_ws* ws, mh_gathered* g);

/* Carves the plan and core workspace for the shapes of the dense problem p (B, N, M, H, Hkv,
 * dims); prepack_ok as for mh_core_attention_carve. */
void mh_gathered_carve(const mh_kernels* k, int threads, const mh_attn_problem* p,
                       int prepack_ok, mh_ws* ws, mh_gathered* g);

/* Lists the rows with gate [B*N, H] != 0 and their positions (the core's rule: q_offset, or
 * kv_len[b] - N, or M - N). */
void mh_gathered_plan(const mh_attn_problem* p, const mh_attn_options* opt, const float* gate,
                      mh_gathered* g);

/* For every (head h, sequence s): attention of its gathered queries qg [rows, Dqk] over p's K/V
 * (h's KV head, sequence s) into og [rows, Dv]. p gives shapes, K/V views, dtypes and scale
 * (its q and o are not read); opt gives the flags and the [H] and [B] arrays. */
void mh_gathered_attend(const mh_kernels* k, int threads, const mh_attn_problem* p,
                        const mh_attn_options* opt, int prepack_ok, const mh_gathered* g,
                        const float* qg, float* og);

/* og [rows, Dv] *= each gathered row's gate [B*N, H]. */
void mh_gathered_scale(const mh_attn_problem* p, const mh_gathered* g, const float* gate,
                       float* og);

#endif
