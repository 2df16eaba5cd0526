/*
 * Decode-shaped mh_attention calls on the same K/V values in three layouts give the same bits: a
 * head-major cache (rows of a head next to each other: the driver runs one head at a time, with
 * up to five query rows per K/V head each tile's P.V in turns with the next tile's Q.K^T) and a
 * token-major or padded one (rows kilobytes apart: the driver runs every head's key tile in
 * turn, docs/architecture.md "Decode on far-apart rows"; the token-major cache is dense, whose
 * next tile the kernels prefetch as one run of bytes, the padded one is not, whose kernels
 * prefetch the tile four heads on). The arithmetic of each head is the same either way, so the
 * outputs must be bitwise equal, for every K/V dtype, MHA and GQA groupings (from 8 rows per K/V
 * head the wider decode tiles, on the direct kernels in runs, a run of every head before the
 * next on the far-apart layouts, and from 24 rows on the packed GEMMs), split-KV lengths, causal
 * masks with per-sequence key lengths, and 1 or 2 threads; MHA with few heads (the driver's
 * kernels across heads on a token-major cache) and with 64 of 128 dims (its per-head tiles there
 * under the L1 rule, MH_DECODE_HEADS=l1; the kernels across heads under Zen 3's, any:
 * tests/CMakeLists.txt runs both). The head-major result is also checked against the double
 * oracle (the bound of test_attention_oracle), so the equality is not that of two equally wrong
 * answers.
 */
#include <float.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "oracle.h"
#include "problem.h"

static mh_context *ctx1, *ctx2;
static int max_threads = 2; /* 1 on an emulator, where 2 threads crawl (compared natively) */

/* Copies Q and the K/V values (rows and, for int8, scales) of `from` into `to`, a problem made
 * with the same shape and dtype in another layout. */
static void copy_kv(const test_problem* from, test_problem* to) {
    const mh_attn_problem* p = &from->p;
    for (int v = 0; v < 2; v++) {
        const mh_tensor* a = v ? &p->v : &p->k;
        const mh_tensor* b = v ? &to->p.v : &to->p.k;
        const mh_dtype dt = v ? p->v_dtype : p->k_dtype;
        const size_t es = dt == MH_DTYPE_F32 ? 4 : dt == MH_DTYPE_I8 ? 1 : 2;
        const int d = v ? p->head_dim_v : p->head_dim_qk;
        for (int bb = 0; bb < p->batch; bb++)
            for (int j = 0; j < p->n_kv; j++)
                for (int h = 0; h < p->n_kv_heads; h++) {
                    const ptrdiff_t ia = bb * a->stride_batch + j * a->stride_token + h * a->stride_head;
                    const ptrdiff_t ib = bb * b->stride_batch + j * b->stride_token + h * b->stride_head;
                    memcpy((char*)(void*)b->data + ib * (ptrdiff_t)es, (const char*)a->data + ia * (ptrdiff_t)es,
                           (size_t)d * es);
                    if (dt != MH_DTYPE_I8) continue;
                    float* sb = (float*)(void*)b->scale;
                    sb[bb * b->scale_stride_batch + j * b->scale_stride_token + h * b->scale_stride_head] =
                        a->scale[bb * a->scale_stride_batch + j * a->scale_stride_token + h * a->scale_stride_head];
                }
    }
    const mh_tensor *qa = &p->q, *qb = &to->p.q;
    for (int bb = 0; bb < p->batch; bb++)
        for (int i = 0; i < p->n_q; i++)
            for (int h = 0; h < p->n_heads; h++)
                memcpy((float*)(void*)qb->data + bb * qb->stride_batch + i * qb->stride_token + h * qb->stride_head,
                       (const float*)qa->data + bb * qa->stride_batch + i * qa->stride_token + h * qa->stride_head,
                       (size_t)p->head_dim_qk * sizeof(float));
}

