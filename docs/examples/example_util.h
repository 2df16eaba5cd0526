/*
 * What the example programs share: seeded numbers, the pass/fail lines, the comparison of two
 * outputs, and layer calls with a workspace of their own size. Header-only (static inline),
 * so an example is its .c file plus this header, in-tree or built standalone.
 */
#ifndef MH_EXAMPLE_UTIL_H
#define MH_EXAMPLE_UTIL_H

#include <math.h>
#include <multihead.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Deterministic uniform numbers in [-amp, amp) (64-bit LCG); each example seeds it. */
static uint64_t example_rng_state;
static inline void seed(uint64_t s) { example_rng_state = s; }
static inline float uniform(float amp) {
    example_rng_state = example_rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return amp * ((float)(example_rng_state >> 40) / (float)(1 << 24) * 2.0f - 1.0f);
}
static inline void fill(float* x, size_t n, float amp) {
    for (size_t i = 0; i < n; i++) x[i] = uniform(amp);
}

/* One "ok  :" or "FAIL:" line per check; main returns failures ? 1 : 0. */
static int failures;
static inline void check(int ok, const char* what) {
    printf("%s: %s\n", ok ? "ok  " : "FAIL", what);
    failures += !ok;
}

/* max |a - b| over n values (a NaN difference gives INFINITY) and max |b|. */
static inline void compare(const float* a, const float* b, size_t n, float* max_diff, float* max_ref) {
    *max_diff = 0, *max_ref = 0;
    for (size_t i = 0; i < n; i++) {
        const float d = fabsf(a[i] - b[i]);
        if (!(d <= *max_diff)) *max_diff = isnan(d) ? INFINITY : d;
        if (fabsf(b[i]) > *max_ref) *max_ref = fabsf(b[i]);
    }
}

/* mh_layer_forward with a workspace of the size the library asks for. */
static inline mh_status forward_args(const mh_layer* layer, const mh_forward_args* a) {
    size_t bytes;
    const int n_kv = a->key ? a->n_kv : a->n_q;
    mh_status st = mh_layer_forward_workspace_size(layer, a->batch, a->n_q, n_kv, &bytes);
    if (st != MH_OK) return st;
    void* ws = aligned_alloc(64, (bytes + 63) / 64 * 64);
    st = ws ? mh_layer_forward(layer, a, ws, bytes) : MH_ERR_OUT_OF_MEMORY;
    free(ws);
    return st;
}

/* Causal self-attention over one sequence of n tokens: x, y [n, d_model]. */
static inline mh_status causal_forward(const mh_layer* layer, int n, const float* x, float* y) {
    mh_attn_options opt = mh_attn_options_default();
    opt.causal = 1;
    const mh_forward_args a = {.batch = 1, .n_q = n, .query = x, .out = y, .opt = &opt};
    return forward_args(layer, &a);
}

/* One sequence through a fresh f32 KV cache of n tokens: the first `prompt` tokens in one
 * mh_layer_decode call, then one token per call. x, y [n, d_model]; *per_token gets the cache's
 * bytes per token. The workspace covers every n_new used (prompt and 1: the size for one n_new
 * does not bound the others'). */
static inline mh_status decode_all(const mh_layer* layer, int n, int prompt, int d_model,
                                   const float* x, float* y, size_t* per_token) {
    mh_kv_cache* cache;
    mh_status st = mh_kv_cache_create(layer, 1, n, MH_DTYPE_F32, &cache);
    if (st != MH_OK) return st;
    *per_token = mh_kv_cache_bytes_per_token(cache);
    size_t a = 0, b = 0;
    mh_layer_decode_workspace_size(layer, 1, prompt, &a);
    mh_layer_decode_workspace_size(layer, 1, 1, &b);
    const size_t bytes = a > b ? a : b;
    void* ws = aligned_alloc(64, (bytes + 63) / 64 * 64);
    st = ws ? MH_OK : MH_ERR_OUT_OF_MEMORY;
    for (int t = 0; t < n && st == MH_OK;) {
        const int step = t == 0 ? prompt : 1;
        const mh_decode_args d = {.batch = 1, .n_new = step, .x = x + (size_t)t * d_model, .out = y + (size_t)t * d_model};
        st = mh_layer_decode(layer, cache, &d, ws, bytes);
        t += step;
    }
    free(ws);
    mh_kv_cache_destroy(cache);
    return st;
}

#endif /* MH_EXAMPLE_UTIL_H */
