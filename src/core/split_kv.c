#include "core/split_kv.h"

#include <math.h>
#include <string.h>

size_t mh_split_count(size_t n_query_tiles, const mh_attn_options* opt, int n_kv) {
    if (n_query_tiles != 1 || (opt && opt->probs)) return 1;
    const size_t n = (size_t)n_kv / MH_SPLIT_KEYS;
    return n < 1 ? 1 : n > MH_SPLIT_MAX ? MH_SPLIT_MAX : n;
}

float* mh_split_take(mh_ws* ws, size_t tasks, size_t rows, size_t dv) {
    return mh_ws_take(ws, tasks * MH_SPLIT_MAX, rows * (dv + 2), sizeof(float));
}

mh_split_kv mh_split_plan(float* partials, size_t rows, size_t dv, size_t n_split) {
    mh_split_kv s = {partials, rows, dv, rows * (dv + 2), n_split};
    return s;
}

void mh_split_chunk(const mh_split_kv* s, size_t ci, int64_t j_begin, int64_t j_end, size_t kv_tile,
                    int64_t* lo, int64_t* hi) {
    const int64_t span = j_end > j_begin ? j_end - j_begin : 0;
    const int64_t tk = (int64_t)kv_tile, n_split = (int64_t)s->n_split;
    const int64_t chunk = ((span + n_split - 1) / n_split + tk - 1) / tk * tk;
    const int64_t l = j_begin + (int64_t)ci * chunk;
    const int64_t h = l + chunk < j_end ? l + chunk : j_end;
    *lo = l;
    *hi = h > l ? h : l;
}

float* mh_split_partial(const mh_split_kv* s, size_t ti, size_t ci) {
    return s->partials + (ti * MH_SPLIT_MAX + ci) * s->per_partial;
}

/* Folds a chunk's (pm, pl) into the running (m, l) of one row; *a and *b are the factors the
 * running and the chunk's accumulators take (a = 0 when m was -inf). 0 when the chunk kept
 * nothing (pm = -inf). */
static int combine(float* m, float* l, float pm, float pl, float* a, float* b) {
    if (pm == -INFINITY) return 0;
    const float mx = *m >= pm ? *m : pm; /* a NaN chunk max propagates */
    *a = expf(*m - mx), *b = expf(pm - mx);
    *l = *l * *a + pl * *b;
    *m = mx;
    return 1;
}

void mh_lse_merge_row(float* m, float* l, float* acc, float pm, float pl, const float* pacc, size_t dv) {
    float a, b;
    if (combine(m, l, pm, pl, &a, &b))
        for (size_t d = 0; d < dv; d++) acc[d] = acc[d] * a + pacc[d] * b;
}

void mh_split_store(const mh_split_kv* s, size_t ti, size_t ci, const float* m, const float* l,
                    const float* acc) {
    float* part = mh_split_partial(s, ti, ci);
    memcpy(part, m, s->rows * sizeof(float));
    memcpy(part + s->rows, l, s->rows * sizeof(float));
    memcpy(part + 2 * s->rows, acc, s->rows * s->dv * sizeof(float));
}

float* mh_split_merge(const mh_split_kv* s, size_t ti) {
    const size_t rows = s->rows, dv = s->dv;
    float* base = mh_split_partial(s, ti, 0);
    float *m = base, *l = base + rows, *acc = base + 2 * rows;
    for (size_t ci = 1; ci < s->n_split; ci++) {
        const float* pm = base + ci * s->per_partial;
        const float *pl = pm + rows, *pacc = pm + 2 * rows;
        for (size_t r = 0; r < rows; r++) mh_lse_merge_row(&m[r], &l[r], acc + r * dv, pm[r], pl[r], pacc + r * dv, dv);
    }
    return base;
}

void mh_split_merge_stats(const mh_split_kv* s, size_t ti, float* m, float* l) {
    for (size_t r = 0; r < s->rows; r++) m[r] = -INFINITY, l[r] = 0.0f;
    for (size_t ci = 0; ci < s->n_split; ci++) {
        const float* pm = mh_split_partial(s, ti, ci);
        float a, b;
        for (size_t r = 0; r < s->rows; r++) combine(&m[r], &l[r], pm[r], pm[s->rows + r], &a, &b);
    }
}

float mh_fold_sink(float* m, float* l, float sink) {
    float a = 1.0f;
    if (sink > *m) { /* the sink becomes the max: rescale */
        a = expf(*m - sink);
        *l *= a;
        *m = sink;
    }
    *l += expf(sink - *m);
    return a;
}
