#include "seq_fixture.h"

#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "layer_fixture.h"

void seq_set_make(seq_set* s, int n, const int* len, int d_model, test_rng* r) {
    memset(s, 0, sizeof *s);
    s->n_seqs = n, s->d_model = d_model;
    for (int i = 0; i < n; i++) {
        s->len[i] = len[i];
        s->x[i] = malloc(sizeof(float) * (size_t)len[i] * (size_t)d_model);
        rng_fill(r, s->x[i], (size_t)len[i] * (size_t)d_model, -1, 1);
    }
}

void seq_set_free(seq_set* s) {
    for (int i = 0; i < s->n_seqs; i++) free(s->x[i]);
    memset(s, 0, sizeof *s);
}

void seq_outputs(const seq_set* s, float** y) {
    for (int i = 0; i < s->n_seqs; i++) y[i] = malloc(sizeof(float) * (size_t)s->len[i] * (size_t)s->d_model);
}

void seq_outputs_free(const seq_set* s, float** y) {
    for (int i = 0; i < s->n_seqs; i++) free(y[i]), y[i] = NULL;
}

void seq_forward(const mh_layer* L, const seq_set* s, float** y) {
    mh_attn_options opt = mh_attn_options_default();
    opt.causal = 1;
    for (int i = 0; i < s->n_seqs; i++) {
        mh_forward_args a = {.batch = 1, .n_q = s->len[i], .query = s->x[i], .out = y[i], .opt = &opt};
        check_status("per-sequence forward", run_forward(L, &a), MH_OK);
    }
}

static void* ws_for(const mh_layer* L, int batch, int n_new, size_t* bytes) {
    if (mh_layer_decode_workspace_size(L, batch, n_new, bytes) != MH_OK) return NULL;
    return aligned_alloc(64, (*bytes + 63) / 64 * 64 + 64);
}

static mh_status call_in(const mh_layer* L, mh_kv_cache* cache, int batch, int n_new, const int32_t* ids,
                         const int32_t* cnt, const float* x, float* out, void* ws, size_t bytes) {
    const mh_decode_args a = {.batch = batch, .n_new = n_new, .x = x, .out = out, .seq_ids = ids, .n_new_seq = cnt};
    return ws ? mh_layer_decode(L, cache, &a, ws, bytes) : MH_ERR_INVALID_ARGUMENT;
}

mh_status seq_call(const mh_layer* L, mh_kv_cache* cache, int batch, int n_new, const int32_t* ids,
                   const int32_t* cnt, const float* x, float* out) {
    size_t bytes = 0;
    void* ws = ws_for(L, batch, n_new, &bytes);
    const mh_status st = call_in(L, cache, batch, n_new, ids, cnt, x, out, ws, bytes);
    free(ws);
    return st;
}

mh_status seq_decode(const mh_layer* L, mh_kv_cache* cache, const seq_set* s, int n_new, int max_batch,
                     uint64_t seed, float** y) {
    const size_t d = (size_t)s->d_model;
    test_rng r;
    rng_seed(&r, seed);
    int at[SEQ_MAX];
    for (int i = 0; i < s->n_seqs; i++) mh_kv_cache_seq_length(cache, i, &at[i]);
    float* x = malloc(sizeof(float) * SEQ_MAX * (size_t)n_new * d);
    float* out = malloc(sizeof(float) * SEQ_MAX * (size_t)n_new * d);
    size_t bytes = 0; /* one workspace of the bound for (max_batch, n_new) serves every call */
    void* ws = ws_for(L, max_batch, n_new, &bytes);
    mh_status st = MH_OK;
    for (;;) {
        int32_t ids[SEQ_MAX], cnt[SEQ_MAX], order[SEQ_MAX];
        int open = 0, batch = 0;
        for (int i = 0; i < s->n_seqs; i++)
            if (at[i] < s->len[i]) order[open++] = i;
        if (open == 0 || st != MH_OK) break;
        for (int i = open - 1; i > 0; i--) { /* a random order */
            const int j = rng_int(&r, 0, i), t = order[i];
            order[i] = order[j], order[j] = t;
        }
        for (int k = 0; k < open && batch < max_batch; k++) /* a random subset, never empty */
            if (batch == 0 || rng_int(&r, 0, 3) > 0) ids[batch++] = order[k];
        size_t rows = 0;
        for (int b = 0; b < batch; b++) {
            const int i = ids[b], left = s->len[i] - at[i];
            cnt[b] = rng_int(&r, 1, n_new < left ? n_new : left);
            memcpy(x + rows * d, s->x[i] + (size_t)at[i] * d, sizeof(float) * (size_t)cnt[b] * d);
            rows += (size_t)cnt[b];
        }
        const size_t cap = SEQ_MAX * (size_t)n_new * d;
        memset(out, 0x5a, sizeof(float) * cap);
        st = call_in(L, cache, batch, n_new, ids, cnt, x, out, ws, bytes);
        check_true("ragged decode writes no row past its packed rows",
                   all_bytes(out + rows * d, sizeof(float) * (cap - rows * d), 0x5a));
        rows = 0;
        for (int b = 0; b < batch && st == MH_OK; b++) {
            const int i = ids[b];
            memcpy(y[i] + (size_t)at[i] * d, out + rows * d, sizeof(float) * (size_t)cnt[b] * d);
            rows += (size_t)cnt[b], at[i] += cnt[b];
        }
    }
    free(x), free(out), free(ws);
    return st;
}

mh_kv_cache* seq_cache(const mh_layer* L, int max_seqs, int capacity, mh_dtype dt, int block_size, int n_blocks) {
    mh_kv_cache_config c = mh_kv_cache_config_default();
    c.max_seqs = max_seqs, c.capacity = capacity, c.dtype = dt, c.block_size = block_size, c.n_blocks = n_blocks;
    mh_kv_cache* cache = NULL;
    check_status("create cache", mh_kv_cache_create_ex(L, &c, &cache), MH_OK);
    return cache;
}
