/*
 * Where the driver finds a sequence's K/V rows in a KV cache (core/kv_cache.c makes it,
 * mh_drv_rows in core/driver_rows.c reads it). A cache's storage is blocks of tokens of every
 * head (stored [head][block][token][dim]: the K/V view's stride_batch steps blocks,
 * stride_head heads, stride_token tokens): a contiguous cache has one block of
 * `capacity` tokens per sequence (block s = sequence s), a paged cache a pool of blocks of
 * block_size tokens and a block table per sequence.
 *
 * Batch row b of a call reads sequence seq[b]; its key j is row j % block_size of block
 * table[seq[b] * per_seq + j / block_size] (paged), or row j of block seq[b] (contiguous).
 * A paged cache's block_size is a multiple of the key tile (attn_kv_tile) and a decode's tiles
 * start on multiples of it (no sliding window: see mh_kv_cache_create_ex), so such a tile lies
 * in one block; a grouped decode's wider tile (attn_group_kv_tile) is packed a block's piece at
 * a time (mh_drv_block_keys), or read in runs of attn_kv_tile keys (driver_call.h).
 */
#ifndef MH_CORE_KV_PAGES_H
#define MH_CORE_KV_PAGES_H
#include <stddef.h>
#include <stdint.h>

typedef struct mh_kv_pages {
    const int32_t* seq;   /* [B] the cache sequence of batch row b, or NULL: sequence b */
    const int32_t* table; /* [sequences][per_seq] pool blocks of each sequence, or NULL: contiguous */
    ptrdiff_t per_seq;    /* table entries per sequence */
    int64_t block_size;   /* tokens per block (paged) */
} mh_kv_pages;

/* Storage block and row of key j of sequence s: row j % block_size of block
 * table[s * per_seq + j / block_size] (table not NULL: paged), else row j of block s. */
static inline void mh_kv_pages_find(const int32_t* table, ptrdiff_t per_seq, int64_t block_size, int64_t s,
                                    int64_t j, int64_t* blk, int64_t* row) {
    if (table) {
        *blk = table[s * per_seq + j / block_size], *row = j % block_size;
    } else {
        *blk = s, *row = j;
    }
}

#endif
