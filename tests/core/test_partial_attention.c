/*
 * Partial attention (context parallelism, docs/scale-out.md) on the forced ISA:
 *  - lse: each row's log-sum-exp against a double log-sum-exp written here from the score
 *    order of multihead.h (causal, window, kv_len, ALiBi, sinks), for prefill- and
 *    decode-shaped calls (split-KV decode: M >= 2048, N = 1), with probs and with head_gates;
 *  - key shards: the keys cut into P shards at absolute offsets (kv_offset; q_offset given, or
 *    MH_Q_OFFSET_END on the last shard), sinks on shard 0 only, kv_len clamped per shard;
 *    mh_attention_merge of the P partials equals the double oracle of the whole call to fp32
 *    rounding, and its lse the double log-sum-exp;
 *  - merge of one part is the identity (bitwise), merge in reverse order equals it to rounding,
 *    and bad merge arguments return a status and write nothing.
 *
 * Tolerance: as test_attention_oracle (max_abs 4 eps (Dqk + M + 16) amp, rel_l2 1e-6): every
 * shard's output is such an f32 result over its keys, and the merge adds a few ulp per row
 * (one exp per part, one division); lse is compared in absolute terms, 8 eps (|lse| + Dqk).
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "oracle.h"
#include "problem.h"

/* The double log-sum-exp of every row, lse [B, H, N]: over the kept keys' scores (multihead.h:
 * scale q.k, ALiBi slope (j - p), dropped past kv_len, by causality and by the window) and the
 * sink; -inf for a row with neither. K/V read through oracle_kv (f16/bf16 as stored). */
static void oracle_lse(const mh_attn_problem* p, const mh_attn_options* o, double* lse) {
    const int B = p->batch, N = p->n_q, M = p->n_kv, H = p->n_heads, D = p->head_dim_qk;
    const double scale = p->scale != 0.0f ? p->scale : 1.0 / sqrt((double)D);
    const float* q = p->q.data;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < N; i++) {
                const int kvl = o->kv_len ? o->kv_len[b] : M;
                const long long pos = o->q_offset == MH_Q_OFFSET_END ? kvl - N + i : o->q_offset + i;
                double mx = -INFINITY, sum = 0;
                double* s = malloc(sizeof(double) * (size_t)(M + 1));
                int n = 0;
                for (int j = 0; j < kvl; j++) {
                    if (o->causal && j > pos) continue;
                    if (o->window > 0 && (pos - j >= o->window || (!o->causal && j - pos >= o->window))) continue;
                    double d = 0;
                    for (int e = 0; e < D; e++)
                        d += (double)q[b * p->q.stride_batch + i * p->q.stride_token + h * p->q.stride_head + e] *
                             oracle_kv(&p->k, p->k_dtype, b, j, h / (H / p->n_kv_heads), e);
                    d *= scale;
                    if (o->alibi_slopes) d += (double)o->alibi_slopes[h] * (double)(j - pos);
                    s[n++] = d;
                }
                if (o->sinks) s[n++] = o->sinks[h];
                for (int j = 0; j < n; j++) mx = s[j] > mx ? s[j] : mx;
                for (int j = 0; j < n; j++) sum += exp(s[j] - mx);
                lse[((size_t)b * H + h) * N + i] = n ? mx + log(sum) : -INFINITY;
                free(s);
            }
}

/* got [n] against want: -inf exactly where want is, else within tol. */
static void check_lse(const char* what, const float* got, const double* want, size_t n, double D) {
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        const int inf_w = isinf(want[i]), inf_g = isinf(got[i]);
        if (inf_w || inf_g) {
            bad += !(inf_w && inf_g && got[i] < 0 && want[i] < 0);
            continue;
        }
        bad += fabs(got[i] - want[i]) > 8.0 * FLT_EPSILON * (fabs(want[i]) + D);
    }
    char msg[320];
    snprintf(msg, sizeof msg, "%s: lse (%zu of %zu rows off)", what, bad, n);
    check_true(msg, bad == 0);
}

/* Options of one case, the arrays they point at. */
typedef struct opts {
    mh_attn_options o;
    int32_t kv_len[4];
    float slopes[16], sinks[16];
} opts;

