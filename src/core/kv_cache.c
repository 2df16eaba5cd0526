#include "core/kv_cache.h"

#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"
#include "util/checked.h"
#include "util/dtype.h"

/* K is [B][k_heads][capacity][k_dim] with a padded head stride, so each head's keys are one
 * stream and no two streams start a power of two apart (they would alias in the caches); V
 * likewise. An MH_DTYPE_I8 cache also keeps each row's f32 scale, [B][heads][capacity] per
 * tensor (k_scale, v_scale; NULL for other dtypes). aux is [B][capacity][aux_dim] f32. */
struct mh_kv_cache {
    uint64_t magic; /* CACHE_MAGIC while alive; cleared by destroy */
    int batch, capacity, length;
    mh_cache_layout layout; /* of the layer it was made for */
    mh_dtype dtype;
    void* k;
    void* v;
    float *k_scale, *v_scale;                /* MH_DTYPE_I8 only: [B][heads][capacity] */
    float* aux;                              /* NULL when layout.aux_dim == 0 */
    ptrdiff_t k_stride_head, k_stride_batch; /* elements */
    ptrdiff_t v_stride_head, v_stride_batch;
};

/* Marks a live cache: a destroyed one (magic cleared) or another object passed as a cache is
 * refused instead of being read as one. A cheap check against common misuse, not a proof. */
#define CACHE_MAGIC UINT64_C(0x6d684b5663616368) /* "mhKVcach" */

int mh_kv_cache_valid(const mh_kv_cache* c) { return c && c->magic == CACHE_MAGIC; }

/* Elements between two heads' streams beyond capacity * dim: 128 bytes of f32. */
#define HEAD_PAD 32

/* Element strides of one tensor (K or V) of the cache; 0 on overflow. */
static int cache_strides(int batch, int capacity, int heads, int dim, ptrdiff_t* head,
                         ptrdiff_t* per_batch, size_t* total) {
    size_t hs, bs, all;
    if (!mh_mul_size((size_t)capacity, (size_t)dim, &hs) || !mh_add_size(hs, HEAD_PAD, &hs) ||
        !mh_mul_size(hs, (size_t)heads, &bs) || !mh_mul_size(bs, (size_t)batch, &all) ||
        all > PTRDIFF_MAX / 4)
        return 0;
    *head = (ptrdiff_t)hs, *per_batch = (ptrdiff_t)bs, *total = all;
    return 1;
}

mh_status mh_kv_cache_alloc(const mh_cache_layout* layout, int batch, int capacity,
                            mh_dtype dtype, mh_kv_cache** out) {
    mh_kv_cache c = {0};
    c.magic = CACHE_MAGIC;
    size_t nk, nv, bk, bv, na = 0, sk = 0, sv = 0;
    c.batch = batch, c.capacity = capacity, c.dtype = dtype, c.layout = *layout;
    const mh_cache_layout* l = &c.layout;
    if (!cache_strides(batch, capacity, l->k_heads, l->k_dim, &c.k_stride_head, &c.k_stride_batch,
                       &nk) ||
        !cache_strides(batch, capacity, l->v_heads, l->v_dim, &c.v_stride_head, &c.v_stride_batch,
                       &nv) ||
        !mh_mul_size(nk, mh_dtype_size(dtype), &bk) || !mh_mul_size(nv, mh_dtype_size(dtype), &bv) ||
        !mh_mul3_size((size_t)batch, (size_t)capacity, (size_t)l->aux_dim, &na) ||
        !mh_mul_size(na, sizeof(float), &na))
        return MH_ERR_SIZE_OVERFLOW;
    if (dtype == MH_DTYPE_I8 && (!mh_mul3_size((size_t)batch, (size_t)capacity, (size_t)l->k_heads, &sk) ||
                                 !mh_mul_size(sk, sizeof(float), &sk) ||
                                 !mh_mul3_size((size_t)batch, (size_t)capacity, (size_t)l->v_heads, &sv) ||
                                 !mh_mul_size(sv, sizeof(float), &sv)))
        return MH_ERR_SIZE_OVERFLOW;
    mh_kv_cache* cache = malloc(sizeof *cache);
    c.k = mh_alloc(bk);
    c.v = mh_alloc(bv);
    c.aux = na ? mh_alloc(na) : NULL;
    c.k_scale = sk ? mh_alloc(sk) : NULL;
    c.v_scale = sv ? mh_alloc(sv) : NULL;
    if (!cache || !c.k || !c.v || (na && !c.aux) || (sk && !c.k_scale) || (sv && !c.v_scale)) {
        free(cache);
        mh_free(c.k);
        mh_free(c.v);
        mh_free(c.aux);
        mh_free(c.k_scale);
        mh_free(c.v_scale);
        return MH_ERR_OUT_OF_MEMORY;
    }
    *cache = c;
    *out = cache;
    return MH_OK;
}

void mh_kv_cache_destroy(mh_kv_cache* cache) {
    if (!mh_kv_cache_valid(cache)) return;
    cache->magic = 0;
    mh_free(cache->k);
    mh_free(cache->v);
    mh_free(cache->aux);
    mh_free(cache->k_scale);
    mh_free(cache->v_scale);
    free(cache);
}

void mh_kv_cache_reset(mh_kv_cache* cache) {
    if (mh_kv_cache_valid(cache)) cache->length = 0;
}

int mh_kv_cache_length(const mh_kv_cache* cache) { return mh_kv_cache_valid(cache) ? cache->length : 0; }

