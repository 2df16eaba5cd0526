/* Attention with ONE key stream shared by all heads, a per-head mixing of the queries, a
 * per-(head, key) additive score term and per-head values: the CollabHead core
 * (docs/variants.md, "CollabHead"). Arguments are validated by the caller; this layer trusts
 * them. The score of head h, query i, key j, before the common score step (score.h), is
 *   s = scale * (sum_r q[i][r] * mix[h][r] * k[j][r] + bias[j][h]). */
#ifndef MH_CORE_SHARED_KEY_ATTENTION_H
#define MH_CORE_SHARED_KEY_ATTENTION_H
#include "kernels/kernels.h"
#include "util/workspace.h"

typedef struct mh_shared_key_problem {
    int batch, n_q, n_kv;  /* B, N, M */
    int n_heads;           /* H */
    int dim_qk, head_dim_v; /* D~ (shared q/k width), Dv */
    float scale;           /* the final one (never 0 here) */
    const float* q;        /* [B, N, D~] f32, contiguous: the shared (unmixed) queries */
    const float* mix;      /* [H, D~] the mixing rows m_h */
    const void* k;         /* [B][M][D~] in k_dtype, batch stride k_stride_batch */
    ptrdiff_t k_stride_batch;
    mh_tensor v;           /* [B, M, H, Dv] in v_dtype */
    mh_dtype k_dtype, v_dtype;
    const float* bias;     /* [B][M][H] f32, batch stride bias_stride_batch: the content bias */
    ptrdiff_t bias_stride_batch;
    float* o;              /* [B, N, H, Dv] f32, contiguous, written */
} mh_shared_key_problem;

/* Carves (or, with ws->base == NULL, measures) the workspace of a call with up to `threads`
 * workers; returns its start (NULL while measuring). prepack_ok: the call may pack K/V once for
 * all its query tiles, in room that grows with n_kv; without it the size does not depend on
 * n_kv when the call has a single query tile, so decode can size it without the cache length.
 * The call passes the same prepack_ok. */
void* mh_shared_key_attention_carve(const mh_kernels* k, int threads,
                                    const mh_shared_key_problem* p, int prepack_ok, mh_ws* ws);

/* The same, with room for the call at any n_q in 1..p->n_q (decode sizes its workspace once for
 * every n_new up to the one asked for), without prepack. */
void* mh_shared_key_attention_carve_upto(const mh_kernels* k, int threads,
                                         const mh_shared_key_problem* p, mh_ws* ws);

/* Runs the attention; `ws` is what the carve returned for the same threads and shapes. opt
 * (never NULL) has the per-call and model-level options, including probs [B, H, N, M]. */
void mh_shared_key_attention(const mh_kernels* k, int threads, const mh_shared_key_problem* p,
                             const mh_attn_options* opt, int prepack_ok, void* ws);

#endif
