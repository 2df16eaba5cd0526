#include "core/kv_cache.h"

#include <stdlib.h>
#include <string.h>

#include "core/kv_pool.h"
#include "util/alloc.h"
#include "util/checked.h"
#include "util/dtype.h"

/* Storage is n_store blocks of bt tokens (core/kv_pages.h): contiguous, one block of capacity
 * tokens per sequence; paged, the pool's blocks. K is [k_heads][n_store][bt][k_dim]: each head's
 * keys in a block are one stream of rows, and a head's consecutive blocks are adjacent, so a
 * sequence whose blocks were taken in order is read as one stream per head, as a contiguous
 * cache is (with [block][head] the prefetchers restart at every block: a paged decode at
 * 256-token blocks took 1.4x the contiguous time on Zen 4). The head stride is padded, so no
 * two heads start a power of two apart (they would alias in the caches); V likewise. An
 * MH_DTYPE_I8 cache also keeps each row's f32 scale, [heads][n_store][bt] per tensor
 * (k_scale, v_scale; NULL for other dtypes). aux (contiguous only) is
 * [max_seqs][capacity][aux_dim] f32. */
struct mh_kv_cache {
    uint64_t magic; /* CACHE_MAGIC while alive; cleared by destroy */
    int max_seqs, capacity;
    mh_cache_layout layout; /* of the layer it was made for */
    mh_dtype dtype;
    int* len;              /* [max_seqs] */
    unsigned char* named;  /* [max_seqs] all zero between calls: the check's marks of ids */
    int paged;
    mh_kv_pool pool;       /* paged only */
    int n_store, bt;       /* storage blocks, tokens per block */
    void* k;
    void* v;
    float *k_scale, *v_scale;                /* MH_DTYPE_I8 only: [heads][n_store][bt] */
    float* aux;                              /* NULL when layout.aux_dim == 0 */
    ptrdiff_t k_stride_head, k_stride_block; /* elements */
    ptrdiff_t v_stride_head, v_stride_block;
};

/* Marks a live cache: a destroyed one (magic cleared) or another object passed as a cache is
 * refused instead of being read as one. A cheap check against common misuse, not a proof. */
#define CACHE_MAGIC UINT64_C(0x6d684b5663616368) /* "mhKVcach" */

int mh_kv_cache_valid(const mh_kv_cache* c) { return c && c->magic == CACHE_MAGIC; }

/* Elements between two heads' streams beyond blocks * bt * dim: 128 bytes of f32. */
#define HEAD_PAD 32

/* Element strides of one tensor (K or V) of the cache; 0 on overflow. */
static int cache_strides(int blocks, int bt, int heads, int dim, ptrdiff_t* head, ptrdiff_t* per_block,
                         size_t* total) {
    size_t bs, hs, all;
    if (!mh_mul_size((size_t)bt, (size_t)dim, &bs) || !mh_mul_size(bs, (size_t)blocks, &hs) ||
        !mh_add_size(hs, HEAD_PAD, &hs) || !mh_mul_size(hs, (size_t)heads, &all) || all > PTRDIFF_MAX / 4)
        return 0;
    *head = (ptrdiff_t)hs, *per_block = (ptrdiff_t)bs, *total = all;
    return 1;
}

/* Bytes of one tensor's storage and of its int8 scales (0 for other dtypes); 0 on overflow. */
static int tensor_bytes(const mh_kv_cache* c, int heads, int dim, ptrdiff_t* head, ptrdiff_t* per_block,
                        size_t* bytes, size_t* scale_bytes) {
    size_t n;
    *scale_bytes = 0;
    return cache_strides(c->n_store, c->bt, heads, dim, head, per_block, &n) &&
           mh_mul_size(n, mh_dtype_size(c->dtype), bytes) &&
           (c->dtype != MH_DTYPE_I8 ||
            mh_mul3_size((size_t)c->n_store * (size_t)c->bt, (size_t)heads, sizeof(float), scale_bytes));
}

