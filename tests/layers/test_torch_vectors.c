/*
 * Layer forward against reference outputs recorded from PyTorch (torch 1.13, float32, CPU).
 *
 * The vectors are written by tests/data/gen_torch_vectors.py (run it with /usr/bin/python3 to
 * regenerate); the directory comes from the environment variable MH_TEST_DATA (ctest sets it).
 * A missing or malformed file is a failure, not a skip.
 *
 * File format: tests/support/torch_vectors.h.
 * Entries: int32 scalars batch, n_q, n_kv, d_model, n_heads, n_kv_heads, head_dim, kdim, vdim,
 * bias, causal, q_offset (-1 = MH_Q_OFFSET_END), self_attn; float32 w_q/w_k/w_v/w_o
 * (nn.Linear layout [out, in]), b_q/b_k/b_v/b_o (when bias), query [B,N,d_model],
 * key [B,M,kdim] / value [B,M,vdim] (when not self_attn), out [B,N,d_model] (torch's output),
 * probs [B,H,N,M] (torch's per-head softmax); optional int32 kv_len [B] (torch
 * key_padding_mask as a suffix of padding) and nan_rows [B,N] (1 where every key of the query
 * is masked: torch returns NaN there; the library's attention returns an all-zero row, so the
 * expected probabilities are 0 and the expected layer output is out_proj(0) = b_o, or 0 when
 * the layer has no bias).
 * The script's docstring describes each case.
 *
 * Every case runs with 1 thread and with all threads, with and without probabilities
 * requested, and must match torch to max |error| <= 1e-5.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "multihead.h"
#include "torch_vectors.h"

#define TOL 1e-5

/* One case, read and checked for consistency. Pointers point into the tv_file. */
typedef struct tv_case {
    const char* name;
    int B, N, M, E, H, Hkv, D, kdim, vdim, bias, causal, q_offset, self_attn;
    mh_layer_weights w;
    const float *query, *key, *value;
    const int32_t* kv_len;
    float* exp_out;   /* [B, N, E]: torch's output, NaN rows (no key kept) set to b_o or 0 */
    float* exp_probs; /* [B, H, N, M]: the same for the probabilities */
} tv_case;

