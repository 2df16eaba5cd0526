/*
 * A decode loop with a KV cache.
 *
 * Autoregressive generation with one attention layer: a prompt of 12 tokens is prefilled with
 * ONE mh_layer_decode call (n_new = 12: chunked prefill), then 20 tokens are generated one at a
 * time. There is no language model here, so the "next token" is the RMS-normalised output of
 * the last position (a real model would run its other layers, an LM head and a sampler); what
 * matters is that each step's input depends on the previous step's output, as in generation.
 * Both sequences of the batch advance together (a cache serves one length for all of them).
 *
 * The same loop runs with an f32 cache and with an f16 cache (half the bytes per token), and
 * the program checks:
 *   1. every call returns MH_OK, outputs are finite, the cache length is 12, then 13, ..., 32;
 *   2. a decode on the full cache fails with MH_ERR_CACHE_FULL and leaves the length alone;
 *   3. f32 cache: the decode outputs equal ONE causal forward over the recorded 32 inputs, to
 *      1e-5 times the largest output magnitude (prefill and decode tile differently);
 *   4. f16 cache: the same comparison to 4e-3 times the largest magnitude: K and V are rounded
 *      to f16 (relative error <= 2^-11 = 4.9e-4 per element) before they are used;
 *   5. the f16 cache takes exactly half the bytes per token of the f32 one.
 * Exit status 0 when every check passes.
 */
#include <math.h>
#include <multihead.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "example_util.h"

enum { D_MODEL = 64, HEADS = 8, KV_HEADS = 2, HEAD_DIM = 16, BATCH = 2, PROMPT = 12, GEN = 20 };
enum { TOTAL = PROMPT + GEN };

/* The toy "next token": RMS-normalise the last output row. */
static void next_input(const float* y, float* x) {
    double ss = 0;
    for (int i = 0; i < D_MODEL; i++) ss += (double)y[i] * y[i];
    const float r = (float)(1.0 / sqrt(ss / D_MODEL + 1e-6));
    for (int i = 0; i < D_MODEL; i++) x[i] = y[i] * r;
}

/* Runs prefill + generation with a cache of `dtype`; records every input and output as
 * [BATCH][TOTAL][D_MODEL]. Returns 0 on success. */
static int generate(const mh_layer* layer, mh_dtype dtype, const float* prompt, float* xs,
                    float* ys, size_t* bytes_per_token) {
    mh_kv_cache* cache;
    mh_status st = mh_kv_cache_create(layer, BATCH, TOTAL, dtype, &cache);
    if (st != MH_OK) {
        printf("      cache create: %s\n", mh_status_string(st));
        check(0, "KV cache create");
        return 1;
    }
    *bytes_per_token = mh_kv_cache_bytes_per_token(cache);

    /* One workspace, big enough for the prefill chunk and for single tokens. */
    size_t ws_prefill, ws_step;
    mh_layer_decode_workspace_size(layer, BATCH, PROMPT, &ws_prefill);
    mh_layer_decode_workspace_size(layer, BATCH, 1, &ws_step);
    const size_t bytes = ws_prefill > ws_step ? ws_prefill : ws_step;
    void* ws = aligned_alloc(64, (bytes + 63) / 64 * 64);
    int bad = ws == NULL;

    /* Prefill: the whole prompt in one call. */
    float chunk_out[BATCH][PROMPT][D_MODEL];
    st = mh_layer_decode(layer, cache, &(mh_decode_args){.batch = BATCH, .n_new = PROMPT, .x = prompt, .out = &chunk_out[0][0][0]}, ws, bytes);
    bad |= st != MH_OK || mh_kv_cache_length(cache) != PROMPT;
    for (int b = 0; b < BATCH; b++) {
        memcpy(xs + (size_t)b * TOTAL * D_MODEL, prompt + (size_t)b * PROMPT * D_MODEL,
               sizeof(float) * PROMPT * D_MODEL);
        memcpy(ys + (size_t)b * TOTAL * D_MODEL, chunk_out[b], sizeof(float) * PROMPT * D_MODEL);
    }

    /* Generation: one token per step, fed from the previous step's output. */
    for (int t = PROMPT; t < TOTAL && !bad; t++) {
        float x[BATCH][D_MODEL], y[BATCH][D_MODEL];
        for (int b = 0; b < BATCH; b++) next_input(ys + ((size_t)b * TOTAL + t - 1) * D_MODEL, x[b]);
        st = mh_layer_decode(layer, cache, &(mh_decode_args){.batch = BATCH, .n_new = 1, .x = &x[0][0], .out = &y[0][0]}, ws, bytes);
        bad |= st != MH_OK || mh_kv_cache_length(cache) != t + 1;
        for (int b = 0; b < BATCH; b++) {
            memcpy(xs + ((size_t)b * TOTAL + t) * D_MODEL, x[b], sizeof x[b]);
            memcpy(ys + ((size_t)b * TOTAL + t) * D_MODEL, y[b], sizeof y[b]);
        }
    }
    if (st != MH_OK) printf("decode: %s\n", mh_status_string(st));
    check(!bad, dtype == MH_DTYPE_F16 ? "f16 cache: prefill + 20 steps, lengths 12..32"
                                      : "f32 cache: prefill + 20 steps, lengths 12..32");

    /* The cache is full: one more token is refused and nothing changes. */
    float x1[BATCH][D_MODEL] = {{0}}, y1[BATCH][D_MODEL];
    st = mh_layer_decode(layer, cache, &(mh_decode_args){.batch = BATCH, .n_new = 1, .x = &x1[0][0], .out = &y1[0][0]}, ws, bytes);
    check(st == MH_ERR_CACHE_FULL && mh_kv_cache_length(cache) == TOTAL,
          "decode on a full cache: MH_ERR_CACHE_FULL, length unchanged");

    free(ws);
    mh_kv_cache_destroy(cache);
    return bad;
}