static void free_parts(mh_kv_cache* c) {
    mh_free(c->k);
    mh_free(c->v);
    mh_free(c->aux);
    mh_free(c->k_scale);
    mh_free(c->v_scale);
    free(c->len);
    free(c->named);
    if (c->paged) mh_kv_pool_release_all(&c->pool);
}

mh_status mh_kv_cache_alloc(const mh_cache_layout* layout, const mh_kv_cache_config* cfg, mh_kv_cache** out) {
    mh_kv_cache c = {0};
    c.magic = CACHE_MAGIC;
    c.max_seqs = cfg->max_seqs, c.capacity = cfg->capacity, c.dtype = cfg->dtype, c.layout = *layout;
    c.paged = cfg->block_size > 0;
    c.n_store = c.paged ? cfg->n_blocks : cfg->max_seqs, c.bt = c.paged ? cfg->block_size : cfg->capacity;
    const mh_cache_layout* l = &c.layout;
    size_t bk, bv, sk, sv, na = 0;
    if (!tensor_bytes(&c, l->k_heads, l->k_dim, &c.k_stride_head, &c.k_stride_block, &bk, &sk) ||
        !tensor_bytes(&c, l->v_heads, l->v_dim, &c.v_stride_head, &c.v_stride_block, &bv, &sv) ||
        !mh_mul3_size((size_t)c.max_seqs, (size_t)c.capacity, (size_t)l->aux_dim, &na) ||
        !mh_mul_size(na, sizeof(float), &na))
        return MH_ERR_SIZE_OVERFLOW;
    if (c.paged) {
        const mh_status st = mh_kv_pool_init(&c.pool, c.max_seqs, c.capacity, cfg->block_size, cfg->n_blocks);
        if (st != MH_OK) return st;
    }
    mh_kv_cache* cache = malloc(sizeof *cache);
    c.len = calloc((size_t)c.max_seqs, sizeof(int));
    c.named = calloc((size_t)c.max_seqs, 1);
    c.k = mh_alloc(bk);
    c.v = mh_alloc(bv);
    c.aux = na ? mh_alloc(na) : NULL;
    c.k_scale = sk ? mh_alloc(sk) : NULL;
    c.v_scale = sv ? mh_alloc(sv) : NULL;
    if (!cache || !c.len || !c.named || !c.k || !c.v || (na && !c.aux) || (sk && !c.k_scale) || (sv && !c.v_scale)) {
        free(cache);
        free_parts(&c);
        return MH_ERR_OUT_OF_MEMORY;
    }
    *cache = c;
    *out = cache;
    return MH_OK;
}

void mh_kv_cache_destroy(mh_kv_cache* cache) {
    if (!mh_kv_cache_valid(cache)) return;
    cache->magic = 0;
    free_parts(cache);
    free(cache);
}

mh_kv_cache_config mh_kv_cache_config_default(void) {
    return (mh_kv_cache_config){.max_seqs = 1, .capacity = 0, .dtype = MH_DTYPE_F32, .block_size = 0, .n_blocks = 0};
}

/* Empties sequence seq (valid), its blocks back to the pool. */
static void empty_seq(mh_kv_cache* c, int seq) {
    if (c->paged) mh_kv_pool_drop(&c->pool, seq, c->len[seq]);
    c->len[seq] = 0;
}

void mh_kv_cache_reset(mh_kv_cache* cache) {
    if (!mh_kv_cache_valid(cache)) return;
    for (int s = 0; s < cache->max_seqs; s++) empty_seq(cache, s);
}

int mh_kv_cache_length(const mh_kv_cache* cache) {
    if (!mh_kv_cache_valid(cache)) return 0;
    int longest = 0;
    for (int s = 0; s < cache->max_seqs; s++) longest = cache->len[s] > longest ? cache->len[s] : longest;
    return longest;
}

int mh_kv_cache_capacity(const mh_kv_cache* cache) { return mh_kv_cache_valid(cache) ? cache->capacity : 0; }

