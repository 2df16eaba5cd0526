/*
 * The KV cache below the variants: storage for K, V and per-token side data of one layer, for
 * up to max_seqs sequences of their own lengths, contiguous or paged (core/kv_pages.h has the
 * storage model, core/kv_pool.h the paged pool). The object is opaque; a variant's decode
 * reads and writes it only through these accessors, and only the public decode entry
 * (src/api/layer_api.c) checks a call, reserves its blocks and advances the lengths, around
 * the variant's decode.
 */
#ifndef MH_CORE_KV_CACHE_H
#define MH_CORE_KV_CACHE_H
#include "core/kv_pages.h"
#include "kernels/kernels.h"

/* What a layer keeps per token and sequence (variants/variant.h: mh_variant_ops.cache_layout).
 * The GQA family keeps {Hkv, D, Hkv, Dv, 0}; a variant with shared keys or per-key side data
 * differs. */
typedef struct mh_cache_layout {
    int k_heads, k_dim; /* K streams, in the cache dtype */
    int v_heads, v_dim; /* V streams, in the cache dtype */
    int aux_dim;        /* f32 values per token beside K/V (e.g. per-key factors); 0 = none */
} mh_cache_layout;

/* The sequences one decode call advances (mh_decode_args): batch row b appends
 * mh_kv_seq_count(s, b) tokens to sequence mh_kv_seq_id(s, b) at that sequence's length. A
 * variant's rows are padded to [B][n]: row b * n + i is token i of batch row b (rows past its
 * count are filler, never stored). */
typedef struct mh_kv_seqs {
    int batch, n;
    const int32_t* ids;   /* [B] or NULL: 0 .. B - 1 */
    const int32_t* count; /* [B] or NULL: n each */
} mh_kv_seqs;

static inline int mh_kv_seq_id(const mh_kv_seqs* s, int b) { return s->ids ? s->ids[b] : b; }
static inline int mh_kv_seq_count(const mh_kv_seqs* s, int b) { return s->count ? s->count[b] : s->n; }

/* A cache of this layout and (checked, n_blocks resolved) config. */
mh_status mh_kv_cache_alloc(const mh_cache_layout* layout, const mh_kv_cache_config* config,
                            struct mh_kv_cache** out);

/* 1 if c is a live cache (not NULL, not destroyed, not another object); every public function
 * taking a cache checks it first. */
int mh_kv_cache_valid(const struct mh_kv_cache* c);

/* MH_OK if the call's new tokens fit; else MH_ERR_SHAPE_MISMATCH (another layout, or more
 * sequences than the cache holds), MH_ERR_INVALID_ARGUMENT (an id out of range or repeated, a
 * count outside 1..n) or MH_ERR_CACHE_FULL (a sequence would pass capacity, or the pool lacks
 * blocks for the new and copied-on-write blocks of the whole call). Changes nothing. */
mh_status mh_kv_cache_check(struct mh_kv_cache* c, const mh_cache_layout* layout, const mh_kv_seqs* s);

/* After a successful check: takes the blocks the call's tokens go to (copying shared ones
 * first); cannot fail. */
void mh_kv_cache_reserve(struct mh_kv_cache* c, const mh_kv_seqs* s);

/* The public decode entry's last step: every named sequence grows by its count. */
void mh_kv_cache_advance(struct mh_kv_cache* c, const mh_kv_seqs* s);

/* Sequence seq's length (seq valid). */
int mh_kv_cache_seq_len(const struct mh_kv_cache* c, int seq);

/* 1 if the call's sequences all have the same length and count (the old together-advancing
 * shape, which every variant serves). */
int mh_kv_cache_uniform(const struct mh_kv_cache* c, const mh_kv_seqs* s);

/* The call's key counts and query positions: kv_len[b] = length_b + count_b, and (if not
 * NULL) q_pos[b * n + i] = length_b + min(i, count_b - 1), the cache position of new token i
 * (filler rows repeat the last). Returns the largest kv_len. */
int mh_kv_cache_positions(const struct mh_kv_cache* c, const mh_kv_seqs* s, int32_t* kv_len, int64_t* q_pos);

/* Stores the new tokens of every batch row at its positions (converting to the cache dtype;
 * an int8 cache quantises each (token, head) row with f32_to_i8 and keeps its scale); does
 * not change the lengths.
 *   k_rows [B, n, k_heads*k_dim]   v_rows [B, n, v_heads*v_dim]   (f32, padded rows) */
void mh_kv_cache_write(struct mh_kv_cache* c, const mh_kernels* k, const mh_kv_seqs* s,
                       const float* k_rows, const float* v_rows);

/* Stores the new tokens' side data (contiguous caches only).
 *   aux_rows [B, n, aux_dim] (f32, padded rows) */
void mh_kv_cache_write_aux(struct mh_kv_cache* c, const mh_kv_seqs* s, const float* aux_rows);

/* Strided views of the cached K and V (the core's [batch][tokens][heads][dim] with batch =
 * storage block), with their row scales for an int8 cache (scale NULL otherwise). Returns the
 * map from the call's batch rows to blocks, filled into *pages, or NULL when batch row b is
 * the contiguous sequence b (the plain view). */
const mh_kv_pages* mh_kv_cache_views(const struct mh_kv_cache* c, const mh_kv_seqs* s, mh_tensor* k,
                                     mh_tensor* v, mh_kv_pages* pages);

/* The side stream [max_seqs][capacity][aux_dim] f32 (NULL when aux_dim is 0); *stride_batch
 * gets capacity * aux_dim. Variants may store into it in their own tiling of a sequence's
 * capacity * aux_dim floats. */
float* mh_kv_cache_aux(const struct mh_kv_cache* c, ptrdiff_t* stride_batch);

mh_dtype mh_kv_cache_dtype(const struct mh_kv_cache* c);

#endif
