/* The KV cache object, shared by the public functions and the variants. */
#ifndef MH_API_KV_CACHE_H
#define MH_API_KV_CACHE_H
#include "kernels/kernels.h"

/* K is [B][Hkv][capacity][D] with a padded head stride, so each head's keys are one stream and
 * no two streams start a power of two apart (they would alias in the caches); V likewise. */
struct mh_kv_cache {
    int batch, capacity, length;
    int n_kv_heads, head_dim, head_dim_v; /* of the layer it was made for */
    mh_dtype dtype;
    void* k;
    void* v;
    ptrdiff_t k_stride_head, k_stride_batch; /* elements */
    ptrdiff_t v_stride_head, v_stride_batch;
};

/* Stores n tokens per sequence at positions length .. length + n - 1 (converting to the
 * cache dtype); does not change `length`.
 *   k_rows [B, n, Hkv*D]   v_rows [B, n, Hkv*Dv]   (f32, contiguous) */
void mh_kv_cache_write(struct mh_kv_cache* c, const mh_kernels* k, int n, const float* k_rows,
                       const float* v_rows);

/* Strided views of the cached K and V ([B, tokens, Hkv, D] in the core's terms). */
void mh_kv_cache_views(const struct mh_kv_cache* c, mh_tensor* k, mh_tensor* v);

#endif