static void make_opts(test_rng* r, int B, int N, int M, int H, int flags, opts* c) {
    memset(c, 0, sizeof *c);
    c->o = mh_attn_options_default();
    c->o.causal = flags & 1;
    c->o.q_offset = (flags & 2) ? MH_Q_OFFSET_END : M - N + rng_int(r, -N, N > 1 ? 0 : 3);
    if (c->o.q_offset != MH_Q_OFFSET_END && c->o.q_offset < 0) c->o.q_offset = 0;
    if (flags & 4) c->o.window = rng_int(r, 1, M);
    if (flags & 8) {
        for (int b = 0; b < B; b++) c->kv_len[b] = rng_int(r, 0, M);
        c->kv_len[0] = M;
        c->o.kv_len = c->kv_len;
    }
    /* |ALiBi| <= 8 over the M keys: a bias of size A puts A * eps32 of rounding into the
     * scores, which the 1e-6 bound would not cover for A in the hundreds */
    for (int h = 0; h < H; h++) c->slopes[h] = -rng_uniform(r, 0.0f, 8.0f / (float)M), c->sinks[h] = rng_uniform(r, -2, 4);
    if (flags & 16) c->o.alibi_slopes = c->slopes;
    if (flags & 32) c->o.sinks = c->sinks;
}

/* The problem of keys [j0, j1) of t (the same Q and O buffers, O redirected to o). */
static mh_attn_problem shard_of(const test_problem* t, int j0, int j1, float* o) {
    mh_attn_problem p = t->p;
    const size_t ek = p.k_dtype == MH_DTYPE_F32 ? 4 : 2, ev = p.v_dtype == MH_DTYPE_F32 ? 4 : 2;
    p.n_kv = j1 - j0;
    p.k.data = (const char*)p.k.data + (size_t)j0 * (size_t)p.k.stride_token * ek;
    p.v.data = (const char*)p.v.data + (size_t)j0 * (size_t)p.v.stride_token * ev;
    const int H = p.n_heads, N = p.n_q, Dv = p.head_dim_v;
    p.o = (mh_tensor_out){o, (ptrdiff_t)N * H * Dv, (ptrdiff_t)H * Dv, Dv};
    return p;
}

static void run_case(const mh_context* ctx, test_rng* r, int B, int N, int M, int H, int Hkv, int D,
                     mh_dtype dt, int P, int flags) {
    test_problem t;
    problem_make(&t, r, B, N, M, H, Hkv, D, D, dt, LAYOUT_TOKEN_MAJOR, 1.0f);
    opts c;
    make_opts(r, B, N, M, H, flags, &c);
    char what[256];
    snprintf(what, sizeof what, "B%d N%d M%d H%d Hkv%d D%d dt%d P%d flags %d", B, N, M, H, Hkv, D, (int)dt, P, flags);
    const size_t n_o = (size_t)B * N * H * D, n_l = (size_t)B * H * N;
    double* want = malloc(n_o * sizeof(double));
    double* want_lse = malloc(n_l * sizeof(double));
    oracle_attention(&t.p, &c.o, want, NULL);
    oracle_lse(&t.p, &c.o, want_lse);
    const double tol = 4.0 * FLT_EPSILON * (D + M + 16);

    /* the whole call, with lse */
    float* full = malloc(n_o * sizeof(float));
    float* full_lse = malloc(n_l * sizeof(float));
    mh_attn_options o = c.o;
    o.lse = full_lse;
    mh_attn_problem whole = shard_of(&t, 0, M, full);
    if (!check_status(what, run_attention(ctx, &whole, &o), MH_OK)) goto done;
    check_close(what, full, want, n_o, tol, 1e-6);
    check_lse(what, full_lse, want_lse, n_l, D);

    /* P key shards at absolute offsets, merged */
    float* outs[4];
    float* lses[4];
    int bounds[5];
    for (int s = 0; s <= P; s++) bounds[s] = (int)((long long)M * s / P);
    for (int s = 0; s < P; s++) {
        outs[s] = malloc(n_o * sizeof(float));
        lses[s] = malloc(n_l * sizeof(float));
        mh_attn_problem ps = shard_of(&t, bounds[s], bounds[s + 1], outs[s]);
        opts cs = c;
        cs.o.lse = lses[s], cs.o.kv_offset = bounds[s];
        /* MH_Q_OFFSET_END puts the queries after the last shard's keys: the others are given
         * that absolute position (kv_len: B = 1, its kv_len[0] = M) */
        if (c.o.q_offset == MH_Q_OFFSET_END && (s < P - 1 || c.o.kv_len)) cs.o.q_offset = M - N;
        if (c.o.kv_len)
            for (int b = 0; b < B; b++) {
                const int k = c.kv_len[b] - bounds[s];
                cs.kv_len[b] = k < 0 ? 0 : k > ps.n_kv ? ps.n_kv : k;
            }
        cs.o.kv_len = c.o.kv_len ? cs.kv_len : NULL;
        cs.o.sinks = s == 0 ? c.o.sinks : NULL;
        if (!check_status(what, run_attention(ctx, &ps, &cs.o), MH_OK)) goto done_shards;
    }
    {
        float* merged = malloc(n_o * sizeof(float));
        float* merged_lse = malloc(n_l * sizeof(float));
        check_status(what, mh_attention_merge(P, (const float* const*)outs, (const float* const*)lses, B, N, H, D,
                                              merged, merged_lse), MH_OK);
        check_close(what, merged, want, n_o, tol, 1e-6);
        check_lse(what, merged_lse, want_lse, n_l, D);
        /* the reverse order: the same to rounding */
        const float* routs[4];
        const float* rlses[4];
        for (int s = 0; s < P; s++) routs[s] = outs[P - 1 - s], rlses[s] = lses[P - 1 - s];
        float* rev = malloc(n_o * sizeof(float));
        check_status(what, mh_attention_merge(P, routs, rlses, B, N, H, D, rev, NULL), MH_OK);
        check_close_f32(what, rev, merged, n_o, 8.0 * FLT_EPSILON);
        /* in place into outs[0] */
        check_status(what, mh_attention_merge(P, (const float* const*)outs, (const float* const*)lses, B, N, H, D,
                                              outs[0], lses[0]), MH_OK);
        check_bitwise(what, outs[0], merged, n_o);
        check_bitwise(what, lses[0], merged_lse, n_l);
        free(merged), free(merged_lse), free(rev);
    }
done_shards:
    for (int s = 0; s < P; s++) free(outs[s]), free(lses[s]);
done:
    free(want), free(want_lse), free(full), free(full_lse);
    problem_free(&t);
}