/* Fills c from f; 1 on success. Expected arrays are allocated (free them with free()). */
static int tv_case_read(const tv_file* f, const char* cname, tv_case* c) {
    char what[256];
    int ok = 1;
    memset(c, 0, sizeof *c);
    c->name = cname;
    c->B = tv_int(f, "batch", &ok);
    c->N = tv_int(f, "n_q", &ok);
    c->M = tv_int(f, "n_kv", &ok);
    c->E = tv_int(f, "d_model", &ok);
    c->H = tv_int(f, "n_heads", &ok);
    c->Hkv = tv_int(f, "n_kv_heads", &ok);
    c->D = tv_int(f, "head_dim", &ok);
    c->kdim = tv_int(f, "kdim", &ok);
    c->vdim = tv_int(f, "vdim", &ok);
    c->bias = tv_int(f, "bias", &ok);
    c->causal = tv_int(f, "causal", &ok);
    c->q_offset = tv_int(f, "q_offset", &ok);
    c->self_attn = tv_int(f, "self_attn", &ok);
    const int B = c->B, N = c->N, M = c->M, E = c->E, H = c->H, Hkv = c->Hkv, D = c->D;
    snprintf(what, sizeof what, "%s: header", cname);
    if (!check_true(what, ok && B > 0 && N > 0 && M > 0 && E > 0 && H > 0 && Hkv > 0 && D > 0 &&
                              H % Hkv == 0 && (!c->self_attn || M == N)))
        return 0;

    tv_layer_weights(f, E, c->kdim, c->vdim, H, Hkv, D, c->bias, &c->w, &ok);
    c->query = tv_f32(f, "query", 3, B, N, E, 0, &ok);
    if (!c->self_attn) {
        c->key = tv_f32(f, "key", 3, B, M, c->kdim, 0, &ok);
        c->value = tv_f32(f, "value", 3, B, M, c->vdim, 0, &ok);
    }
    const float* want_out = tv_f32(f, "out", 3, B, N, E, 0, &ok);
    const float* want_probs = tv_f32(f, "probs", 4, B, H, N, M, &ok);
    const int32_t* nan_rows = NULL;
    if (tv_find(f, "kv_len")) {
        int dims[1] = {B};
        c->kv_len = (const int32_t*)tv_tensor(f, "kv_len", 1, 1, dims, &ok);
    }
    if (tv_find(f, "nan_rows")) {
        int dims[2] = {B, N};
        nan_rows = (const int32_t*)tv_tensor(f, "nan_rows", 1, 2, dims, &ok);
    }
    snprintf(what, sizeof what, "%s: tensors present with the expected shapes", cname);
    if (!check_true(what, ok)) return 0;

    const size_t n_out = (size_t)B * N * E, n_probs = (size_t)B * H * N * M;
    c->exp_out = malloc(sizeof(float) * n_out);
    c->exp_probs = malloc(sizeof(float) * n_probs);
    if (!check_true("malloc", c->exp_out && c->exp_probs)) return 0;
    memcpy(c->exp_out, want_out, sizeof(float) * n_out);
    memcpy(c->exp_probs, want_probs, sizeof(float) * n_probs);
    /* The file must be consistent: torch's NaN exactly in the recorded rows. There the library's
     * attention gives an all-zero row (and all-zero probabilities), so the layer output is the
     * output projection of zero: b_o, or zero without biases. */
    int nan_ok = 1;
    for (int b = 0; b < B; b++)
        for (int i = 0; i < N; i++) {
            const int masked = nan_rows && nan_rows[b * N + i];
            float* ro = c->exp_out + ((size_t)b * N + i) * E;
            for (int k = 0; k < E; k++) {
                if ((isnan(ro[k]) != 0) != masked) nan_ok = 0;
                if (masked) ro[k] = c->bias ? c->w.b_o[k] : 0.0f;
            }
            for (int h = 0; h < H; h++) {
                float* rp = c->exp_probs + (((size_t)b * H + h) * N + i) * M;
                for (int j = 0; j < M; j++) {
                    if ((isnan(rp[j]) != 0) != masked) nan_ok = 0;
                    if (masked) rp[j] = 0.0f;
                }
            }
        }
    snprintf(what, sizeof what, "%s: NaN rows in the file match nan_rows", cname);
    return check_true(what, nan_ok);
}

static size_t round_up64(size_t n) { return n == 0 ? 64 : (n + 63) / 64 * 64; }

static int all_finite(const float* x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}

/* Builds the layer and runs one forward into out (and probs if non-NULL); 1 on success. */
static int forward_once(const tv_case* c, int num_threads, float* out, float* probs) {
    char what[256];
    mh_context_config cc = mh_context_config_default();
    mh_context* ctx = NULL;
    mh_layer* layer = NULL;
    mh_layer_config cfg = mh_layer_config_default();
    mh_attn_options opt = mh_attn_options_default();
    mh_forward_args args;
    size_t ws_bytes = 0;
    void* ws = NULL;
    int ok = 0;

    cc.num_threads = num_threads;
    cfg.variant = c->Hkv == c->H ? MH_VARIANT_MHA
                                 : (c->Hkv == 1 ? MH_VARIANT_MQA : MH_VARIANT_GQA);
    cfg.d_model = c->E;
    cfg.n_heads = c->H;
    cfg.n_kv_heads = c->Hkv;
    cfg.head_dim = c->D;
    cfg.head_dim_v = c->D;
    cfg.kdim = c->kdim;
    cfg.vdim = c->vdim;
    cfg.bias = c->bias;

    opt.causal = c->causal;
    opt.q_offset = c->q_offset < 0 ? MH_Q_OFFSET_END : c->q_offset;
    opt.kv_len = c->kv_len;
    opt.probs = probs;

    memset(&args, 0, sizeof args);
    args.batch = c->B;
    args.n_q = c->N;
    args.n_kv = c->self_attn ? c->N : c->M;
    args.query = c->query;
    args.key = c->key; /* NULL for self-attention */
    args.value = c->value;
    args.out = out;
    args.opt = &opt;

    snprintf(what, sizeof what, "%s: mh_context_create(num_threads %d)", c->name, num_threads);
    if (check_status(what, mh_context_create(&cc, &ctx), MH_OK)) {
        snprintf(what, sizeof what, "%s: mh_layer_create", c->name);
        if (check_status(what, mh_layer_create(ctx, &cfg, &c->w, &layer), MH_OK)) {
            snprintf(what, sizeof what, "%s: mh_layer_forward_workspace_size", c->name);
            if (check_status(what,
                             mh_layer_forward_workspace_size(layer, args.batch, args.n_q,
                                                             args.n_kv, &ws_bytes),
                             MH_OK)) {
                ws = aligned_alloc(64, round_up64(ws_bytes));
                if (check_true("aligned_alloc", ws != NULL)) {
                    snprintf(what, sizeof what, "%s: mh_layer_forward", c->name);
                    ok = check_status(what, mh_layer_forward(layer, &args, ws, ws_bytes), MH_OK);
                }
            }
        }
    }
    free(ws);
    mh_layer_destroy(layer);
    mh_context_destroy(ctx);
    return ok;
}

