/*
 * Tensor-parallel decode over MPI (docs/scale-out.md, "Heads over ranks").
 *
 * One attention layer (GQA family, H query heads, Hkv K/V heads, f16 KV cache) is split over
 * P ranks by heads, Megatron-style: rank r creates mh_layer_create_shard(.., r, P) from the
 * full layer's weights, so it holds H/P query heads, their K/V heads (MQA: the one K/V head),
 * their rows of W_Q/W_K/W_V, the matching columns of W_O and a KV cache of its K/V heads only.
 * Every rank prefills the same prompt into its cache, then decodes token by token: its
 * mh_layer_decode writes a partial output [d_model] (b_o added on rank 0 only), and one
 * MPI_Allreduce (sum) gives every rank the layer's output (4 d_model bytes per token).
 * The next input is the RMS-normalised output, as generation feeds a token back.
 *
 * Checks (rank 0, with 2 or more ranks): every step's summed output against the full layer
 * (mh_layer_create) run in one process over the same inputs, rel-L2 <= 1e-6 (not bitwise: the
 * W_O products are summed in another order).
 *
 *   mpirun -np 2 example_mpi_tensor_parallel_decode [--keys M] [--d-model d] [--heads H]
 *          [--kv-heads Hkv] [--head-dim D] [--steps S] [--threads T] [--time]
 * M is the prompt (the cached keys at the first step). --time prints the median per step of
 * the decode (rank 0's, and the slowest rank's), the wait for the slowest rank (a barrier,
 * only with --time) and the all-reduce. With one rank it is the single-process baseline. Exit status 0 when every check passes.
 */
#include <math.h>
#include <mpi.h>
#include <multihead.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_example_util.h"

#define PREFILL_CHUNK 512 /* prompt tokens per mh_layer_decode call */

/* A deterministic value in [-amp, amp) of index i (every rank makes the same weights). */
static float hashed(uint64_t i, float amp) {
    uint64_t z = i * 0x9E3779B97F4A7C15ull + 0xD1B54A32D192ED03ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return amp * ((float)(z >> 40) / (float)(1 << 24) * 2.0f - 1.0f);
}

static float* hashed_buffer(size_t n, uint64_t seed, float amp) {
    float* x = malloc(sizeof(float) * n);
    if (!x) MPI_Abort(MPI_COMM_WORLD, 3);
    for (size_t i = 0; i < n; i++) x[i] = hashed(seed + i, amp);
    return x;
}

/* The full layer's weights, PyTorch layout, with biases. */
typedef struct model {
    mh_layer_config cfg;
    mh_layer_weights w;
    float *wq, *wk, *wv, *wo, *bq, *bk, *bv, *bo;
} model;

static void make_model(model* m, int d, int H, int Hkv, int D) {
    memset(m, 0, sizeof *m);
    m->cfg = mh_layer_config_default();
    m->cfg.variant = MH_VARIANT_GQA, m->cfg.d_model = d, m->cfg.n_heads = H, m->cfg.n_kv_heads = Hkv;
    m->cfg.head_dim = D, m->cfg.bias = 1;
    const size_t hd = (size_t)H * D, kvd = (size_t)Hkv * D;
    const float a_in = 1.0f / sqrtf((float)d), a_out = 1.0f / sqrtf((float)hd);
    m->wq = hashed_buffer(hd * d, 1ull << 40, a_in), m->bq = hashed_buffer(hd, 2ull << 40, a_in);
    m->wk = hashed_buffer(kvd * d, 3ull << 40, a_in), m->bk = hashed_buffer(kvd, 4ull << 40, a_in);
    m->wv = hashed_buffer(kvd * d, 5ull << 40, a_in), m->bv = hashed_buffer(kvd, 6ull << 40, a_in);
    m->wo = hashed_buffer((size_t)d * hd, 7ull << 40, a_out), m->bo = hashed_buffer((size_t)d, 8ull << 40, a_out);
    m->w = (mh_layer_weights){.w_q = m->wq, .w_k = m->wk, .w_v = m->wv, .w_o = m->wo,
                              .b_q = m->bq, .b_k = m->bk, .b_v = m->bv, .b_o = m->bo};
}

static void free_model(model* m) {
    free(m->wq), free(m->wk), free(m->wv), free(m->wo), free(m->bq), free(m->bk), free(m->bv), free(m->bo);
}

/* A layer (or shard) with its f16 cache of the prompt's M tokens x [M, d], prefilled. */
typedef struct runner {
    mh_layer* layer;
    mh_kv_cache* cache;
    void* ws;
    size_t ws_bytes;
} runner;

static int start(runner* r, const mh_context* ctx, const model* m, int index, int count, int M, int steps,
                 const float* prompt) {
    const int d = m->cfg.d_model;
    if (mh_layer_create_shard(ctx, &m->cfg, &m->w, index, count, &r->layer) != MH_OK) return 0;
    if (mh_kv_cache_create(r->layer, 1, M + steps, MH_DTYPE_F16, &r->cache) != MH_OK) return 0;
    size_t a = 0, b = 0; /* one workspace for the prompt's chunks and the single tokens */
    mh_layer_decode_workspace_size(r->layer, 1, PREFILL_CHUNK, &a);
    mh_layer_decode_workspace_size(r->layer, 1, 1, &b);
    r->ws_bytes = a > b ? a : b;
    r->ws = aligned_buffer(r->ws_bytes);
    float* y = malloc(sizeof(float) * (size_t)PREFILL_CHUNK * d);
    int ok = y != NULL;
    for (int t = 0; t < M && ok; t += PREFILL_CHUNK) {
        const int n = M - t < PREFILL_CHUNK ? M - t : PREFILL_CHUNK;
        const mh_decode_args da = {.batch = 1, .n_new = n, .x = prompt + (size_t)t * d, .out = y};
        ok = mh_layer_decode(r->layer, r->cache, &da, r->ws, r->ws_bytes) == MH_OK;
    }
    free(y);
    return ok;
}