size_t mh_kv_cache_bytes_per_token(const mh_kv_cache* c) {
    if (!mh_kv_cache_valid(c)) return 0;
    const mh_cache_layout* l = &c->layout;
    const size_t kv = (size_t)l->k_heads * (size_t)l->k_dim + (size_t)l->v_heads * (size_t)l->v_dim;
    const size_t scales = c->dtype == MH_DTYPE_I8 ? (size_t)(l->k_heads + l->v_heads) * sizeof(float) : 0;
    return kv * mh_dtype_size(c->dtype) + scales + (size_t)l->aux_dim * sizeof(float);
}

static int seq_ok(const mh_kv_cache* c, int seq) { return mh_kv_cache_valid(c) && seq >= 0 && seq < c->max_seqs; }

mh_status mh_kv_cache_seq_length(const mh_kv_cache* cache, int seq, int* length) {
    if (!seq_ok(cache, seq) || !length) return MH_ERR_INVALID_ARGUMENT;
    *length = cache->len[seq];
    return MH_OK;
}

mh_status mh_kv_cache_seq_reset(mh_kv_cache* cache, int seq) {
    if (!seq_ok(cache, seq)) return MH_ERR_INVALID_ARGUMENT;
    empty_seq(cache, seq);
    return MH_OK;
}

int mh_kv_cache_free_blocks(const mh_kv_cache* cache) {
    return mh_kv_cache_valid(cache) && cache->paged ? cache->pool.n_free : 0;
}

int mh_kv_cache_seq_len(const mh_kv_cache* c, int seq) { return c->len[seq]; }

/* One tensor (K or V) of the cache: storage, its element strides and, for int8, its scales. */
typedef struct tensor_at {
    void* base;
    float* scale; /* [heads][n_store][bt], or NULL */
    int heads, dim;
    ptrdiff_t stride_head, stride_block;
} tensor_at;

static tensor_at tensor_k(const mh_kv_cache* c) {
    return (tensor_at){c->k, c->k_scale, c->layout.k_heads, c->layout.k_dim, c->k_stride_head, c->k_stride_block};
}

static tensor_at tensor_v(const mh_kv_cache* c) {
    return (tensor_at){c->v, c->v_scale, c->layout.v_heads, c->layout.v_dim, c->v_stride_head, c->v_stride_block};
}

static unsigned char* row_at(const mh_kv_cache* c, const tensor_at* x, size_t blk, size_t h, size_t row) {
    const size_t idx = blk * (size_t)x->stride_block + h * (size_t)x->stride_head + row * (size_t)x->dim;
    return (unsigned char*)x->base + idx * mh_dtype_size(c->dtype);
}

static float* scale_at(const mh_kv_cache* c, const tensor_at* x, size_t blk, size_t h, size_t row) {
    return x->scale ? x->scale + (h * (size_t)c->n_store + blk) * (size_t)c->bt + row : NULL;
}

/* Copies storage block `from` to `to` (copy on write). */
static void copy_block(const mh_kv_cache* c, const tensor_at* x, size_t from, size_t to) {
    for (size_t h = 0; h < (size_t)x->heads; h++) {
        memcpy(row_at(c, x, to, h, 0), row_at(c, x, from, h, 0), (size_t)x->stride_block * mh_dtype_size(c->dtype));
        if (x->scale) memcpy(scale_at(c, x, to, h, 0), scale_at(c, x, from, h, 0), (size_t)c->bt * sizeof(float));
    }
}

/* Copies tokens [0, n) of contiguous sequence `from` to `to`. */
static void copy_tokens(const mh_kv_cache* c, const tensor_at* x, size_t from, size_t to, size_t n) {
    for (size_t h = 0; h < (size_t)x->heads; h++) {
        memcpy(row_at(c, x, to, h, 0), row_at(c, x, from, h, 0), n * (size_t)x->dim * mh_dtype_size(c->dtype));
        if (x->scale) memcpy(scale_at(c, x, to, h, 0), scale_at(c, x, from, h, 0), n * sizeof(float));
    }
}

