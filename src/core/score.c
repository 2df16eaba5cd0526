#include "core/score.h"

#include <math.h>

int mh_score_tile_partial(const mh_score_block* blk, int64_t j0, size_t cols) {
    const int64_t j1 = j0 + (int64_t)cols - 1;
    const int64_t p0 = mh_score_pos(blk, 0), p1 = mh_score_pos(blk, blk->rows_per_head - 1);
    if (blk->causal && j1 > p0) return 1;
    if (blk->window > 0) {
        if (p1 - j0 >= blk->window) return 1;
        if (!blk->causal && j1 - p0 >= blk->window) return 1;
    }
    return 0;
}

int mh_score_rows_dropped(const mh_score_block* blk, size_t r0, size_t m, int64_t j0) {
    if (!blk->causal) return 0;
    /* the latest query among the rows (head-major: a run that crosses a head boundary
     * includes that head's last query) */
    const size_t nr = blk->rows_per_head, first = r0 % nr;
    const size_t last_ii = first + m > nr ? nr - 1 : first + m - 1;
    return mh_score_pos(blk, last_ii) < j0;
}

void mh_score_key_range(const mh_score_block* blk, int64_t kv_len, int64_t* j_begin, int64_t* j_end) {
    const int64_t p_first = mh_score_pos(blk, 0), p_last = mh_score_pos(blk, blk->rows_per_head - 1);
    int64_t jb = 0, je = kv_len;
    if (blk->causal && p_last + 1 < je) je = p_last + 1;
    if (blk->window > 0) {
        if (p_first - blk->window + 1 > jb) jb = p_first - blk->window + 1;
        if (!blk->causal && p_last + blk->window < je) je = p_last + blk->window;
    }
    *j_begin = jb;
    *j_end = je;
}

/* x clamped to [0, hi]. */
static int64_t clamp_col(int64_t x, int64_t hi) { return x < 0 ? 0 : x > hi ? hi : x; }

void mh_score_rows(const mh_score_block* blk, float* s, size_t lds, int64_t j0, size_t cols, size_t r0, size_t r1) {
    const int partial = mh_score_tile_partial(blk, j0, cols);
    const float cap = blk->softcap;
    if (mh_score_only_drops(blk) && !partial) return; /* nothing to do: the common inside tile */
    size_t hh = r0 / blk->rows_per_head, ii = r0 % blk->rows_per_head; /* row r's head and query */
    for (size_t r = r0; r < r1; r++, ii++) {
        if (ii == blk->rows_per_head) ii = 0, hh++;
        float* row = s + r * lds;
        const int64_t p = mh_score_pos(blk, ii);
        if (cap > 0.0f)
            for (size_t c = 0; c < cols; c++) row[c] = cap * tanhf(row[c] / cap);
        if (blk->alibi)
            for (size_t c = 0; c < cols; c++) row[c] += blk->alibi[hh] * (float)(j0 + (int64_t)c - p);
        if (blk->mask) {
            const float* mrow = blk->mask + (ptrdiff_t)hh * blk->mask_stride_head + (ptrdiff_t)ii * blk->mask_stride_row + j0;
            for (size_t c = 0; c < cols; c++) row[c] += mrow[c];
        }
        if (!partial) continue;
        /* the kept keys of the row are one interval [lo, hi) of columns */
        int64_t lo = 0, hi = (int64_t)cols;
        if (blk->causal) hi = clamp_col(p + 1 - j0, hi);
        if (blk->window > 0) {
            lo = clamp_col(p - blk->window + 1 - j0, (int64_t)cols);
            if (!blk->causal) hi = clamp_col(p + blk->window - j0, hi);
        }
        if (hi < lo) hi = lo;
        for (int64_t c = 0; c < lo; c++) row[c] = -INFINITY;
        for (int64_t c = hi; c < (int64_t)cols; c++) row[c] = -INFINITY;
    }
}
