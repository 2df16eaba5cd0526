/* The score step between Q.K^T and the softmax: soft-cap, ALiBi, additive mask, and dropping
 * keys outside the causal/window range (set to -INFINITY). The order is the one documented in
 * multihead.h. */
#ifndef MH_CORE_SCORE_H
#define MH_CORE_SCORE_H
#include <stddef.h>
#include <stdint.h>

#include "multihead.h"

/* One query block: n_heads_blk consecutive heads x rows_per_head consecutive queries. Rows of
 * the score tile are ordered head-major: r = hh * rows_per_head + ii. */
typedef struct mh_score_block {
    size_t rows_per_head;
    size_t n_heads_blk;
    int64_t p_first;          /* position of query ii = 0 */
    int causal;
    int window;
    float softcap;
    const float* alibi;       /* slopes of the block's first head, or NULL */
    const float* mask;        /* mask at (b, first head, first query, key 0), or NULL */
    ptrdiff_t mask_stride_head;
    ptrdiff_t mask_stride_row;
    const int64_t* pos;       /* [rows_per_head] non-decreasing positions of the queries (they
                                 replace p_first + ii), or NULL */
} mh_score_block;

/* Position of query 0 of sequence b in a call of n_q queries over n_kv keys, counted in the
 * view's key index: key j of the view sits at absolute position kv_offset + j, so every
 * position of the score step (causal, window, ALiBi distances) is absolute minus kv_offset,
 * which leaves their differences exact. multihead.h: q_offset - kv_offset, or kv_len[b] - n_q
 * with MH_Q_OFFSET_END (kv_len NULL meaning n_kv); negative when the queries precede the view. */
static inline int64_t mh_score_first_query(const mh_attn_options* opt, int b, int64_t n_q, int64_t n_kv) {
    const int64_t kv_len = opt->kv_len ? opt->kv_len[b] : n_kv;
    return opt->q_offset == MH_Q_OFFSET_END ? kv_len - n_q : opt->q_offset - opt->kv_offset;
}

/* Position of query ii of the block. */
static inline int64_t mh_score_pos(const mh_score_block* blk, size_t ii) {
    return blk->pos ? blk->pos[ii] : blk->p_first + (int64_t)ii;
}

/* Applies the score step to s[r * lds + c] for keys j0 .. j0 + cols - 1 of rows [r0, r1) of
 * the block (s is the block's row 0). */
void mh_score_rows(const mh_score_block* blk, float* s, size_t lds, int64_t j0, size_t cols, size_t r0, size_t r1);

/* 1 if the score step only drops keys (causal, window): no soft-cap, ALiBi or mask, so a
 * dropped key's score is never read. */
static inline int mh_score_only_drops(const mh_score_block* blk) {
    return blk->softcap <= 0.0f && !blk->alibi && !blk->mask;
}

/* 1 if some key in [j0, j0 + cols) may be dropped by causal/window for some row of the block;
 * 0 means the whole tile is inside the allowed band and per-element masking can be skipped. */
int mh_score_tile_partial(const mh_score_block* blk, int64_t j0, size_t cols);

/* 1 if causality drops every key >= j0 for every row r0 .. r0 + m - 1 of the block: their
 * scores in a tile starting at j0 are all -inf, their probabilities 0 and their rescale 1, so
 * the tile's GEMMs may skip those rows exactly. */
int mh_score_rows_dropped(const mh_score_block* blk, size_t r0, size_t m, int64_t j0);

/* How many leading columns of a tile starting at key j0 (cols wide) row r of the block may
 * keep: the keys after them are dropped by causality (or a non-causal window). */
static inline size_t mh_score_row_cols(const mh_score_block* blk, size_t r, int64_t j0, size_t cols) {
    const int64_t p = mh_score_pos(blk, r % blk->rows_per_head);
    int64_t hi = (int64_t)cols;
    if (blk->causal && p + 1 - j0 < hi) hi = p + 1 - j0;
    if (blk->window > 0 && !blk->causal && p + blk->window - j0 < hi) hi = p + blk->window - j0;
    return hi < 0 ? 0 : (size_t)hi;
}

/* The first column of a tile starting at key j0 (cols wide) row r of the block may keep: the
 * keys before it are dropped by its window (cols if it drops them all). */
static inline size_t mh_score_row_first(const mh_score_block* blk, size_t r, int64_t j0, size_t cols) {
    if (blk->window <= 0) return 0;
    const int64_t lo = mh_score_pos(blk, r % blk->rows_per_head) - blk->window + 1 - j0;
    return lo <= 0 ? 0 : lo >= (int64_t)cols ? cols : (size_t)lo;
}

/* The keys [*j_begin, *j_end) any row of the block may keep (causal, window, and kv_len keys
 * in the sequence), before per-element masking. */
void mh_score_key_range(const mh_score_block* blk, int64_t kv_len, int64_t* j_begin, int64_t* j_end);

#endif
