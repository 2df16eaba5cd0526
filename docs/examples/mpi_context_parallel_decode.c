/*
 * Context-parallel decode over MPI (docs/scale-out.md, "Keys over ranks").
 *
 * An engine keeps a long KV cache (here M keys of H heads, f16, token-major [M][Hkv][D] as an
 * engine's own cache) split over the ranks: rank r holds keys [r M / P, (r + 1) M / P). Each
 * decode step, every rank runs mh_attention on the new query over ITS keys only, with
 *   kv_offset = its first key's absolute position (so the causal mask, windows and ALiBi see
 *               the real positions) and lse = each row's log-sum-exp;
 * then the ranks exchange their partial outputs and log-sum-exps (one MPI_Allgather each,
 * (H Dv + H) floats per rank per token) and each merges them with mh_attention_merge into the
 * exact output. No rank ever holds the whole cache.
 *
 * Checks (rank 0): every step's merged output against mh_attention over all M keys in one
 * process, rel-L2 <= 1e-6 (not bitwise: the sums are ordered differently). The keys and values
 * are multiples of 1/256 (keys in [-1, 1], values in [-0.5, 1.5]), exact in f16, so every rank
 * can make its own slice; the queries are 4 times wider, so the scores spread (standard
 * deviation about 1.3). Zero-mean values with near-uniform weights would instead cancel to
 * outputs about 1/sqrt(M) of their size, where two fp32 orders of the same sums differ by
 * more than 1e-6 relative to those outputs.
 *
 *   mpirun -np 2 example_mpi_context_parallel_decode [--keys M] [--heads H] [--kv-heads Hkv]
 *          [--head-dim D] [--steps S] [--threads T] [--time]
 * --time prints the median per step of the attention (rank 0's, and the slowest rank's),
 * the wait for the slowest rank (a barrier, only with --time), the exchange and the merge.
 * With one rank it is the single-process baseline.
 * Exit status 0 when every check passes.
 */
#include <math.h>
#include <mpi.h>
#include <multihead.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_example_util.h"

/* A deterministic value in [-1, 1] of key `i`, a multiple of 1/256 (exact in f16). */
static float hashed(uint64_t i) {
    uint64_t z = i * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (float)((int)(z % 513) - 256) / 256.0f;
}

/* f16 bits of x, which is 0 or a normal f16 number with at most 11 significant bits. */
static uint16_t f16_exact(float x) {
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    const uint32_t sign = (b >> 16) & 0x8000u;
    if ((b & 0x7fffffffu) == 0) return (uint16_t)sign;
    const uint32_t e = ((b >> 23) & 0xffu) - 127u + 15u, m = (b >> 13) & 0x3ffu;
    return (uint16_t)(sign | e << 10 | m);
}

typedef struct shape {
    int M, H, Hkv, D;
} shape;

/* K (kv = 0) or V (kv = 1) of keys [j0, j1): [j1 - j0][Hkv][D] f16. */
static uint16_t* make_kv(const shape* s, int kv, int j0, int j1) {
    const size_t row = (size_t)s->Hkv * (size_t)s->D, n = (size_t)(j1 - j0) * row;
    uint16_t* x = aligned_buffer(n * sizeof(uint16_t));
    const float shift = kv ? 0.5f : 0.0f; /* values in [-0.5, 1.5]: not zero-mean, as a model's */
    for (size_t i = 0; i < n; i++) x[i] = f16_exact(shift + hashed(2 * ((size_t)j0 * row + i) + (uint64_t)kv));
    return x;
}

/* The problem of one query over keys [j0, j1) held in k, v; its output o [H * D]. */
static mh_attn_problem problem(const shape* s, const float* q, const uint16_t* k, const uint16_t* v, int j0, int j1,
                               float* o) {
    mh_attn_problem p = {0};
    const ptrdiff_t row = (ptrdiff_t)s->Hkv * s->D;
    p.batch = 1, p.n_q = 1, p.n_kv = j1 - j0, p.n_heads = s->H, p.n_kv_heads = s->Hkv;
    p.head_dim_qk = p.head_dim_v = s->D;
    p.q = (mh_tensor){.data = q, .stride_batch = (ptrdiff_t)s->H * s->D, .stride_token = (ptrdiff_t)s->H * s->D,
                      .stride_head = s->D};
    p.k = (mh_tensor){.data = k, .stride_batch = (ptrdiff_t)(j1 - j0) * row, .stride_token = row, .stride_head = s->D};
    p.v = p.k;
    p.v.data = v;
    p.k_dtype = p.v_dtype = MH_DTYPE_F16;
    p.o = (mh_tensor_out){o, (ptrdiff_t)s->H * s->D, (ptrdiff_t)s->H * s->D, s->D};
    return p;
}

/* Attention of q over keys [j0, j1) into o (and lse [H] when not NULL), the query at the
 * newest key's position M - 1 (causal: it sees every key). */
static mh_status attend(const mh_context* ctx, const shape* s, const float* q, const uint16_t* k, const uint16_t* v,
                        int j0, int j1, float* o, float* lse, void* ws, size_t ws_bytes) {
    const mh_attn_problem p = problem(s, q, k, v, j0, j1, o);
    mh_attn_options opt = mh_attn_options_default();
    opt.causal = 1, opt.q_offset = s->M - 1, opt.kv_offset = j0, opt.lse = lse;
    return mh_attention(ctx, &p, &opt, ws, ws_bytes);
}