mh_status mh_kv_cache_seq_fork(mh_kv_cache* c, int src, int dst) {
    if (!seq_ok(c, src) || !seq_ok(c, dst) || src == dst || c->len[dst] != 0)
        return MH_ERR_INVALID_ARGUMENT;
    const int n = c->len[src];
    if (c->paged) {
        mh_kv_pool_share(&c->pool, src, dst, n);
    } else {
        const tensor_at kt = tensor_k(c), vt = tensor_v(c);
        copy_tokens(c, &kt, (size_t)src, (size_t)dst, (size_t)n);
        copy_tokens(c, &vt, (size_t)src, (size_t)dst, (size_t)n);
        const size_t w = (size_t)c->capacity * (size_t)c->layout.aux_dim; /* in the variant's tiling */
        if (c->aux) memcpy(c->aux + (size_t)dst * w, c->aux + (size_t)src * w, w * sizeof(float));
    }
    c->len[dst] = n;
    return MH_OK;
}

/* ---- decode calls ---- */

/* The ids must name distinct sequences of the cache (marks in c->named, cleared again). */
static int ids_ok(mh_kv_cache* c, const mh_kv_seqs* s) {
    int ok = 1, b = 0;
    for (; b < s->batch && ok; b++) {
        const int id = mh_kv_seq_id(s, b);
        ok = id >= 0 && id < c->max_seqs && !c->named[id];
        if (ok) c->named[id] = 1;
    }
    for (int i = 0; i < b - !ok; i++) c->named[mh_kv_seq_id(s, i)] = 0;
    return ok;
}

mh_status mh_kv_cache_check(mh_kv_cache* c, const mh_cache_layout* layout, const mh_kv_seqs* s) {
    if (s->batch > c->max_seqs || memcmp(layout, &c->layout, sizeof *layout) != 0) return MH_ERR_SHAPE_MISMATCH;
    if (!ids_ok(c, s)) return MH_ERR_INVALID_ARGUMENT;
    for (int b = 0; b < s->batch; b++) {
        const int n = mh_kv_seq_count(s, b);
        if (n < 1 || n > s->n) return MH_ERR_INVALID_ARGUMENT;
    }
    for (int b = 0; b < s->batch; b++)
        if ((int64_t)c->len[mh_kv_seq_id(s, b)] + mh_kv_seq_count(s, b) > c->capacity) return MH_ERR_CACHE_FULL;
    if (c->paged && mh_kv_pool_need(&c->pool, s, c->len) > c->pool.n_free) return MH_ERR_CACHE_FULL;
    return MH_OK;
}

void mh_kv_cache_reserve(mh_kv_cache* c, const mh_kv_seqs* s) {
    if (!c->paged) return;
    const tensor_at kt = tensor_k(c), vt = tensor_v(c);
    for (int b = 0; b < s->batch; b++) {
        const int seq = mh_kv_seq_id(s, b);
        int32_t from, to;
        if (mh_kv_pool_grow(&c->pool, seq, c->len[seq], mh_kv_seq_count(s, b), &from, &to)) {
            copy_block(c, &kt, (size_t)from, (size_t)to);
            copy_block(c, &vt, (size_t)from, (size_t)to);
        }
    }
}

void mh_kv_cache_advance(mh_kv_cache* c, const mh_kv_seqs* s) {
    for (int b = 0; b < s->batch; b++) c->len[mh_kv_seq_id(s, b)] += mh_kv_seq_count(s, b);
}

int mh_kv_cache_uniform(const mh_kv_cache* c, const mh_kv_seqs* s) {
    for (int b = 0; b < s->batch; b++)
        if (mh_kv_seq_id(s, b) != b || mh_kv_seq_count(s, b) != s->n || c->len[b] != c->len[0]) return 0;
    return 1;
}

int mh_kv_cache_positions(const mh_kv_cache* c, const mh_kv_seqs* s, int32_t* kv_len, int64_t* q_pos) {
    int longest = 0;
    for (int b = 0; b < s->batch; b++) {
        const int len = c->len[mh_kv_seq_id(s, b)], n = mh_kv_seq_count(s, b);
        kv_len[b] = len + n;
        longest = kv_len[b] > longest ? kv_len[b] : longest;
        for (int i = 0; q_pos && i < s->n; i++) q_pos[(size_t)b * (size_t)s->n + (size_t)i] = len + (i < n ? i : n - 1);
    }
    return longest;
}

