/*
 * Thread safety: one layer (and one context) used from many caller threads at once.
 *
 * A layer is immutable after create, so any number of threads may run mh_layer_forward and
 * mh_layer_decode on it at the same time, each with its own workspace and KV cache; a context
 * is read-only, so mh_attention may share one too (docs/api.md, "Threading"). Here 8 pthreads,
 * released together by a barrier, each run for several rounds:
 *   - a causal forward, a forward with a mask, key lengths and probabilities,
 *   - a decode sequence (a chunked prefill, then single tokens) in its own KV cache (f32, f16
 *     or bf16 by thread),
 *   - mh_attention on Q/K/V shared by all threads (read-only) into its own output,
 * and every output (and probability) must be BITWISE equal to the one the same call gave on
 * the main thread before the threads started. Inputs differ between threads (4 input sets), so
 * both "same call at once" and "different calls at once" happen.
 *
 * Thread counts: the library's worker threads and the caller's multiply (each caller thread
 * that enters a call with a context of T threads runs a team of up to T). A program that
 * already runs one call per core should use contexts of num_threads = 1, which is what the
 * 8-caller part does: 8 x 1 threads, no oversubscription on any machine with 8 cores, and no
 * OpenMP team at all (a 1-thread call never forks). The second part is 2 caller threads with a
 * 2-thread context (2 x 2 threads, shapes large enough that the library does fork), checked
 * against the same 1-thread references (results do not depend on the thread count).
 *
 * `--no-omp-teams` skips the second part (for a ThreadSanitizer run without OpenMP support,
 * see tests/sanitize/tsan.sh).
 */
#define _POSIX_C_SOURCE 200809L /* pthread barriers under -std=c11 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "layer_fixture.h"
#include "problem.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define MH_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define MH_SANITIZED 1
#endif
#endif

/* rounds per thread: fewer under sanitizers (5-15x slower), where overlap matters less than
 * the instrumentation */
#if defined(MH_SANITIZED)
enum { MAX_THREADS = 8, INPUT_SETS = 4, ROUNDS = 2 };
#else
enum { MAX_THREADS = 8, INPUT_SETS = 4, ROUNDS = 4 };
#endif

typedef struct shape {
    int B, N, d_model, H, Hkv, D, prefill; /* decode: prefill tokens then N - prefill singles */
} shape;

/* Everything one call sequence produces, in one buffer per kind. */
typedef struct results {
    float* fwd;    /* [B, N, d_model] causal forward */
    float* fwd_m;  /* [B, N, d_model] masked forward */
    float* probs;  /* [B, H, N, N] */
    float* dec;    /* [B, N, d_model] decode outputs, token by token */
    float* core_o; /* the core output (its whole strided buffer) */
} results;

typedef struct shared {
    const shape* s;
    const mh_context* ctx;
    const mh_layer* layer;
    const float* x[INPUT_SETS];
    const float* mask;
    const int32_t* kv_len;
    const test_problem* core; /* Q/K/V read by every thread */
    const mh_attn_options* core_opt;
    pthread_barrier_t start;
} shared;

typedef struct worker {
    shared* sh;
    int index;
    const results* want; /* the reference for this thread's inputs */
    int mismatches;      /* outputs that differed from the reference */
    int errors;          /* calls that did not return MH_OK */
} worker;

static size_t io_elems(const shape* s) { return (size_t)s->B * s->N * s->d_model; }
static size_t probs_elems(const shape* s) { return (size_t)s->B * s->H * s->N * s->N; }

static void results_alloc(results* r, const shape* s, size_t core_elems) {
    r->fwd = malloc(sizeof(float) * io_elems(s));
    r->fwd_m = malloc(sizeof(float) * io_elems(s));
    r->probs = malloc(sizeof(float) * probs_elems(s));
    r->dec = malloc(sizeof(float) * io_elems(s));
    r->core_o = malloc(sizeof(float) * core_elems);
}

static void results_free(results* r) {
    free(r->fwd), free(r->fwd_m), free(r->probs), free(r->dec), free(r->core_o);
}

static mh_dtype cache_dtype(int index) { return (mh_dtype)(index % 3); }

/* Slow-machine limit (tests/support/problem.h): sanitizer builds keep the full shapes. */
#if defined(MH_SANITIZED)
#define SLOW_MS 200.0
#else
#define SLOW_MS 10.0
#endif

static int g_rounds = ROUNDS;

/* One full call sequence with this thread's own workspaces and cache; returns the number of
 * calls that failed. The core output buffer is r->core_o (same strides as sh->core). */