static size_t workspace_bytes(const mh_context* ctx, const shape* s, int n_kv) {
    mh_attn_problem p = problem(s, NULL, NULL, NULL, 0, n_kv, NULL);
    const uint16_t dummy = 0;
    float fdummy = 0;
    p.q.data = &fdummy, p.k.data = p.v.data = &dummy, p.o.data = &fdummy;
    size_t bytes = 0;
    if (mh_attention_workspace_size(ctx, &p, NULL, &bytes) != MH_OK) MPI_Abort(MPI_COMM_WORLD, 2);
    return bytes;
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rank, P;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    const shape s = {arg_int(argc, argv, "--keys", 4096), arg_int(argc, argv, "--heads", 8),
                     arg_int(argc, argv, "--kv-heads", 8), arg_int(argc, argv, "--head-dim", 64)};
    const int steps = arg_int(argc, argv, "--steps", 4), threads = arg_int(argc, argv, "--threads", 1);
    const int timing = arg_flag(argc, argv, "--time");
    const size_t hd = (size_t)s.H * (size_t)s.D;

    mh_context_config cc = mh_context_config_default();
    cc.num_threads = threads;
    mh_context* ctx;
    if (mh_context_create(&cc, &ctx) != MH_OK) MPI_Abort(MPI_COMM_WORLD, 2);
    /* this rank's keys */
    const int j0 = (int)((int64_t)s.M * rank / P), j1 = (int)((int64_t)s.M * (rank + 1) / P);
    uint16_t* k = make_kv(&s, 0, j0, j1);
    uint16_t* v = make_kv(&s, 1, j0, j1);
    const size_t ws_bytes = workspace_bytes(ctx, &s, j1 - j0);
    void* ws = aligned_buffer(ws_bytes);
    float* q = malloc(sizeof(float) * hd * (size_t)steps);        /* [steps][H * D] */
    float* out = malloc(sizeof(float) * hd * (size_t)steps);      /* [steps][H * D] merged */
    float* part = malloc(sizeof(float) * hd);                     /* [H * D] this rank's */
    float lse[1024], lse_all[8192];
    float* parts = malloc(sizeof(float) * hd * (size_t)P);        /* [P][H * D] */
    const float* outs[64];
    const float* lses[64];
    double t_attn[64], t_wait[64], t_comm[64], t_merge[64];
    if (s.H > 1024 || s.H * P > 8192 || P > 64 || steps > 64) MPI_Abort(MPI_COMM_WORLD, 2);
    for (int p = 0; p < P; p++) outs[p] = parts + (size_t)p * hd, lses[p] = lse_all + (size_t)p * s.H;
    int ok = 1;
    for (int t = 0; t < steps; t++) {
        for (size_t i = 0; i < hd; i++) q[(size_t)t * hd + i] = 4.0f * hashed(((uint64_t)1 << 40) + (uint64_t)t * hd + i);
        MPI_Barrier(MPI_COMM_WORLD);
        const double a = now_s();
        ok &= attend(ctx, &s, q + (size_t)t * hd, k, v, j0, j1, part, lse, ws, ws_bytes) == MH_OK;
        const double b0 = now_s();
        if (timing) MPI_Barrier(MPI_COMM_WORLD); /* the wait for the slowest rank, apart */
        const double b = now_s();
        MPI_Allgather(part, (int)hd, MPI_FLOAT, parts, (int)hd, MPI_FLOAT, MPI_COMM_WORLD);
        MPI_Allgather(lse, s.H, MPI_FLOAT, lse_all, s.H, MPI_FLOAT, MPI_COMM_WORLD);
        const double c = now_s();
        ok &= mh_attention_merge(P, outs, lses, 1, 1, s.H, s.D, out + (size_t)t * hd, NULL) == MH_OK;
        const double d = now_s();
        t_attn[t] = b0 - a, t_wait[t] = b - b0, t_comm[t] = c - b, t_merge[t] = d - c;
    }
    const double attn = median_ms(t_attn, steps), wait = median_ms(t_wait, steps), comm = median_ms(t_comm, steps);
    const double merge = median_ms(t_merge, steps);
    double slowest = 0;
    MPI_Reduce(&attn, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0 && timing)
        printf("context parallel: %d rank(s) x %d thread(s), %d keys, H%d Hkv%d D%d f16, medians of %d steps: "
               "attention %.3f ms (slowest rank %.3f), wait %.3f ms, exchange %.3f ms, merge %.3f ms; %zu bytes "
               "sent per rank per token\n",
               P, threads, s.M, s.H, s.Hkv, s.D, steps, attn, slowest, wait, comm, merge,
               (hd + (size_t)s.H) * sizeof(float));
    free(k), free(v), free(ws);

    if (rank == 0) { /* the single-process computation over all M keys */
        uint16_t* kf = make_kv(&s, 0, 0, s.M);
        uint16_t* vf = make_kv(&s, 1, 0, s.M);
        const size_t bytes = workspace_bytes(ctx, &s, s.M);
        void* wf = aligned_buffer(bytes);
        double num = 0, den = 0;
        for (int t = 0; t < steps; t++) {
            ok &= attend(ctx, &s, q + (size_t)t * hd, kf, vf, 0, s.M, part, NULL, wf, bytes) == MH_OK;
            rel_l2_add(out + (size_t)t * hd, part, hd, &num, &den);
        }
        const double rel = sqrt(num / den);
        ok &= rel <= 1e-6;
        printf("%s: context-parallel decode over %d rank(s), %d steps at %d keys: rel-L2 %.3g against one "
               "process (<= 1e-6)\n", ok ? "ok  " : "FAIL", P, steps, s.M, rel);
        free(kf), free(vf), free(wf);
    }
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    free(q), free(out), free(part), free(parts);
    mh_context_destroy(ctx);
    MPI_Finalize();
    return ok ? 0 : 1;
}