/* head_gates with lse: gated rows have lse -inf, the others the plain call's (to rounding). */
static void gated_case(const mh_context* ctx, test_rng* r) {
    const int B = 2, N = 5, M = 70, H = 4, Hkv = 2, D = 16;
    test_problem t;
    problem_make(&t, r, B, N, M, H, Hkv, D, D, MH_DTYPE_F32, LAYOUT_TOKEN_MAJOR, 1.0f);
    const size_t n_l = (size_t)B * H * N;
    float gates[2 * 5 * 4], lse_g[2 * 4 * 5], lse_p[2 * 4 * 5];
    for (int i = 0; i < B * N * H; i++) gates[i] = i % 3 ? rng_uniform(r, 0.5f, 1.5f) : 0.0f;
    mh_attn_options o = mh_attn_options_default();
    o.causal = 1, o.lse = lse_p;
    check_status("gated: plain", run_attention(ctx, &t.p, &o), MH_OK);
    o.head_gates = gates, o.lse = lse_g;
    check_status("gated", run_attention(ctx, &t.p, &o), MH_OK);
    size_t bad = 0;
    for (size_t k = 0; k < n_l; k++) { /* lse (b, h, i) against gate (b, i, h) */
        const size_t b = k / (H * N), h = k / N % H, i = k % N;
        const float g = gates[(b * N + i) * H + h];
        bad += g == 0.0f ? lse_g[k] != -INFINITY : fabsf(lse_g[k] - lse_p[k]) > 8 * FLT_EPSILON * (fabsf(lse_p[k]) + D);
    }
    check_true("gated: lse", bad == 0);
    problem_free(&t);
}

