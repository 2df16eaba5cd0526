/*
 * Rotary position embeddings and QK-norm in the layers against known-answer vectors from a
 * PyTorch re-statement of the models' conventions (tests/data/gen_rotary_vectors.py: HF
 * LLaMA rotate-half with GQA, GPT-J interleaved partial rotary, Pythia rotary_dim = D/4 with
 * biases, Qwen3 QK-norm, LLaMA 3.1 scaled frequencies through inv_freq, a MoH-LLaMA3-shaped
 * layer). File format: tests/support/torch_vectors.h; the entries are listed in the script.
 *
 * Per case, with 1 thread and with all threads:
 *  - mh_layer_forward, causal, q_offset END (queries at 0 .. N-1) == torch's out_causal;
 *  - mh_layer_forward, causal, q_offset = the file's (queries at q_offset + i, keys at j)
 *    == torch's out_offset;
 *  - mh_layer_decode of a prompt chunk of 4 tokens, then one token at a time (new tokens at
 *    their cache positions) == torch's out_causal.
 * Tolerance: max |error| <= 1e-5 on outputs of magnitude about 1. The longest f32 reduction is
 * the output projection over H*D <= 64 terms: its rounding is bounded by 64 eps32 |terms| ~
 * 4e-6 per unit of output; cos/sin differ by at most 1 ulp between SLEEF and torch, and the
 * default frequency tables by at most 1 ulp (powf against torch's pow), which at positions
 * below 14 moves an angle by less than 14 * 6e-8 relative. The LLaMA 3.1 case (positions up to
 * 3011) hands both sides the same table, so its angles are the same f32 products.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "layer_fixture.h"
#include "multihead.h"
#include "torch_vectors.h"

#define TOL 1e-5
#define PROMPT 4 /* tokens of the first decode call */

/* One case; pointers point into the tv_file. */
typedef struct rope_case {
    const char* name;
    mh_layer_config cfg; /* variant_config points at moh for MoH */
    mh_moh_config moh;
    mh_layer_weights w;
    int B, N, q_offset;
    const float* query;      /* [B, N, d] */
    const float* out_causal; /* [B, N, d] */
    const float* out_offset; /* [B, N, d] */
} rope_case;

static int case_read(const tv_file* f, const char* cname, rope_case* c) {
    int ok = 1;
    char what[256];
    memset(c, 0, sizeof *c);
    c->name = cname;
    mh_layer_config* g = &c->cfg;
    *g = mh_layer_config_default();
    c->B = tv_int(f, "batch", &ok), c->N = tv_int(f, "n_q", &ok), c->q_offset = tv_int(f, "q_offset", &ok);
    g->d_model = tv_int(f, "d_model", &ok), g->n_heads = tv_int(f, "n_heads", &ok);
    g->n_kv_heads = tv_int(f, "n_kv_heads", &ok), g->head_dim = tv_int(f, "head_dim", &ok);
    g->bias = tv_int(f, "bias", &ok);
    g->rotary.layout = (mh_rotary_layout)tv_int(f, "layout", &ok);
    g->rotary.rotary_dim = tv_int(f, "rotary_dim", &ok);
    const float* theta = tv_f32(f, "theta", 0, 0, 0, 0, 0, &ok);
    const float* eps = tv_f32(f, "qk_norm_eps", 0, 0, 0, 0, 0, &ok);
    g->qk_norm = tv_int(f, "qk_norm", &ok);
    const int moh = tv_int(f, "variant", &ok) == 1;
    g->variant = moh ? MH_VARIANT_MOH : MH_VARIANT_GQA;
    if (moh) {
        c->moh = mh_moh_config_default();
        c->moh.router = MH_MOH_ROUTER_NORM;
        c->moh.shared_heads = tv_int(f, "shared_heads", &ok), c->moh.top_k = tv_int(f, "top_k", &ok);
        g->variant_config = &c->moh;
    }
    const int B = c->B, N = c->N, d = g->d_model, H = g->n_heads, Hkv = g->n_kv_heads, D = g->head_dim;
    snprintf(what, sizeof what, "%s: header", cname);
    if (!check_true(what, ok && B > 0 && N > PROMPT && d > 0 && H > 0 && Hkv > 0 && D > 0))
        return 0;
    g->rotary.theta = *theta, g->qk_norm_eps = *eps;
    tv_layer_weights(f, d, d, d, H, Hkv, D, g->bias, &c->w, &ok);
    if (g->qk_norm) {
        c->w.q_norm = tv_f32(f, "q_norm", 1, D, 0, 0, 0, &ok);
        c->w.k_norm = tv_f32(f, "k_norm", 1, D, 0, 0, 0, &ok);
    }
    if (tv_find(f, "inv_freq")) g->rotary.inv_freq = tv_f32(f, "inv_freq", 1, g->rotary.rotary_dim / 2, 0, 0, 0, &ok);
    c->query = tv_f32(f, "query", 3, B, N, d, 0, &ok);
    c->out_causal = tv_f32(f, "out_causal", 3, B, N, d, 0, &ok);
    c->out_offset = tv_f32(f, "out_offset", 3, B, N, d, 0, &ok);
    snprintf(what, sizeof what, "%s: tensors present with the expected shapes", cname);
    return check_true(what, ok);
}

