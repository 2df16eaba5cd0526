/*
 * The KV cache below the variants: storage for K, V and per-token side data of one layer.
 * The object is opaque; a variant's decode reads and writes it only through these accessors,
 * and only the public decode entry (src/api/layer_api.c) advances its length, after the
 * variant's decode has run.
 */
#ifndef MH_CORE_KV_CACHE_H
#define MH_CORE_KV_CACHE_H
#include "kernels/kernels.h"

/* What a layer keeps per token and sequence (variants/variant.h: mh_variant_ops.cache_layout).
 * The GQA family keeps {Hkv, D, Hkv, Dv, 0}; a variant with shared keys or per-key side data
 * differs. */
typedef struct mh_cache_layout {
    int k_heads, k_dim; /* K streams, in the cache dtype */
    int v_heads, v_dim; /* V streams, in the cache dtype */
    int aux_dim;        /* f32 values per token beside K/V (e.g. per-key factors); 0 = none */
} mh_cache_layout;

/* A cache of `capacity` tokens for `batch` sequences of this layout (arguments valid). */
mh_status mh_kv_cache_alloc(const mh_cache_layout* layout, int batch, int capacity,
                            mh_dtype dtype, struct mh_kv_cache** out);

/* 1 if c is a live cache (not NULL, not destroyed, not another object); every public function
 * taking a cache checks it first. */
int mh_kv_cache_valid(const struct mh_kv_cache* c);

/* MH_OK if n_new more tokens of `batch` sequences of a layer with this layout fit the cache;
 * else MH_ERR_SHAPE_MISMATCH (another batch or layout) or MH_ERR_CACHE_FULL. */
mh_status mh_kv_cache_check(const struct mh_kv_cache* c, const mh_cache_layout* layout,
                            int batch, int n_new);

/* The public decode entry's last step: n tokens were written and attended (checked to fit). */
void mh_kv_cache_advance(struct mh_kv_cache* c, int n);

/* Stores n tokens per sequence at positions length .. length + n - 1 (converting to the
 * cache dtype; an int8 cache quantises each (token, head) row with f32_to_i8 and keeps its
 * scale); does not change the length.
 *   k_rows [B, n, k_heads*k_dim]   v_rows [B, n, v_heads*v_dim]   (f32, contiguous) */
void mh_kv_cache_write(struct mh_kv_cache* c, const mh_kernels* k, int n, const float* k_rows,
                       const float* v_rows);

/* Stores n tokens' side data at positions length .. length + n - 1.
 *   aux_rows [B, n, aux_dim] (f32, contiguous) */
void mh_kv_cache_write_aux(struct mh_kv_cache* c, int n, const float* aux_rows);

/* Strided views of the cached K and V ([B, tokens, heads, dim] in the core's terms), with
 * their row scales for an int8 cache (scale NULL otherwise). */
void mh_kv_cache_views(const struct mh_kv_cache* c, mh_tensor* k, mh_tensor* v);

/* The side stream [B][capacity][aux_dim] f32 (NULL when aux_dim is 0); *stride_batch gets
 * capacity * aux_dim. Variants may store into it in their own tiling of a sequence's
 * capacity * aux_dim floats. */
float* mh_kv_cache_aux(const struct mh_kv_cache* c, ptrdiff_t* stride_batch);

mh_dtype mh_kv_cache_dtype(const struct mh_kv_cache* c);

#endif