/* Merge of one part is a copy; bad arguments write nothing. */
static void merge_edges(const mh_context* ctx, test_rng* r) {
    const int B = 2, N = 3, H = 2, Dv = 5, n_o = B * N * H * Dv, n_l = B * H * N;
    float o[60], l[12], out[60], lo[12], sent[60];
    rng_fill(r, o, n_o, -1, 1);
    rng_fill(r, l, n_l, -3, 3);
    l[4] = -INFINITY; /* a row with no key: its output row is zeros */
    memset(o + ((0 * N + 1) * H + 1) * Dv, 0, Dv * sizeof(float)); /* lse row 4 (b 0, h 1, i 1) */
    const float* outs[2] = {o, o};
    const float* lses[2] = {l, l};
    check_status("merge 1", mh_attention_merge(1, outs, lses, B, N, H, Dv, out, lo), MH_OK);
    check_bitwise("merge 1: out", out, o, (size_t)n_o);
    check_bitwise("merge 1: lse", lo, l, (size_t)n_l);
    /* two equal parts: the same rows, lse + log 2 */
    check_status("merge 2", mh_attention_merge(2, outs, lses, B, N, H, Dv, out, lo), MH_OK);
    check_close_f32("merge 2: out", out, o, (size_t)n_o, 4 * FLT_EPSILON);
    check_true("merge 2: empty row", lo[4] == -INFINITY);
    check_true("merge 2: lse", fabsf(lo[0] - (l[0] + logf(2.0f))) <= 8 * FLT_EPSILON * (fabsf(l[0]) + 1));
    for (int i = 0; i < n_o; i++) sent[i] = out[i] = 12345.0f;
    const float* nulls[2] = {o, NULL};
    const float* aliased[2] = {o, out};
    const mh_status bad[] = {
        mh_attention_merge(0, outs, lses, B, N, H, Dv, out, lo),
        mh_attention_merge(2, NULL, lses, B, N, H, Dv, out, lo),
        mh_attention_merge(2, outs, NULL, B, N, H, Dv, out, lo),
        mh_attention_merge(2, nulls, lses, B, N, H, Dv, out, lo),
        mh_attention_merge(2, outs, nulls, B, N, H, Dv, out, lo),
        mh_attention_merge(2, aliased, lses, B, N, H, Dv, out, lo),
        mh_attention_merge(2, outs, lses, 0, N, H, Dv, out, lo),
        mh_attention_merge(2, outs, lses, B, -1, H, Dv, out, lo),
        mh_attention_merge(2, outs, lses, B, N, 0, Dv, out, lo),
        mh_attention_merge(2, outs, lses, B, N, H, 0, out, lo),
        mh_attention_merge(2, outs, lses, B, N, H, Dv, NULL, lo),
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char what[64];
        snprintf(what, sizeof what, "merge bad argument %zu", i);
        check_status(what, bad[i], MH_ERR_INVALID_ARGUMENT);
    }
    check_status("merge overflow", mh_attention_merge(1, outs, lses, 1 << 30, 1 << 30, 4, 4, out, lo),
                 MH_ERR_SIZE_OVERFLOW);
    check_bitwise("merge bad arguments write nothing", out, sent, (size_t)n_o);
    /* kv_offset out of range */
    test_problem t;
    problem_make(&t, r, 1, 1, 8, 1, 1, 4, 4, MH_DTYPE_F32, LAYOUT_TOKEN_MAJOR, 1.0f);
    mh_attn_options op = mh_attn_options_default();
    op.kv_offset = -1;
    check_status("kv_offset < 0", run_attention(ctx, &t.p, &op), MH_ERR_INVALID_ARGUMENT);
    problem_free(&t);
}

int main(void) {
    mh_context* ctx = test_context(2);
    test_rng r;
    rng_seed(&r, 1818);
    const int small = slow_machine(ctx, 20);
    const int big = small ? 1100 : 5000; /* split-KV decode needs M >= 2048 */
    const mh_dtype dts[] = {MH_DTYPE_F32, MH_DTYPE_F16, MH_DTYPE_BF16};
    for (int k = 0; k < 3; k++) {
        const mh_dtype dt = dts[k];
        /* decode-shaped: causal END (the last shard's keys end the sequence), ALiBi, sinks */
        run_case(ctx, &r, 2, 1, big, 8, 2, 64, dt, 2, 1 | 2 | 16 | 32);
        run_case(ctx, &r, 1, 1, big, 4, 1, 32, dt, 4, 1 | 2 | 4 | 32);
        /* prefill-shaped: window, kv_len, explicit q_offset */
        run_case(ctx, &r, 1, 37, 300, 4, 4, 32, dt, 3, 1 | 4 | 8 | 16);
        run_case(ctx, &r, 2, 20, 200, 6, 3, 16, dt, 2, 1 | 32 | 16);
        run_case(ctx, &r, 1, 9, 130, 2, 1, 8, dt, 4, 2 | 8 | 32); /* not causal, END with kv_len */
    }
    for (int i = 0; i < 8; i++) /* random small cases */
        run_case(ctx, &r, rng_int(&r, 1, 2), rng_int(&r, 1, 12), rng_int(&r, 16, 200), 4, rng_int(&r, 0, 1) ? 4 : 2, 16,
                 MH_DTYPE_F32, rng_int(&r, 2, 4), rng_int(&r, 0, 63) & ~8);
    gated_case(ctx, &r);
    merge_edges(ctx, &r);
    mh_context_destroy(ctx);
    return test_exit_code("test_partial_attention");
}
