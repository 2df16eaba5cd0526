#include "core/kv_pool.h"

#include <string.h>

#include "util/alloc.h"
#include "util/checked.h"

static int32_t* alloc_i32(size_t n) {
    size_t bytes;
    return mh_mul_size(n, sizeof(int32_t), &bytes) ? mh_alloc(bytes) : NULL;
}

mh_status mh_kv_pool_init(mh_kv_pool* p, int max_seqs, int capacity, int block_size, int n_blocks) {
    memset(p, 0, sizeof *p);
    p->block_size = block_size, p->n_blocks = n_blocks, p->n_free = n_blocks;
    p->per_seq = (int)(((int64_t)capacity + block_size - 1) / block_size);
    size_t entries;
    if (!mh_mul3_size((size_t)max_seqs, (size_t)p->per_seq, sizeof(int32_t), &entries)) return MH_ERR_SIZE_OVERFLOW;
    entries = (size_t)max_seqs * (size_t)p->per_seq;
    p->table = alloc_i32(entries);
    p->refs = alloc_i32((size_t)n_blocks);
    p->free_ids = alloc_i32((size_t)n_blocks);
    p->pending = alloc_i32((size_t)n_blocks);
    if (!p->table || !p->refs || !p->free_ids || !p->pending) {
        mh_kv_pool_release_all(p);
        return MH_ERR_OUT_OF_MEMORY;
    }
    memset(p->refs, 0, (size_t)n_blocks * sizeof(int32_t));
    memset(p->pending, 0, (size_t)n_blocks * sizeof(int32_t));
    for (int i = 0; i < n_blocks; i++) p->free_ids[i] = n_blocks - 1 - i; /* block 0 is taken first */
    return MH_OK;
}

void mh_kv_pool_release_all(mh_kv_pool* p) {
    mh_free(p->table);
    mh_free(p->refs);
    mh_free(p->free_ids);
    mh_free(p->pending);
    memset(p, 0, sizeof *p);
}

static int32_t* table_of(const mh_kv_pool* p, int seq) { return p->table + (size_t)seq * (size_t)p->per_seq; }

static int held(const mh_kv_pool* p, int64_t len) { return (int)((len + p->block_size - 1) / p->block_size); }

/* The shared block sequence seq (length len) appends into, or -1 (none: empty, full last
 * block, or held by seq alone). */
static int32_t shared_tail(const mh_kv_pool* p, int seq, int len) {
    if (len % p->block_size == 0) return -1;
    const int32_t blk = table_of(p, seq)[len / p->block_size];
    return p->refs[blk] > 1 ? blk : -1;
}

int64_t mh_kv_pool_need(mh_kv_pool* p, const mh_kv_seqs* s, const int* len) {
    int64_t need = 0;
    for (int b = 0; b < s->batch; b++) {
        const int seq = mh_kv_seq_id(s, b), l = len[seq];
        need += held(p, (int64_t)l + mh_kv_seq_count(s, b)) - held(p, l);
        const int32_t blk = shared_tail(p, seq, l);
        if (blk >= 0) p->pending[blk]++;
    }
    for (int b = 0; b < s->batch; b++) { /* each shared block once: its appenders' copies */
        const int32_t blk = shared_tail(p, mh_kv_seq_id(s, b), len[mh_kv_seq_id(s, b)]);
        if (blk < 0 || p->pending[blk] == 0) continue;
        need += p->pending[blk] - (p->pending[blk] == p->refs[blk]);
        p->pending[blk] = 0;
    }
    return need;
}

static int32_t take(mh_kv_pool* p) {
    const int32_t blk = p->free_ids[--p->n_free];
    p->refs[blk] = 1;
    return blk;
}

int mh_kv_pool_grow(mh_kv_pool* p, int seq, int len, int count, int32_t* from, int32_t* to) {
    int32_t* t = table_of(p, seq);
    const int32_t shared = shared_tail(p, seq, len);
    if (shared >= 0) { /* copy on write: seq gets its own copy of the block it appends into */
        p->refs[shared]--;
        *from = shared;
        *to = t[len / p->block_size] = take(p);
    }
    for (int i = held(p, len); i < held(p, (int64_t)len + count); i++) t[i] = take(p);
    return shared >= 0;
}

void mh_kv_pool_drop(mh_kv_pool* p, int seq, int len) {
    const int32_t* t = table_of(p, seq);
    for (int i = 0; i < held(p, len); i++)
        if (--p->refs[t[i]] == 0) p->free_ids[p->n_free++] = t[i];
}

void mh_kv_pool_share(mh_kv_pool* p, int src, int dst, int len) {
    const int32_t* ts = table_of(p, src);
    int32_t* td = table_of(p, dst);
    for (int i = 0; i < held(p, len); i++) {
        td[i] = ts[i];
        p->refs[ts[i]]++;
    }
}
