/*
 * The accuracy report's timings (accuracy.h): the trained model's attention layers alone, on
 * inputs of unit RMS (what the RMSNorm before each layer gives), since the rest of the model
 * (embedding, MLP, LM head) is the same for every variant and plain C loops here. The times are
 * the calling thread's CPU time: run with one thread (OMP_NUM_THREADS=1, as report.py does), so
 * that the layers run on this thread and a busy machine does not count its other jobs' time.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "accuracy.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { TIMING_REPS = 15, FILL_CHUNK = 256 };

static double now_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void* a, const void* b) {
    const double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

/* Seeded values uniform in [-sqrt(3), sqrt(3)]: mean square 1. */
static void unit_rms(float* x, size_t n) {
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)(((double)(s >> 40) / (double)(1ull << 24) * 2 - 1) * 1.7320508075688772);
    }
}

/* A 64-byte aligned workspace for the biggest of the forward and decode calls below. */
static void* workspace(const td_model* m, int prefill, size_t* bytes) {
    *bytes = 0;
    for (int l = 0; l < m->cfg.layers; l++) {
        size_t f = 0, d = 0;
        if (mh_layer_forward_workspace_size(m->layer[l].attn, 1, prefill, prefill, &f) != MH_OK ||
            mh_layer_decode_workspace_size(m->layer[l].attn, 1, FILL_CHUNK, &d) != MH_OK)
            return NULL;
        if (f > *bytes) *bytes = f;
        if (d > *bytes) *bytes = d;
    }
    *bytes = (*bytes + 63) / 64 * 64;
    return aligned_alloc(64, *bytes ? *bytes : 64);
}

int acc_time_layers(const td_model* m, int keys, int prefill, acc_timing* t) {
    const int d = m->cfg.d_model, L = m->cfg.layers;
    const int rows = keys > prefill ? keys : prefill;
    size_t ws_bytes;
    void* ws = workspace(m, prefill, &ws_bytes);
    float* x = malloc(sizeof(float) * (size_t)rows * (size_t)d);
    float* y = malloc(sizeof(float) * (size_t)rows * (size_t)d);
    mh_kv_cache** caches = calloc((size_t)L, sizeof *caches);
    double samples[TIMING_REPS];
    int bad = !ws || !x || !y || !caches;
    if (!bad) unit_rms(x, (size_t)rows * (size_t)d);
    /* prefill: every layer's causal forward of `prefill` tokens, the median of the repetitions */
    const mh_attn_options causal = {.causal = 1, .q_offset = MH_Q_OFFSET_END};
    const mh_forward_args fa = {.batch = 1, .n_q = prefill, .n_kv = prefill, .query = x, .out = y, .opt = &causal};
    for (int r = 0; r < TIMING_REPS && !bad; r++) {
        const double t0 = now_seconds();
        for (int l = 0; l < L && !bad; l++) bad |= mh_layer_forward(m->layer[l].attn, &fa, ws, ws_bytes) != MH_OK;
        samples[r] = now_seconds() - t0;
    }
    if (!bad) qsort(samples, TIMING_REPS, sizeof *samples, cmp_double), t->prefill_ms = 1e3 * samples[TIMING_REPS / 2];
    /* decode: fill each layer's cache with `keys` tokens, then one token per layer and step */
    for (int l = 0; l < L && !bad; l++) {
        bad |= mh_kv_cache_create(m->layer[l].attn, 1, keys + TIMING_REPS, MH_DTYPE_F32, &caches[l]) != MH_OK;
        for (int done = 0; done < keys && !bad; done += FILL_CHUNK) {
            const int n = keys - done < FILL_CHUNK ? keys - done : FILL_CHUNK;
            const mh_decode_args a = {.batch = 1, .n_new = n, .x = x + (size_t)done * d, .out = y};
            bad |= mh_layer_decode(m->layer[l].attn, caches[l], &a, ws, ws_bytes) != MH_OK;
        }
    }
    for (int r = 0; r < TIMING_REPS && !bad; r++) {
        const mh_decode_args a = {.batch = 1, .n_new = 1, .x = x + (size_t)r * d, .out = y};
        const double t0 = now_seconds();
        for (int l = 0; l < L && !bad; l++) bad |= mh_layer_decode(m->layer[l].attn, caches[l], &a, ws, ws_bytes) != MH_OK;
        samples[r] = now_seconds() - t0;
    }
    if (!bad) qsort(samples, TIMING_REPS, sizeof *samples, cmp_double), t->decode_us = 1e6 * samples[TIMING_REPS / 2];
    for (int l = 0; caches && l < L; l++) mh_kv_cache_destroy(caches[l]);
    free(caches), free(x), free(y), free(ws);
    if (bad) printf("FAIL: timing the layers\n");
    return bad ? -1 : 0;
}