/* Runs c with num_threads threads, with or without probabilities; tracks the max errors. */
static void run_case(const tv_case* c, int num_threads, int with_probs, double* max_out,
                     double* max_probs) {
    char what[256];
    const size_t n_out = (size_t)c->B * c->N * c->E;
    const size_t n_probs = (size_t)c->B * c->H * c->N * c->M;
    float* out = malloc(sizeof(float) * n_out);
    float* probs = malloc(sizeof(float) * n_probs);
    if (check_true("malloc", out && probs)) {
        for (size_t i = 0; i < n_out; i++) out[i] = NAN; /* every element must be written */
        for (size_t i = 0; i < n_probs; i++) probs[i] = NAN;
        if (forward_once(c, num_threads, out, with_probs ? probs : NULL)) {
            err_stats eo = err_f32_f32(out, c->exp_out, n_out);
            if (eo.max_abs > *max_out) *max_out = eo.max_abs;
            snprintf(what, sizeof what, "%s (threads %d, probs %s): output finite", c->name,
                     num_threads, with_probs ? "on" : "off");
            check_true(what, all_finite(out, n_out));
            snprintf(what, sizeof what, "%s (threads %d, probs %s): output vs torch", c->name,
                     num_threads, with_probs ? "on" : "off");
            check_close_f32(what, out, c->exp_out, n_out, TOL);
            if (with_probs) {
                err_stats ep = err_f32_f32(probs, c->exp_probs, n_probs);
                if (ep.max_abs > *max_probs) *max_probs = ep.max_abs;
                snprintf(what, sizeof what, "%s (threads %d): per-head probabilities vs torch",
                         c->name, num_threads);
                check_close_f32(what, probs, c->exp_probs, n_probs, TOL);
            }
        }
    }
    free(out);
    free(probs);
}

/* The case of one file, with 1 thread and all threads, with and without probabilities. */
static void check_file(const tv_file* f, const char* name) {
    tv_case c;
    if (tv_case_read(f, name, &c)) {
        double max_out = 0, max_probs = 0;
        const int threads[2] = {1, 0}; /* the caller only; all processors */
        for (int t = 0; t < 2; t++)
            for (int with_probs = 0; with_probs < 2; with_probs++)
                run_case(&c, threads[t], with_probs, &max_out, &max_probs);
        printf("%-28s max |err| out %.3g, probs %.3g\n", name, max_out, max_probs);
    }
    free(c.exp_out);
    free(c.exp_probs);
}

int main(void) {
    static const char* const cases[] = {
        "torch_a_mha_bias.bin",       /* MHA, bias, self-attention; per-head probs */
        "torch_b_mha_nobias.bin",     /* MHA without biases */
        "torch_c_cross_kvdim.bin",    /* cross-attention, kdim/vdim != d_model, N != M */
        "torch_d_causal.bin",         /* causal self-attention */
        "torch_e_padding.bin",        /* key_padding_mask (suffix) -> kv_len */
        "torch_e_causal_padding.bin", /* causal + padding: fully masked rows -> zeros */
        "torch_f_gqa_bias.bin",       /* GQA H=6 Hkv=2 D=4 d_model=12, bias, causal */
        "torch_f_gqa_nobias.bin",     /* the same without biases */
    };
    return tv_run_files("test_torch_vectors", cases, sizeof cases / sizeof cases[0], check_file);
}
