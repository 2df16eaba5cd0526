/*
 * Split-KV decode, for the attention driver (core/driver.c).
 *
 * A decode-shaped call (one query tile) cuts each task's key range into up to MH_SPLIT_MAX
 * chunks of at least MH_SPLIT_KEYS keys, so a single task can use every thread. Each chunk
 * leaves its online-softmax state (m, l and the unnormalised output of every row) in the
 * call's workspace; once all chunks are done, a task's chunks are merged in a fixed order.
 * The split depends only on the shapes, never on the thread count, so results are bitwise
 * identical for any number of workers.
 */
#ifndef MH_CORE_SPLIT_KV_H
#define MH_CORE_SPLIT_KV_H
#include <stddef.h>
#include <stdint.h>

#include "multihead.h"
#include "util/workspace.h"

#define MH_SPLIT_MAX 8
#define MH_SPLIT_KEYS 1024

/* The partial states of one call. */
typedef struct mh_split_kv {
    float* partials;    /* [tasks][MH_SPLIT_MAX][per_partial]: per chunk [m rows][l rows][acc rows x dv] */
    size_t rows, dv;    /* rows of every task (the call has one query tile), output width */
    size_t per_partial; /* rows * (dv + 2) */
    size_t n_split;     /* chunks per task this call uses (1: no split) */
} mh_split_kv;

/* Chunks per task: 1 unless the call has a single query tile and writes no probabilities (opt
 * may be NULL: no options). */
size_t mh_split_count(size_t n_query_tiles, const mh_attn_options* opt, int n_kv);

/* Carves (or measures) room for the partial states of `tasks` tasks at the most chunks, so
 * the workspace size does not depend on the key count; returns its start (NULL while
 * measuring). Only decode-shaped calls carve it. */
float* mh_split_take(mh_ws* ws, size_t tasks, size_t rows, size_t dv);

mh_split_kv mh_split_plan(float* partials, size_t rows, size_t dv, size_t n_split);

/* Keys [*lo, *hi) of chunk ci of a task whose keys are [j_begin, j_end): equal chunks rounded
 * up to whole kv tiles, the last ones shorter or empty (*lo == *hi). */
void mh_split_chunk(const mh_split_kv* s, size_t ci, int64_t j_begin, int64_t j_end, size_t kv_tile,
                    int64_t* lo, int64_t* hi);

/* Saves chunk ci of task ti: m [rows], l [rows], acc [rows][dv]. */
void mh_split_store(const mh_split_kv* s, size_t ti, size_t ci, const float* m, const float* l,
                    const float* acc);

/* Chunk ci of task ti: m [rows], l [rows], acc [rows][dv], for a driver that saves them apart. */
float* mh_split_partial(const mh_split_kv* s, size_t ti, size_t ci);

/* Floats between the partials of tasks ti and ti + 1 at the same chunk. */
static inline size_t mh_split_task_stride(const mh_split_kv* s) { return MH_SPLIT_MAX * s->per_partial; }

/* The one log-sum-exp merge of a row (the split chunks here, mh_attention_merge's parts):
 * folds a part's state (pm, pl, pacc [dv]) into the running (m, l, acc [dv]), where acc is
 * the row's output scaled by l * exp(m) / sum (unnormalised); a part with pm = -inf adds
 * nothing. The result over all parts is acc / l, its log-sum-exp m + log(l). */
void mh_lse_merge_row(float* m, float* l, float* acc, float pm, float pl, const float* pacc, size_t dv);

/* Merges task ti's chunks in order into its chunk 0 (log-sum-exp rescaling) and returns that
 * state: m at [0, rows), l at [rows, 2 rows), acc [rows][dv] after them. */
float* mh_split_merge(const mh_split_kv* s, size_t ti);

/* The softmax statistics alone: task ti's chunks' (m, l) merged in the same order into m, l
 * [rows]; the partials are only read, so every chunk's worker may call it at once (a driver
 * whose chunks need the whole row's statistics before their outputs, e.g. DCMHA). */
void mh_split_merge_stats(const mh_split_kv* s, size_t ti, float* m, float* l);

/* Folds a sink logit into a finished row's (m, l), m > -inf; returns the factor the row's
 * unnormalised output must be scaled by (1 unless the sink became the max). */
float mh_fold_sink(float* m, float* l, float sink);

#endif