static int step(runner* r, const float* x, float* y) {
    const mh_decode_args da = {.batch = 1, .n_new = 1, .x = x, .out = y};
    return mh_layer_decode(r->layer, r->cache, &da, r->ws, r->ws_bytes) == MH_OK;
}

static void stop(runner* r) {
    free(r->ws);
    mh_kv_cache_destroy(r->cache);
    mh_layer_destroy(r->layer);
}

/* The next input: y RMS-normalised. */
static void next_input(const float* y, int d, float* x) {
    double ss = 0;
    for (int i = 0; i < d; i++) ss += (double)y[i] * y[i];
    const float s = (float)(1.0 / sqrt(ss / d + 1e-6));
    for (int i = 0; i < d; i++) x[i] = y[i] * s;
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rank, P;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    const int M = arg_int(argc, argv, "--keys", 256), d = arg_int(argc, argv, "--d-model", 256);
    const int H = arg_int(argc, argv, "--heads", 8), Hkv = arg_int(argc, argv, "--kv-heads", 8);
    const int D = arg_int(argc, argv, "--head-dim", 32), steps = arg_int(argc, argv, "--steps", 4);
    const int threads = arg_int(argc, argv, "--threads", 1), timing = arg_flag(argc, argv, "--time");
    if (steps < 1 || steps > 64) MPI_Abort(MPI_COMM_WORLD, 2);

    mh_context_config cc = mh_context_config_default();
    cc.num_threads = threads;
    mh_context* ctx;
    if (mh_context_create(&cc, &ctx) != MH_OK) MPI_Abort(MPI_COMM_WORLD, 2);
    model m;
    make_model(&m, d, H, Hkv, D);
    float* prompt = hashed_buffer((size_t)M * d, 9ull << 40, 1.0f);
    float* xs = malloc(sizeof(float) * (size_t)(steps + 1) * d); /* [steps + 1][d] the inputs */
    float* ys = malloc(sizeof(float) * (size_t)steps * d);       /* [steps][d] the outputs */
    float* part = malloc(sizeof(float) * (size_t)d);
    double t_dec[64], t_wait[64], t_comm[64];
    runner r = {0};
    int ok = start(&r, ctx, &m, rank, P, M, steps, prompt);
    next_input(prompt + (size_t)(M - 1) * d, d, xs);
    for (int t = 0; t < steps; t++) { /* every rank takes every step (the all-reduce is collective) */
        MPI_Barrier(MPI_COMM_WORLD);
        const double a = now_s();
        ok &= step(&r, xs + (size_t)t * d, part);
        const double b0 = now_s();
        if (timing) MPI_Barrier(MPI_COMM_WORLD); /* the wait for the slowest rank, apart */
        const double b = now_s();
        MPI_Allreduce(part, ys + (size_t)t * d, d, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        const double c = now_s();
        next_input(ys + (size_t)t * d, d, xs + (size_t)(t + 1) * d);
        t_dec[t] = b0 - a, t_wait[t] = b - b0, t_comm[t] = c - b;
    }
    stop(&r);
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (ok && timing) {
        const double dec = median_ms(t_dec, steps), wait = median_ms(t_wait, steps), comm = median_ms(t_comm, steps);
        double slowest = 0;
        MPI_Reduce(&dec, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (rank == 0)
            printf("tensor parallel: %d rank(s) x %d thread(s), %d cached keys, d_model %d H%d Hkv%d D%d f16, medians "
                   "of %d steps: decode %.3f ms (slowest rank %.3f), wait %.3f ms, all-reduce %.3f ms; %zu bytes "
                   "all-reduced per token\n",
                   P, threads, M, d, H, Hkv, D, steps, dec, slowest, wait, comm, (size_t)d * sizeof(float));
        fflush(stdout); /* before the check, which refills a whole cache */
    }
    if (rank == 0 && ok && P > 1) { /* the full layer in one process, on the same inputs (one rank:
                                        the run is that computation) */
        runner full = {0};
        float* y = malloc(sizeof(float) * (size_t)d);
        ok = start(&full, ctx, &m, 0, 1, M, steps, prompt);
        double num = 0, den = 0;
        for (int t = 0; t < steps && ok; t++) {
            ok = step(&full, xs + (size_t)t * d, y);
            rel_l2_add(ys + (size_t)t * d, y, (size_t)d, &num, &den);
        }
        stop(&full);
        const double rel = sqrt(num / den);
        ok &= rel <= 1e-6;
        printf("%s: tensor-parallel decode over %d rank(s), %d steps after %d keys: rel-L2 %.3g against one "
               "process (<= 1e-6)\n", ok ? "ok  " : "FAIL", P, steps, M, rel);
        free(y);
    }
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    free(prompt), free(xs), free(ys), free(part);
    free_model(&m);
    mh_context_destroy(ctx);
    MPI_Finalize();
    return ok ? 0 : 1;
}