/* Compares out with want and tracks the max error. */
static void compare(const rope_case* c, const char* kind, int threads, const float* out,
                    const float* want, double* max_err) {
    char what[256];
    const size_t n = (size_t)c->B * (size_t)c->N * (size_t)c->cfg.d_model;
    const err_stats e = err_f32_f32(out, want, n);
    if (e.max_abs > *max_err || isnan(e.max_abs)) *max_err = e.max_abs;
    snprintf(what, sizeof what, "%s (threads %d): %s vs torch", c->name, threads, kind);
    check_close_f32(what, out, want, n, TOL);
}

static void run_case(const rope_case* c, int threads, double* max_err) {
    char what[256];
    const size_t n = (size_t)c->B * (size_t)c->N * (size_t)c->cfg.d_model;
    mh_context_config cc = mh_context_config_default();
    cc.num_threads = threads;
    mh_context* ctx = NULL;
    mh_layer* layer = NULL;
    mh_kv_cache* cache = NULL;
    float* out = malloc(sizeof(float) * n);
    snprintf(what, sizeof what, "%s: context, layer and cache (threads %d)", c->name, threads);
    if (check_true(what, out && mh_context_create(&cc, &ctx) == MH_OK &&
                             mh_layer_create(ctx, &c->cfg, &c->w, &layer) == MH_OK &&
                             mh_kv_cache_create(layer, c->B, c->N, MH_DTYPE_F32, &cache) == MH_OK)) {
        mh_attn_options opt = mh_attn_options_default();
        opt.causal = 1;
        mh_forward_args a = {.batch = c->B, .n_q = c->N, .n_kv = c->N, .query = c->query, .out = out, .opt = &opt};
        for (size_t i = 0; i < n; i++) out[i] = NAN;
        snprintf(what, sizeof what, "%s: forward", c->name);
        if (check_status(what, run_forward(layer, &a), MH_OK)) compare(c, "forward causal", threads, out, c->out_causal, max_err);
        opt.q_offset = c->q_offset;
        for (size_t i = 0; i < n; i++) out[i] = NAN;
        snprintf(what, sizeof what, "%s: forward q_offset %d", c->name, c->q_offset);
        if (check_status(what, run_forward(layer, &a), MH_OK)) compare(c, "forward q_offset", threads, out, c->out_offset, max_err);
        int chunks[64];
        chunks[0] = PROMPT;
        for (int i = 1; i < 64; i++) chunks[i] = 1;
        for (size_t i = 0; i < n; i++) out[i] = NAN;
        decode_in_chunks(layer, cache, c->B, c->N, c->cfg.d_model, c->query, out, chunks);
        compare(c, "decode (prompt, then token by token)", threads, out, c->out_causal, max_err);
    }
    mh_kv_cache_destroy(cache);
    mh_layer_destroy(layer);
    mh_context_destroy(ctx);
    free(out);
}

static void check_file(const tv_file* f, const char* name) {
    rope_case c;
    if (!case_read(f, name, &c)) return;
    double max_err = 0;
    const int threads[2] = {1, 0}; /* the caller only; all processors */
    for (int t = 0; t < 2; t++) run_case(&c, threads[t], &max_err);
    printf("%-28s max |err| %.3g\n", name, max_err);
}

int main(void) {
    static const char* const cases[] = {
        "rope_a_llama_gqa.bin",      /* rotate-half, H 4, Hkv 2, D 16 */
        "rope_b_gptj.bin",           /* interleaved, rotary_dim 8 of D 16 */
        "rope_c_pythia.bin",         /* rotate-half on D/4 = 4 dims, biases */
        "rope_d_qwen3.bin",          /* QK-norm, theta 1e6, GQA */
        "rope_e_llama31_scaled.bin", /* LLaMA 3.1 table via inv_freq, q_offset 3000 */
        "rope_f_moh_llama3.bin",     /* MoH norm router (h_s 4, K 2) on a rotary GQA base */
    };
    return tv_run_files("test_rotary_torch_vectors", cases, sizeof cases / sizeof cases[0], check_file);
}
