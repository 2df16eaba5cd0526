/*
 * The block pool of a paged KV cache (core/kv_cache.c owns the storage, this the bookkeeping):
 * n_blocks blocks of block_size tokens, a block table per sequence (room for ceil(capacity /
 * block_size) entries, made at create), a reference count per block (sequences whose table
 * holds it: fork shares blocks) and a stack of free blocks. A sequence of length len holds
 * exactly its first ceil(len / block_size) table entries. Nothing here allocates after init.
 */
#ifndef MH_CORE_KV_POOL_H
#define MH_CORE_KV_POOL_H
#include <stdint.h>

#include "core/kv_cache.h"

typedef struct mh_kv_pool {
    int block_size, n_blocks, per_seq; /* per_seq: table entries of one sequence */
    int n_free;
    int32_t* table;    /* [max_seqs][per_seq] */
    int32_t* refs;     /* [n_blocks] */
    int32_t* free_ids; /* [n_blocks] the free blocks, a stack of n_free */
    int32_t* pending;  /* [n_blocks] all zero between calls: mh_kv_pool_need's tally */
} mh_kv_pool;

/* Allocates the pool's arrays, every block free. MH_ERR_SIZE_OVERFLOW / MH_ERR_OUT_OF_MEMORY. */
mh_status mh_kv_pool_init(mh_kv_pool* p, int max_seqs, int capacity, int block_size, int n_blocks);
void mh_kv_pool_release_all(mh_kv_pool* p); /* frees the arrays */

/* Blocks the call's appends need from the free list: each sequence's blocks past the ones it
 * holds, plus a copy of each shared partial last block it appends to (when every holder of a
 * block appends, the last one keeps it). len [max_seqs] are the lengths before the call. */
int64_t mh_kv_pool_need(mh_kv_pool* p, const mh_kv_seqs* s, const int* len);

/* Sequence seq of length len gets the blocks for count more tokens. Returns 1 when its partial
 * last block was shared and replaced by a fresh one: the caller copies block *from into *to. */
int mh_kv_pool_grow(mh_kv_pool* p, int seq, int len, int count, int32_t* from, int32_t* to);

/* Sequence seq of length len gives its blocks back (a block returns to the free list when no
 * sequence holds it any more). */
void mh_kv_pool_drop(mh_kv_pool* p, int seq, int len);

/* Empty sequence dst shares the blocks of src (length len). */
void mh_kv_pool_share(mh_kv_pool* p, int src, int dst, int len);

#endif