int mh_kv_cache_capacity(const mh_kv_cache* cache) { return mh_kv_cache_valid(cache) ? cache->capacity : 0; }

size_t mh_kv_cache_bytes_per_token(const mh_kv_cache* c) {
    if (!mh_kv_cache_valid(c)) return 0;
    const mh_cache_layout* l = &c->layout;
    const size_t kv = (size_t)l->k_heads * (size_t)l->k_dim + (size_t)l->v_heads * (size_t)l->v_dim;
    const size_t scales = c->dtype == MH_DTYPE_I8 ? (size_t)(l->k_heads + l->v_heads) * sizeof(float) : 0;
    return kv * mh_dtype_size(c->dtype) + scales + (size_t)l->aux_dim * sizeof(float);
}

/* dst row of `dim` elements of the cache dtype from an f32 row; int8 rows also set *scale. */
static void store_row(const mh_kernels* k, mh_dtype dtype, void* dst, float* scale, const float* src, size_t dim) {
    switch (dtype) {
    case MH_DTYPE_F16: k->f32_to_f16(dim, src, dst); break;
    case MH_DTYPE_BF16: k->f32_to_bf16(dim, src, dst); break;
    case MH_DTYPE_I8: k->f32_to_i8(dim, src, dst, scale); break;
    default: memcpy(dst, src, dim * sizeof(float)); break;
    }
}

/* One tensor (K or V) of the cache: storage, its element strides and, for int8, its scales. */
typedef struct tensor_at {
    void* base;
    float* scale; /* [B][heads][capacity], or NULL */
    int heads, dim;
    ptrdiff_t stride_head, stride_batch;
} tensor_at;

static void write_tensor(const mh_kv_cache* c, const mh_kernels* k, int n, const float* rows, const tensor_at* x) {
    const size_t es = mh_dtype_size(c->dtype), width = (size_t)x->heads * (size_t)x->dim;
    for (int b = 0; b < c->batch; b++)
        for (int t = 0; t < n; t++)
            for (int h = 0; h < x->heads; h++) {
                const int at = c->length + t;
                const ptrdiff_t idx = b * x->stride_batch + h * x->stride_head + (ptrdiff_t)at * x->dim;
                const float* src = rows + ((size_t)b * (size_t)n + (size_t)t) * width + (size_t)h * (size_t)x->dim;
                float* scale = x->scale ? x->scale + ((size_t)b * (size_t)x->heads + (size_t)h) * (size_t)c->capacity + (size_t)at
                                        : NULL;
                store_row(k, c->dtype, (unsigned char*)x->base + (size_t)idx * es, scale, src, (size_t)x->dim);
            }
}

void mh_kv_cache_write(mh_kv_cache* c, const mh_kernels* k, int n, const float* k_rows,
                       const float* v_rows) {
    const mh_cache_layout* l = &c->layout;
    const tensor_at kt = {c->k, c->k_scale, l->k_heads, l->k_dim, c->k_stride_head, c->k_stride_batch};
    const tensor_at vt = {c->v, c->v_scale, l->v_heads, l->v_dim, c->v_stride_head, c->v_stride_batch};
    write_tensor(c, k, n, k_rows, &kt);
    write_tensor(c, k, n, v_rows, &vt);
}

void mh_kv_cache_write_aux(mh_kv_cache* c, int n, const float* aux_rows) {
    const size_t w = (size_t)c->layout.aux_dim;
    for (int b = 0; b < c->batch; b++)
        memcpy(c->aux + ((size_t)b * (size_t)c->capacity + (size_t)c->length) * w,
               aux_rows + (size_t)b * (size_t)n * w, (size_t)n * w * sizeof(float));
}

/* The core's view of one tensor: [B][heads][capacity][dim] rows, scales [B][heads][capacity]. */
static mh_tensor view_of(const mh_kv_cache* c, const void* data, const float* scale, int heads, int dim,
                         ptrdiff_t stride_head, ptrdiff_t stride_batch) {
    const ptrdiff_t cap = c->capacity;
    return (mh_tensor){.data = data,
                       .stride_batch = stride_batch,
                       .stride_token = dim,
                       .stride_head = stride_head,
                       .scale = scale,
                       .scale_stride_batch = scale ? cap * heads : 0,
                       .scale_stride_token = scale ? 1 : 0,
                       .scale_stride_head = scale ? cap : 0};
}

void mh_kv_cache_views(const mh_kv_cache* c, mh_tensor* k, mh_tensor* v) {
    const mh_cache_layout* l = &c->layout;
    *k = view_of(c, c->k, c->k_scale, l->k_heads, l->k_dim, c->k_stride_head, c->k_stride_batch);
    *v = view_of(c, c->v, c->v_scale, l->v_heads, l->v_dim, c->v_stride_head, c->v_stride_batch);
}

mh_status mh_kv_cache_check(const mh_kv_cache* c, const mh_cache_layout* layout, int batch,
                            int n_new) {
    if (batch != c->batch || memcmp(layout, &c->layout, sizeof *layout) != 0)
        return MH_ERR_SHAPE_MISMATCH;
    return (int64_t)c->length + n_new > c->capacity ? MH_ERR_CACHE_FULL : MH_OK;
}

void mh_kv_cache_advance(mh_kv_cache* c, int n) { c->length += n; }

float* mh_kv_cache_aux(const mh_kv_cache* c, ptrdiff_t* stride_batch) {
    *stride_batch = (ptrdiff_t)c->capacity * c->layout.aux_dim;
    return c->aux;
}

mh_dtype mh_kv_cache_dtype(const mh_kv_cache* c) { return c->dtype; }
