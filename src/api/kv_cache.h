/* The KV cache object, shared by the public functions and the variants. */
#ifndef MH_API_KV_CACHE_H
#define MH_API_KV_CACHE_H
#include "kernels/kernels.h"

/* What a variant keeps per token and sequence (variant.h: mh_variant_ops.cache_layout). The GQA
 * family keeps {Hkv, D, Hkv, Dv, 0}; a variant with shared keys or per-key side data differs. */
typedef struct mh_cache_layout {
    int k_heads, k_dim; /* K streams, in the cache dtype */
    int v_heads, v_dim; /* V streams, in the cache dtype */
    int aux_dim;        /* f32 values per token beside K/V (e.g. per-key factors); 0 = none */
} mh_cache_layout;

/* K is [B][k_heads][capacity][k_dim] with a padded head stride, so each head's keys are one
 * stream and no two streams start a power of two apart (they would alias in the caches); V
 * likewise. aux is [B][capacity][aux_dim] f32. */
struct mh_kv_cache {
    int batch, capacity, length;
    mh_cache_layout layout; /* of the layer it was made for */
    mh_dtype dtype;
    void* k;
    void* v;
    float* aux;                              /* NULL when layout.aux_dim == 0 */
    ptrdiff_t k_stride_head, k_stride_batch; /* elements */
    ptrdiff_t v_stride_head, v_stride_batch;
};

/* Stores n tokens per sequence at positions length .. length + n - 1 (converting to the
 * cache dtype); does not change `length`.
 *   k_rows [B, n, k_heads*k_dim]   v_rows [B, n, v_heads*v_dim]   (f32, contiguous) */
void mh_kv_cache_write(struct mh_kv_cache* c, const mh_kernels* k, int n, const float* k_rows,
                       const float* v_rows);

/* Stores n tokens' side data at positions length .. length + n - 1.
 *   aux_rows [B, n, aux_dim] (f32, contiguous) */
void mh_kv_cache_write_aux(struct mh_kv_cache* c, int n, const float* aux_rows);

/* Strided views of the cached K and V ([B, tokens, heads, dim] in the core's terms). */
void mh_kv_cache_views(const struct mh_kv_cache* c, mh_tensor* k, mh_tensor* v);

#endif
