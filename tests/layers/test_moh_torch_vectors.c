/*
 * MoH layers against known-answer vectors from a PyTorch re-statement of the reference code
 * (tests/data/gen_moh_vectors.py: learned router with weighted gates, h_s = 0, 1, K = 0 with
 * h_s = H, K = E, a causal GQA base; norm router with binary gates on a GQA base, causal and
 * not). File format: tests/support/torch_vectors.h; the entries are listed in the script.
 *
 * Per case, with 1 thread and with all threads: the layer output equals torch's to max |error|
 * <= 1e-5, and the routing record equals torch's gates: the heads with a nonzero gate
 * (ascending), their gates (same tolerance) and the per-head load counts. A missing or
 * malformed file is a failure, not a skip.
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

/* One case; pointers point into the tv_file. */
typedef struct moh_case {
    const char* name;
    mh_layer_config cfg; /* variant_config points at moh */
    mh_moh_config moh;
    mh_layer_weights w;  /* variant_weights points at router */
    mh_moh_weights router;
    int B, N, causal;
    const float* query; /* [B, N, d] */
    const float* out;   /* [B, N, d] torch's output */
    const float* gates; /* [B, N, H] torch's gate of every head, 0 = not run */
} moh_case;

/* Reads c from f; 1 on success. */
static int case_read(const tv_file* f, const char* cname, moh_case* c) {
    int ok = 1;
    char what[256];
    memset(c, 0, sizeof *c);
    c->name = cname;
    c->cfg = mh_layer_config_default();
    mh_layer_config* g = &c->cfg;
    g->variant = MH_VARIANT_MOH;
    c->moh = mh_moh_config_default(), c->router = mh_moh_weights_default();
    g->variant_config = &c->moh, c->w.variant_weights = &c->router;
    c->B = tv_int(f, "batch", &ok);
    c->N = tv_int(f, "n_q", &ok);
    c->causal = tv_int(f, "causal", &ok);
    g->d_model = tv_int(f, "d_model", &ok);
    g->n_heads = tv_int(f, "n_heads", &ok);
    g->n_kv_heads = tv_int(f, "n_kv_heads", &ok);
    g->head_dim = tv_int(f, "head_dim", &ok);
    g->bias = tv_int(f, "bias", &ok);
    c->moh.router = tv_int(f, "router", &ok) == 1 ? MH_MOH_ROUTER_NORM : MH_MOH_ROUTER_LEARNED;
    c->moh.shared_heads = tv_int(f, "shared_heads", &ok);
    c->moh.top_k = tv_int(f, "top_k", &ok);
    const int B = c->B, N = c->N, d = g->d_model, H = g->n_heads, Hkv = g->n_kv_heads,
              D = g->head_dim, hs = c->moh.shared_heads, K = c->moh.top_k, E = H - hs;
    snprintf(what, sizeof what, "%s: header", cname);
    if (!check_true(what, ok && B > 0 && N > 0 && d > 0 && H > 0 && Hkv > 0 && D > 0 &&
                              H % Hkv == 0 && hs >= 0 && K >= 0 && K <= E))
        return 0;
    tv_layer_weights(f, d, d, d, H, Hkv, D, g->bias, &c->w, &ok);
    /* the router weights the file has are exactly the ones the layer must be given */
    if (tv_find(f, "w_router")) c->router.w_router = tv_f32(f, "w_router", 2, E, d, 0, 0, &ok);
    if (tv_find(f, "w_shared")) c->router.w_shared = tv_f32(f, "w_shared", 2, hs, d, 0, 0, &ok);
    if (tv_find(f, "w_stage")) c->router.w_stage = tv_f32(f, "w_stage", 2, 2, d, 0, 0, &ok);
    c->query = tv_f32(f, "query", 3, B, N, d, 0, &ok);
    c->out = tv_f32(f, "out", 3, B, N, d, 0, &ok);
    c->gates = tv_f32(f, "gates", 3, B, N, H, 0, &ok);
    snprintf(what, sizeof what, "%s: tensors present with the expected shapes", cname);
    return check_true(what, ok);
}

static size_t round_up64(size_t n) { return n == 0 ? 64 : (n + 63) / 64 * 64; }

/* One forward with num_threads threads into out and rec; 1 on success. */
static int forward_once(const moh_case* c, int num_threads, float* out, mh_routing_record* rec) {
    char what[256];
    mh_context_config cc = mh_context_config_default();
    mh_context* ctx = NULL;
    mh_layer* layer = NULL;
    mh_attn_options opt = mh_attn_options_default();
    mh_forward_args args;
    size_t ws_bytes = 0;
    void* ws = NULL;
    int ok = 0;
    cc.num_threads = num_threads;
    opt.causal = c->causal;
    memset(&args, 0, sizeof args);
    args.batch = c->B;
    args.n_q = c->N;
    args.n_kv = c->N;
    args.query = c->query; /* self-attention: key = value = NULL */
    args.out = out;
    args.opt = &opt;
    args.routing = rec;
    snprintf(what, sizeof what, "%s: context, layer and workspace (threads %d)", c->name,
             num_threads);
    if (check_true(what, mh_context_create(&cc, &ctx) == MH_OK &&
                             mh_layer_create(ctx, &c->cfg, &c->w, &layer) == MH_OK &&
                             mh_layer_forward_workspace_size(layer, c->B, c->N, c->N,
                                                             &ws_bytes) == MH_OK &&
                             (ws = aligned_alloc(64, round_up64(ws_bytes))) != NULL)) {
        snprintf(what, sizeof what, "%s: mh_layer_forward (threads %d)", c->name, num_threads);
        ok = check_status(what, mh_layer_forward(layer, &args, ws, ws_bytes), MH_OK);
    }
    free(ws);
    mh_layer_destroy(layer);
    mh_context_destroy(ctx);
    return ok;
}