static int run_sequence(const shared* sh, int index, results* r) {
    const shape* s = sh->s;
    const float* x = sh->x[index % INPUT_SETS];
    int errors = 0;
    size_t fw_bytes = 0, pre_bytes = 0, one_bytes = 0, core_bytes = 0;
    errors += mh_layer_forward_workspace_size(sh->layer, s->B, s->N, s->N, &fw_bytes) != MH_OK;
    errors += mh_layer_decode_workspace_size(sh->layer, s->B, s->prefill, &pre_bytes) != MH_OK;
    errors += mh_layer_decode_workspace_size(sh->layer, s->B, 1, &one_bytes) != MH_OK;
    mh_attn_problem cp = sh->core->p;
    cp.o.data = r->core_o;
    errors += mh_attention_workspace_size(sh->ctx, &cp, sh->core_opt, &core_bytes) != MH_OK;
    if (errors) return errors;
    size_t most = fw_bytes > pre_bytes ? fw_bytes : pre_bytes;
    if (core_bytes > most) most = core_bytes;
    void* ws = aligned_alloc(64, (most + 63) / 64 * 64);
    void* ws1 = aligned_alloc(64, (one_bytes + 63) / 64 * 64);

    mh_attn_options causal = mh_attn_options_default();
    causal.causal = 1;
    mh_forward_args a = {.batch = s->B, .n_q = s->N, .query = x, .out = r->fwd, .opt = &causal};
    errors += mh_layer_forward(sh->layer, &a, ws, fw_bytes) != MH_OK;

    mh_attn_options masked = mh_attn_options_default();
    masked.mask = sh->mask, masked.mask_stride_row = s->N, masked.kv_len = sh->kv_len;
    masked.probs = r->probs;
    a.out = r->fwd_m, a.opt = &masked;
    errors += mh_layer_forward(sh->layer, &a, ws, fw_bytes) != MH_OK;

    mh_kv_cache* cache = NULL;
    errors += mh_kv_cache_create(sh->layer, s->B, s->N, cache_dtype(index), &cache) != MH_OK;
    if (cache) {
        const size_t d = (size_t)s->d_model;
        float* xin = malloc(sizeof(float) * (size_t)s->B * s->prefill * d);
        float* yout = malloc(sizeof(float) * (size_t)s->B * s->prefill * d);
        for (int t = 0; t < s->N;) {
            const int n = t == 0 ? s->prefill : 1;
            for (int b = 0; b < s->B; b++)
                memcpy(xin + (size_t)b * n * d, x + ((size_t)b * s->N + t) * d, sizeof(float) * n * d);
            errors += mh_layer_decode(sh->layer, cache, &(mh_decode_args){.batch = s->B, .n_new = n, .x = xin, .out = yout}, n > 1 ? ws : ws1,
                                      n > 1 ? pre_bytes : one_bytes) != MH_OK;
            for (int b = 0; b < s->B; b++)
                memcpy(r->dec + ((size_t)b * s->N + t) * d, yout + (size_t)b * n * d, sizeof(float) * n * d);
            t += n;
        }
        free(xin), free(yout);
        mh_kv_cache_destroy(cache);
    }
    errors += mh_attention(sh->ctx, &cp, sh->core_opt, ws, core_bytes) != MH_OK;
    free(ws), free(ws1);
    return errors;
}

static int same(const float* a, const float* b, size_t n) { return memcmp(a, b, n * sizeof(float)) == 0; }

static void* worker_main(void* arg) {
    worker* w = (worker*)arg;
    const shape* s = w->sh->s;
    results r;
    const size_t core_elems = w->sh->core->o_elems;
    results_alloc(&r, s, core_elems);
    pthread_barrier_wait(&w->sh->start);
    for (int round = 0; round < g_rounds; round++) {
        memset(r.core_o, 0, sizeof(float) * core_elems);
        w->errors += run_sequence(w->sh, w->index, &r);
        w->mismatches += !same(r.fwd, w->want->fwd, io_elems(s));
        w->mismatches += !same(r.fwd_m, w->want->fwd_m, io_elems(s));
        w->mismatches += !same(r.probs, w->want->probs, probs_elems(s));
        w->mismatches += !same(r.dec, w->want->dec, io_elems(s));
        w->mismatches += !same(r.core_o, w->want->core_o, core_elems);
    }
    results_free(&r);
    return NULL;
}