/* Storage block and row of token pos of sequence seq. */
static void locate(const mh_kv_cache* c, int seq, int pos, size_t* blk, size_t* row) {
    const mh_kv_pool* p = &c->pool;
    int64_t b, r;
    mh_kv_pages_find(c->paged ? p->table : NULL, p->per_seq, p->block_size, seq, pos, &b, &r);
    *blk = (size_t)b, *row = (size_t)r;
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

static void write_tensor(const mh_kv_cache* c, const mh_kernels* k, const mh_kv_seqs* s, const float* rows,
                         const tensor_at* x) {
    const size_t width = (size_t)x->heads * (size_t)x->dim;
    for (int b = 0; b < s->batch; b++) {
        const int seq = mh_kv_seq_id(s, b);
        for (int t = 0; t < mh_kv_seq_count(s, b); t++) {
            size_t blk, row;
            locate(c, seq, c->len[seq] + t, &blk, &row);
            const float* src = rows + ((size_t)b * (size_t)s->n + (size_t)t) * width;
            for (size_t h = 0; h < (size_t)x->heads; h++)
                store_row(k, c->dtype, row_at(c, x, blk, h, row), scale_at(c, x, blk, h, row), src + h * (size_t)x->dim,
                          (size_t)x->dim);
        }
    }
}

void mh_kv_cache_write(mh_kv_cache* c, const mh_kernels* k, const mh_kv_seqs* s, const float* k_rows,
                       const float* v_rows) {
    const tensor_at kt = tensor_k(c), vt = tensor_v(c);
    write_tensor(c, k, s, k_rows, &kt);
    write_tensor(c, k, s, v_rows, &vt);
}

void mh_kv_cache_write_aux(mh_kv_cache* c, const mh_kv_seqs* s, const float* aux_rows) {
    const size_t w = (size_t)c->layout.aux_dim;
    for (int b = 0; b < s->batch; b++) {
        const int seq = mh_kv_seq_id(s, b);
        memcpy(c->aux + ((size_t)seq * (size_t)c->capacity + (size_t)c->len[seq]) * w,
               aux_rows + (size_t)b * (size_t)s->n * w, (size_t)mh_kv_seq_count(s, b) * w * sizeof(float));
    }
}

/* The core's view of one tensor: [heads][n_store][bt][dim] rows, scales [heads][n_store][bt]
 * (the view's batch index is the storage block). */
static mh_tensor view_of(const mh_kv_cache* c, const tensor_at* x) {
    const ptrdiff_t bt = c->bt;
    return (mh_tensor){.data = x->base,
                       .stride_batch = x->stride_block,
                       .stride_token = x->dim,
                       .stride_head = x->stride_head,
                       .scale = x->scale,
                       .scale_stride_batch = x->scale ? bt : 0,
                       .scale_stride_token = x->scale ? 1 : 0,
                       .scale_stride_head = x->scale ? bt * c->n_store : 0};
}

const mh_kv_pages* mh_kv_cache_views(const mh_kv_cache* c, const mh_kv_seqs* s, mh_tensor* k, mh_tensor* v,
                                     mh_kv_pages* pages) {
    const tensor_at kt = tensor_k(c), vt = tensor_v(c);
    *k = view_of(c, &kt);
    *v = view_of(c, &vt);
    if (!c->paged && !s->ids) return NULL;
    *pages = (mh_kv_pages){s->ids, c->paged ? c->pool.table : NULL, c->pool.per_seq, c->pool.block_size};
    return pages;
}

float* mh_kv_cache_aux(const mh_kv_cache* c, ptrdiff_t* stride_batch) {
    *stride_batch = (ptrdiff_t)c->capacity * c->layout.aux_dim;
    return c->aux;
}

mh_dtype mh_kv_cache_dtype(const mh_kv_cache* c) { return c->dtype; }