/* The record equals torch's gates: per token the heads with a nonzero gate, ascending, their
 * gates, and per head the number of tokens that ran it. Returns max |gate error|. */
static double check_record(const moh_case* c, const mh_routing_record* rec, int num_threads) {
    char what[256];
    const int H = c->cfg.n_heads, A = c->moh.shared_heads + c->moh.top_k;
    const size_t rows = (size_t)c->B * c->N;
    int heads_ok = 1;
    double max_err = 0;
    for (int h = 0; h < H; h++) {
        int64_t load = 0;
        for (size_t t = 0; t < rows; t++) load += c->gates[t * H + h] != 0.0f;
        snprintf(what, sizeof what, "%s (threads %d): load of head %d", c->name, num_threads, h);
        check_true(what, rec->load[h] == load);
    }
    for (size_t t = 0; t < rows; t++) {
        int a = 0;
        for (int h = 0; h < H; h++) {
            const float want = c->gates[t * H + h];
            if (want == 0.0f) continue;
            if (a >= A || rec->heads[t * A + a] != h) {
                heads_ok = 0;
                break;
            }
            const double err = fabs((double)rec->gates[t * A + a] - want);
            if (err > max_err) max_err = err;
            a++;
        }
        if (a != A) heads_ok = 0;
    }
    snprintf(what, sizeof what, "%s (threads %d): record heads == torch's selection", c->name,
             num_threads);
    check_true(what, heads_ok);
    snprintf(what, sizeof what, "%s (threads %d): record gates vs torch (max err %.3g)", c->name,
             num_threads, max_err);
    check_true(what, max_err <= TOL);
    return max_err;
}

/* Runs c with num_threads threads; tracks the max output and gate errors. */
static void run_case(const moh_case* c, int num_threads, double* max_out, double* max_gate) {
    char what[256];
    const int H = c->cfg.n_heads, A = c->moh.shared_heads + c->moh.top_k;
    const size_t rows = (size_t)c->B * c->N, n_out = rows * (size_t)c->cfg.d_model;
    float* out = malloc(sizeof(float) * n_out);
    mh_routing_record rec = {malloc(sizeof(int32_t) * rows * (size_t)A),
                             malloc(sizeof(float) * rows * (size_t)A),
                             malloc(sizeof(int64_t) * (size_t)H)};
    if (check_true("malloc", out && rec.heads && rec.gates && rec.load)) {
        for (size_t i = 0; i < n_out; i++) out[i] = NAN; /* every element must be written */
        memset(rec.heads, 0xff, sizeof(int32_t) * rows * (size_t)A);
        if (forward_once(c, num_threads, out, &rec)) {
            err_stats eo = err_f32_f32(out, c->out, n_out);
            if (eo.max_abs > *max_out) *max_out = eo.max_abs;
            snprintf(what, sizeof what, "%s (threads %d): output vs torch", c->name, num_threads);
            check_close_f32(what, out, c->out, n_out, TOL);
            const double eg = check_record(c, &rec, num_threads);
            if (eg > *max_gate) *max_gate = eg;
        }
    }
    free(out);
    free(rec.heads), free(rec.gates), free(rec.load);
}

/* Every case of one file, with 1 thread and with all threads. */
static void check_file(const tv_file* f, const char* name) {
    moh_case c;
    if (!case_read(f, name, &c)) return;
    double max_out = 0, max_gate = 0;
    const int threads[2] = {1, 0}; /* the caller only; all processors */
    for (int t = 0; t < 2; t++) run_case(&c, threads[t], &max_out, &max_gate);
    printf("%-30s max |err| out %.3g, gates %.3g\n", name, max_out, max_gate);
}

int main(void) {
    static const char* const cases[] = {
        "moh_a_learned.bin",            /* H 6, h_s 2, K 2, bias */
        "moh_b_learned_hs0.bin",        /* h_s 0: g = r, no stage mixing; no bias */
        "moh_c_learned_hs1.bin",        /* h_s 1: constant shared gate times 2 alpha_1 */
        "moh_d_learned_k0.bin",         /* K 0, h_s = H: g = h_s softmax(W_s x) */
        "moh_e_learned_kE.bin",         /* K = E: every routed head runs, weighted */
        "moh_f_learned_gqa_causal.bin", /* H 8, Hkv 2, h_s 2, K 3, causal */
        "moh_g_norm_gqa.bin",           /* norm router, H 8, Hkv 2, h_s 4, K 2 */
        "moh_h_norm_gqa_causal.bin",    /* the same, causal, no bias */
    };
    return tv_run_files("test_moh_torch_vectors", cases, sizeof cases / sizeof cases[0], check_file);
}