/* n_callers threads at once on a layer made with a context of ctx_threads threads. */
static void run_part(const shape* s, int n_callers, int ctx_threads, uint64_t seed) {
    char what[200];
    test_rng rng;
    rng_seed(&rng, seed);
    mh_context* ctx1 = test_context(1);
    mh_context* ctx = test_context(ctx_threads);
    float slopes[64], sinks[64];
    for (int h = 0; h < s->H; h++) slopes[h] = 0.0625f * (float)(h + 1), sinks[h] = 0.25f * (float)(h % 3);
    mh_layer_config c = mh_layer_config_default();
    c.variant = MH_VARIANT_GQA, c.d_model = s->d_model, c.n_heads = s->H, c.n_kv_heads = s->Hkv;
    c.head_dim = s->D, c.bias = 1, c.softcap = 30.0f, c.alibi_slopes = slopes, c.sinks = sinks;
    layer_fixture f;
    if (!check_status("fixture", fixture_make(&f, ctx1, &c, &rng, 0.2f), MH_OK)) exit(1);
    mh_layer* layer = NULL;
    check_status("layer on the tested context", fixture_recreate(&f, ctx, &c, &layer), MH_OK);

    float* xs[INPUT_SETS];
    for (int i = 0; i < INPUT_SETS; i++) {
        xs[i] = malloc(sizeof(float) * io_elems(s));
        rng_fill(&rng, xs[i], io_elems(s), -1, 1);
    }
    float* mask = malloc(sizeof(float) * (size_t)s->N * s->N);
    for (int i = 0; i < s->N * s->N; i++) mask[i] = rng_int(&rng, 0, 7) == 0 ? -INFINITY : rng_uniform(&rng, -1, 1);
    int32_t kv_len[8];
    for (int b = 0; b < s->B; b++) kv_len[b] = s->N - 3 * b;

    test_problem core;
    problem_make(&core, &rng, 2, 37, 300, 6, 2, 40, 24, MH_DTYPE_BF16, LAYOUT_PADDED, 1.0f);
    mh_attn_options core_opt = mh_attn_options_default();
    core_opt.causal = 1, core_opt.window = 100;

    shared sh;
    memset(&sh, 0, sizeof sh);
    sh.s = s, sh.ctx = ctx, sh.layer = layer, sh.mask = mask, sh.kv_len = kv_len;
    sh.core = &core, sh.core_opt = &core_opt;
    for (int i = 0; i < INPUT_SETS; i++) sh.x[i] = xs[i];
    /* references: the same sequences on this thread, with the 1-thread layer and context */
    shared ref_sh = sh;
    ref_sh.ctx = ctx1, ref_sh.layer = f.layer;
    results want[MAX_THREADS];
    for (int i = 0; i < n_callers; i++) {
        results_alloc(&want[i], s, core.o_elems);
        memset(want[i].core_o, 0, sizeof(float) * core.o_elems);
        snprintf(what, sizeof what, "reference sequence %d", i);
        check_status(what, run_sequence(&ref_sh, i, &want[i]), 0);
    }

    pthread_barrier_init(&sh.start, NULL, (unsigned)n_callers);
    pthread_t tid[MAX_THREADS];
    worker w[MAX_THREADS];
    for (int i = 0; i < n_callers; i++) {
        w[i].sh = &sh, w[i].index = i, w[i].want = &want[i], w[i].mismatches = 0, w[i].errors = 0;
        if (pthread_create(&tid[i], NULL, worker_main, &w[i]) != 0) {
            fprintf(stderr, "pthread_create failed\n");
            exit(1);
        }
    }
    for (int i = 0; i < n_callers; i++) pthread_join(tid[i], NULL);
    pthread_barrier_destroy(&sh.start);
    for (int i = 0; i < n_callers; i++) {
        snprintf(what, sizeof what,
                 "%d callers x %d-thread context, thread %d (%s cache): every call returned MH_OK",
                 n_callers, ctx_threads, i, cache_dtype(i) == MH_DTYPE_F32 ? "f32" : cache_dtype(i) == MH_DTYPE_F16 ? "f16" : "bf16");
        check_status(what, w[i].errors, 0);
        snprintf(what, sizeof what,
                 "%d callers x %d-thread context, thread %d: %d rounds of forward, masked forward + "
                 "probs, decode and core bitwise equal to the single-threaded run",
                 n_callers, ctx_threads, i, g_rounds);
        if (w[i].mismatches) fprintf(stderr, "  thread %d: %d outputs differ\n", i, w[i].mismatches);
        check_true(what, w[i].mismatches == 0);
    }
    for (int i = 0; i < n_callers; i++) results_free(&want[i]);
    for (int i = 0; i < INPUT_SETS; i++) free(xs[i]);
    free(mask);
    problem_free(&core);
    mh_layer_destroy(layer);
    fixture_free(&f);
    mh_context_destroy(ctx);
    mh_context_destroy(ctx1);
}

int main(int argc, char** argv) {
    int teams = !(argc > 1 && strcmp(argv[1], "--no-omp-teams") == 0);
    mh_context* probe = test_context(1);
    const int slow = slow_machine(probe, SLOW_MS);
    mh_context_destroy(probe);
    if (slow) g_rounds = 1;
    /* 8 callers on 1-thread contexts: small shapes, many calls at once */
    static const shape small = {2, 24, 48, 8, 2, 12, 9};
    run_part(&small, 8, 1, 11);
    /* 2 callers on a 2-thread context: shapes where the library forks (projections and the
     * causal attention above its ~16 MFLOP per-worker threshold) */
    static const shape big = {2, 128, 256, 8, 2, 32, 100};
    static const shape big_slow = {2, 40, 64, 8, 2, 8, 30}; /* does not fork */
    if (teams) run_part(slow ? &big_slow : &big, 2, 2, 12);
    else printf("2 callers x 2-thread context: skipped (--no-omp-teams)\n");
    return test_exit_code("test_concurrent_layers");
}