static void one_case(test_rng* r, mh_dtype dt, int B, int N, int M, int H, int Hkv, int D, int causal) {
    char what[160];
    test_problem hm, other[2];
    problem_make(&hm, r, B, N, M, H, Hkv, D, D, dt, LAYOUT_HEAD_MAJOR, 1.0f);
    const test_layout far[2] = {LAYOUT_TOKEN_MAJOR, LAYOUT_PADDED};
    for (int i = 0; i < 2; i++) {
        problem_make(&other[i], r, B, N, M, H, Hkv, D, D, dt, far[i], 1.0f);
        copy_kv(&hm, &other[i]);
    }
    mh_attn_options opt = mh_attn_options_default();
    int32_t kv_len[2] = {M, M - M / 3};
    opt.causal = causal;
    if (causal && B == 2) opt.kv_len = kv_len;
    const size_t n = (size_t)B * N * H * D;
    float* want = malloc(n * sizeof(float));
    float* got = malloc(n * sizeof(float));
    double* oracle = malloc(n * sizeof(double));
    check_status("head-major call", run_attention(ctx1, &hm.p, &opt), MH_OK);
    problem_gather_o(&hm, want);
    oracle_attention(&hm.p, &opt, oracle, NULL);
    snprintf(what, sizeof what, "dtype %d B%d N%d M%d H%d Hkv%d D%d causal %d: head-major vs oracle", dt, B, N, M, H,
             Hkv, D, causal);
    check_close(what, want, oracle, n, 4 * FLT_EPSILON * (D + M + 16), 1e-6); /* test_attention_oracle's bound */
    for (int i = 0; i < 2; i++)
        for (int threads = 1; threads <= max_threads; threads++) {
            memset(other[i].o, 0, other[i].o_elems * sizeof(float));
            check_status("far-rows call", run_attention(threads == 1 ? ctx1 : ctx2, &other[i].p, &opt), MH_OK);
            problem_gather_o(&other[i], got);
            snprintf(what, sizeof what, "dtype %d B%d N%d M%d H%d Hkv%d D%d causal %d: layout %d, %d thread(s)", dt,
                     B, N, M, H, Hkv, D, causal, far[i], threads);
            check_bitwise(what, got, want, n);
        }
    free(want), free(got), free(oracle);
    problem_free(&hm), problem_free(&other[0]), problem_free(&other[1]);
}

int main(void) {
    ctx1 = test_context(1);
    ctx2 = test_context(2);
    test_rng r;
    rng_seed(&r, 29);
    const int slow = slow_machine(ctx1, 20.0);
    if (slow) {
        max_threads = 1;
        printf("test_decode_layouts: emulator: shorter caches, 1 thread (the 2-thread comparison runs natively)\n");
    }
    const mh_dtype dts[] = {MH_DTYPE_F32, MH_DTYPE_F16, MH_DTYPE_BF16, MH_DTYPE_I8};
    const int lengths[] = {70, 1500, 5000};
    for (size_t di = 0; di < sizeof dts / sizeof dts[0]; di++)
        for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
            const int M = slow ? lengths[li] / 4 + 3 : lengths[li];
            one_case(&r, dts[di], 2, 1, M, 8, 8, 64, (int)(li % 2));
            one_case(&r, dts[di], 1, 1, M, 8, 2, 128, 1);
            one_case(&r, dts[di], 2, 3, M, 4, 1, 40, 1); /* three rows, MQA, a d tail */
            one_case(&r, dts[di], 1, 2, M, 4, 4, 72, 1); /* two causal rows per head: a last tile they keep differently */
            one_case(&r, dts[di], 1, 2, M, 8, 4, 64, 1); /* four rows per K/V head (two heads, two causal queries) */
            /* eight and sixteen rows per K/V head (one query): more rows than a direct kernel
             * takes, in chunks of attn_direct_rows - 1, on the wider decode tiles in runs of
             * attn_kv_tile keys (core/driver_call.h; across streams: core/driver_across.c) */
            one_case(&r, dts[di], 1, 1, M, 16, 2, 64, 1);
            one_case(&r, dts[di], 2, 1, M, 16, 1, 40, 1); /* two key lengths: a partial last tile */
            /* 24 rows on one K/V head, and 36 on each of two: tasks on the packed GEMMs, whose
             * decode takes the wider key tiles in f32 (attn_group_kv_tile; core/attention.c) */
            one_case(&r, dts[di], 2, 1, M, 24, 1, 40, 1);
            one_case(&r, dts[di], 1, 1, M, 72, 2, 64, 0);
            /* MHA whose heads' query and score rows (64 x 192 floats, 48 KiB) outgrow the L1's
             * 5/8: under the L1 rule the per-head schedule of a token-major cache, where the
             * small heads above take the kernels across heads (core/driver_heads.c); under the
             * rule any, those kernels too */
            if (li == 0) one_case(&r, dts[di], 1, 1, M, 64, 64, 128, 0);
        }
    mh_context_destroy(ctx1);
    mh_context_destroy(ctx2);
    return test_exit_code("test_decode_layouts");
}
