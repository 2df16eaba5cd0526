/* DCMHA cross-head attention on the driver (core/driver.h; docs/variants.md, "DCMHA"): the
 * scores and the probabilities of the heads of a group are mixed at every (query, key) pair,
 * so one task holds all heads of its group. Arguments are validated by the caller (variants/dcmha.c). */
#ifndef MH_CORE_DCMHA_ATTENTION_H
#define MH_CORE_DCMHA_ATTENTION_H
#include "kernels/kernels.h"
#include "util/workspace.h"

/* Per-token composition factors. A branch block holds, for each group g in turn,
 * [w1 R x Hg][w2 R x Hg][dd Hg], i.e. G * (2R + 1) * Hg = 2RH + H floats. */
typedef struct mh_dcmha_factors {
    const float* data;
    ptrdiff_t stride_batch, stride_token; /* floats */
    ptrdiff_t pre, post;                  /* offsets of the pre and post branch blocks in a row */
} mh_dcmha_factors;

/* Per-key factors (the key-side branches 1 and 3), key-contiguous in tiles of
 * MH_DCMHA_KEY_TILE keys, so the composition reads them without a transposition: the tile
 * of sequence b holding keys [j0, j0 + tk) (j0 a multiple of tk) starts at
 * data + b * stride_batch + j0 * 2 * branch and is [2 * branch][n], n = min(tk, cols - j0):
 * the pre branch's rows, then the post branch's. */
typedef struct mh_dcmha_key_factors {
    float* data;
    ptrdiff_t stride_batch; /* floats */
    size_t cols;            /* keys the layout spans (the cache capacity, or M) */
    size_t branch;          /* floats of one branch, 2RH + H */
} mh_dcmha_key_factors;

/* Keys per layout tile of the key factors: a tile's rows are short enough that the composition
 * reads the whole tile in order (one stream), whatever the vector width. */
#define MH_DCMHA_KEY_TILE ((size_t)32)

/* Stores the key-side branches pre, post [branch] of the key at position pos of sequence b. */
void mh_dcmha_store_key(const mh_dcmha_key_factors* kf, int b, size_t pos, const float* pre,
                        const float* post);

typedef struct mh_dcmha_problem {
    int batch, n_q, n_kv;         /* B, N, M */
    int n_heads, groups, rank;    /* H, G, R */
    int head_dim_qk, head_dim_v;  /* D, Dv */
    float scale;
    mh_tensor q, k, v;            /* Q [B, N, H, D] f32; K [B, M, H, D], V [B, M, H, Dv] */
    mh_dtype k_dtype, v_dtype;
    float* o;                     /* [B, N, H, Dv], contiguous */
    mh_dcmha_factors qf;          /* per query: the query-side branches (0 = pre, 2 = post) */
    mh_dcmha_key_factors kf;      /* per key: the key-side branches (1 = pre, 3 = post) */
    const float* wb;              /* [2][G][Hg][Hg] static pre then post (in head, out head), or NULL */
    int causal;
    int64_t q_pos;                /* position of query 0; keys sit at 0 .. M - 1 */
    mh_compute compute;           /* F32, or BF16: Q, K, V and the composed probabilities P'
                                     enter the two GEMMs rounded (core/driver_bf16.h) */
} mh_dcmha_problem;

/* Carves (or measures, with ws->base == NULL) the workspace; returns its start. Both modes run
 * two passes over the keys (softmax statistics, then post-composition and P'.V).
 * materialise = 1 (prefill; the workspace depends on M): each task keeps pass 1's exponentiated
 * scores over all keys ([heads][queries][M] in key tiles) for pass 2; K/V are packed once per
 * call.
 * materialise = 0 (decode; the workspace does not depend on M): pass 2 reads pass 1's tiles
 * from a store of fixed size when they fit, else recomputes them; K/V are read in place. */
void* mh_dcmha_attention_carve(const mh_kernels* k, int threads, const mh_dcmha_problem* p,
                               int materialise, mh_ws* ws);

/* The two-pass (decode) workspace with room for the call at any n_q in 1..p->n_q. */
void* mh_dcmha_attention_carve_upto(const mh_kernels* k, int threads, const mh_dcmha_problem* p,
                                    mh_ws* ws);

void mh_dcmha_attention(const mh_kernels* k, int threads, const mh_dcmha_problem* p,
                        int materialise, void* ws);

#endif