int main(void) {
    seed(2024);
    static float wq[HEADS * HEAD_DIM * D_MODEL], wk[KV_HEADS * HEAD_DIM * D_MODEL];
    static float wv[KV_HEADS * HEAD_DIM * D_MODEL], wo[D_MODEL * HEADS * HEAD_DIM];
    static float bq[HEADS * HEAD_DIM], bk[KV_HEADS * HEAD_DIM], bv[KV_HEADS * HEAD_DIM], bo[D_MODEL];
    const float a = 1.0f / sqrtf((float)D_MODEL), ao = 1.0f / sqrtf((float)(HEADS * HEAD_DIM));
    fill(wq, sizeof wq / sizeof *wq, a), fill(wk, sizeof wk / sizeof *wk, a);
    fill(wv, sizeof wv / sizeof *wv, a), fill(wo, sizeof wo / sizeof *wo, ao);
    fill(bq, HEADS * HEAD_DIM, a), fill(bk, KV_HEADS * HEAD_DIM, a);
    fill(bv, KV_HEADS * HEAD_DIM, a), fill(bo, D_MODEL, ao);

    mh_context* ctx;
    mh_context_config cc = mh_context_config_default();
    if (mh_context_create(&cc, &ctx) != MH_OK) return puts("FAIL: context"), 1;
    mh_layer_config cfg = mh_layer_config_default();
    cfg.variant = MH_VARIANT_GQA;
    cfg.d_model = D_MODEL, cfg.n_heads = HEADS, cfg.n_kv_heads = KV_HEADS, cfg.head_dim = HEAD_DIM;
    cfg.bias = 1;
    mh_layer_weights w = {.w_q = wq, .w_k = wk, .w_v = wv, .w_o = wo, .b_q = bq, .b_k = bk,
                          .b_v = bv, .b_o = bo};
    mh_layer* layer;
    mh_status st = mh_layer_create(ctx, &cfg, &w, &layer);
    if (st != MH_OK) return printf("FAIL: layer: %s\n", mh_status_string(st)), 1;

    static float prompt[BATCH][PROMPT][D_MODEL];
    fill(&prompt[0][0][0], sizeof prompt / sizeof(float), 1.0f);

    static const struct { mh_dtype dtype; const char* name; float rel_tol; } runs[2] = {
        {MH_DTYPE_F32, "f32", 1e-5f}, {MH_DTYPE_F16, "f16", 4e-3f}};
    size_t bpt[2] = {0, 0};
    for (int r = 0; r < 2; r++) {
        static float xs[BATCH][TOTAL][D_MODEL], ys[BATCH][TOTAL][D_MODEL], ref[BATCH][TOTAL][D_MODEL];
        if (generate(layer, runs[r].dtype, &prompt[0][0][0], &xs[0][0][0], &ys[0][0][0], &bpt[r]))
            continue;

        /* The reference: one causal forward over everything the loop fed in. */
        size_t bytes;
        mh_layer_forward_workspace_size(layer, BATCH, TOTAL, TOTAL, &bytes);
        void* ws = aligned_alloc(64, (bytes + 63) / 64 * 64);
        mh_attn_options opt = mh_attn_options_default();
        opt.causal = 1;
        mh_forward_args args = {.batch = BATCH, .n_q = TOTAL, .n_kv = TOTAL, .query = &xs[0][0][0],
                                .out = &ref[0][0][0], .opt = &opt};
        st = ws ? mh_layer_forward(layer, &args, ws, bytes) : MH_ERR_OUT_OF_MEMORY;
        free(ws);

        float diff, mag;
        compare(&ys[0][0][0], &ref[0][0][0], sizeof ys / sizeof(float), &diff, &mag);
        printf("      %s cache: %zu bytes/token, max |decode - forward| %.3g, tolerance %.3g\n",
               runs[r].name, bpt[r], diff, runs[r].rel_tol * mag);
        char what[96];
        snprintf(what, sizeof what, "%s cache: decode outputs == causal forward", runs[r].name);
        check(st == MH_OK && mag > 0 && diff <= runs[r].rel_tol * mag, what);
    }
    check(bpt[1] > 0 && 2 * bpt[1] == bpt[0], "f16 cache: half the bytes per token of f32");
    printf("ISA %s\n", mh_isa_name(mh_context_isa(ctx)));
    mh_layer_destroy(layer);
    mh_context_destroy(ctx);
    return failures ? 1 : 0;
}
