#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "problem.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"

/* Storage rounding for test inputs. Exactness does not matter here: the oracle decodes the
 * stored bits, so both sides see the same rounded values. Tiny values flush to zero. */
static uint32_t bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static uint16_t to_f16(float f) {
    uint32_t u = bits(f), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a < 0x38800000u) return (uint16_t)sign;
    uint32_t r = a - 0x38000000u;
    r += 0xfffu + ((r >> 13) & 1u);
    return (uint16_t)(sign | (r >> 13));
}

static uint16_t to_bf16(float f) {
    uint32_t u = bits(f);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static void strides(test_layout layout, int T, int Hh, int D, int pad, mh_tensor* t, size_t* elems,
                    int B) {
    switch (layout) {
    case LAYOUT_HEAD_MAJOR:
        t->stride_token = D, t->stride_head = (ptrdiff_t)T * D, t->stride_batch = (ptrdiff_t)Hh * T * D;
        break;
    case LAYOUT_PADDED:
        t->stride_head = D + pad, t->stride_token = (ptrdiff_t)Hh * (D + pad) + 2 * pad + 1;
        t->stride_batch = (ptrdiff_t)T * t->stride_token + 5;
        break;
    default:
        t->stride_head = D, t->stride_token = (ptrdiff_t)Hh * D, t->stride_batch = (ptrdiff_t)T * Hh * D;
    }
    *elems = (size_t)t->stride_batch * (size_t)B;
    if ((size_t)((B - 1) * t->stride_batch + (T - 1) * t->stride_token + (Hh - 1) * t->stride_head + D) > *elems)
        *elems = (size_t)((B - 1) * t->stride_batch + (T - 1) * t->stride_token + (Hh - 1) * t->stride_head + D);
}

static void* fill_kv(test_rng* r, size_t n, mh_dtype dt, float amp) {
    size_t es = dt == MH_DTYPE_F32 ? 4 : dt == MH_DTYPE_I8 ? 1 : 2;
    void* buf = calloc(n ? n : 1, es);
    for (size_t i = 0; i < n; i++) {
        float x = rng_uniform(r, -amp, amp);
        if (dt == MH_DTYPE_F32) ((float*)buf)[i] = x;
        else if (dt == MH_DTYPE_F16) ((uint16_t*)buf)[i] = to_f16(x);
        else if (dt == MH_DTYPE_I8) ((int8_t*)buf)[i] = (int8_t)rng_int(r, -127, 127);
        else ((uint16_t*)buf)[i] = to_bf16(x);
    }
    return buf;
}

/* K (v = 0) or V (v = 1) of the problem in dtype, with its scales for int8. */
void problem_set_kv(test_problem* t, test_rng* r, int v, mh_dtype dt, test_layout layout, float amp) {
    mh_attn_problem* p = &t->p;
    mh_tensor* x = v ? &p->v : &p->k;
    const int d = v ? p->head_dim_v : p->head_dim_qk;
    size_t n, ns;
    strides(layout, p->n_kv, p->n_kv_heads, d, 1 + v, x, &n, p->batch);
    void* data = fill_kv(r, n, dt, amp);
    float* scale = NULL;
    if (dt == MH_DTYPE_I8) {
        mh_tensor st;
        strides(layout, p->n_kv, p->n_kv_heads, 1, 2, &st, &ns, p->batch);
        scale = malloc(ns * sizeof(float));
        rng_fill(r, scale, ns, amp / 254.0f, amp / 127.0f);
        x->scale_stride_batch = st.stride_batch, x->scale_stride_token = st.stride_token;
        x->scale_stride_head = st.stride_head;
    } else {
        x->scale_stride_batch = x->scale_stride_token = x->scale_stride_head = 0;
    }
    x->data = data, x->scale = scale;
    free(v ? t->v : t->k), free(v ? t->v_scale : t->k_scale);
    if (v) t->v = data, t->v_scale = scale, p->v_dtype = dt;
    else t->k = data, t->k_scale = scale, p->k_dtype = dt;
}

void problem_make(test_problem* t, test_rng* r, int B, int N, int M, int H, int Hkv, int Dqk,
                  int Dv, mh_dtype kv_dtype, test_layout layout, float amp) {
    memset(t, 0, sizeof *t);
    mh_attn_problem* p = &t->p;
    p->batch = B, p->n_q = N, p->n_kv = M, p->n_heads = H, p->n_kv_heads = Hkv;
    p->head_dim_qk = Dqk, p->head_dim_v = Dv;
    size_t nq, no;
    strides(layout, N, H, Dqk, 3, &p->q, &nq, B);
    mh_tensor ot;
    strides(layout, N, H, Dv, 1, &ot, &no, B);
    t->q = malloc(nq * sizeof(float));
    rng_fill(r, t->q, nq, -amp, amp);
    problem_set_kv(t, r, 0, kv_dtype, layout, amp);
    problem_set_kv(t, r, 1, kv_dtype, layout, amp);
    t->o = malloc(no * sizeof(float));
    for (size_t i = 0; i < no; i++) t->o[i] = -12345.0f; /* poison: every row must be written */
    t->o_elems = no;
    p->q.data = t->q, p->o.data = t->o;
    p->o.stride_batch = ot.stride_batch, p->o.stride_token = ot.stride_token;
    p->o.stride_head = ot.stride_head;
}

void problem_free(test_problem* t) {
    free(t->q), free(t->k), free(t->v), free(t->k_scale), free(t->v_scale), free(t->o);
    memset(t, 0, sizeof *t);
}

void problem_gather_o(const test_problem* t, float* dst) {
    const mh_attn_problem* p = &t->p;
    for (int b = 0; b < p->batch; b++)
        for (int i = 0; i < p->n_q; i++)
            for (int h = 0; h < p->n_heads; h++)
                memcpy(dst + (((size_t)b * p->n_q + i) * p->n_heads + h) * p->head_dim_v,
                       p->o.data + b * p->o.stride_batch + i * p->o.stride_token + h * p->o.stride_head,
                       sizeof(float) * (size_t)p->head_dim_v);
}

mh_status run_attention(const mh_context* ctx, const mh_attn_problem* p, const mh_attn_options* opt) {
    size_t bytes = 0;
    mh_status st = mh_attention_workspace_size(ctx, p, opt, &bytes);
    if (st != MH_OK) return st;
    void* ws = aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);
    st = mh_attention(ctx, p, opt, ws, bytes);
    free(ws);
    return st;
}

mh_context* test_context(int threads) {
    mh_context_config cc = mh_context_config_default();
    cc.num_threads = threads;
    mh_context* ctx = NULL;
    mh_status st = mh_context_create(&cc, &ctx);
    if (st == MH_ERR_ISA_UNAVAILABLE) { /* MH_ISA names an ISA this machine lacks: skipped */
        fprintf(stderr, "skipped: MH_ISA=%s is not available here\n", getenv("MH_ISA"));
        exit(77);
    }
    if (st != MH_OK) {
        fprintf(stderr, "context: %s\n", mh_status_string(st));
        exit(1);
    }
    return ctx;
}

void random_score_options(test_rng* r, int H, mh_attn_options* o, float* slopes, float* sinks) {
    if (rng_int(r, 0, 3) == 0) o->softcap = rng_uniform(r, 0.5f, 30.0f);
    if (rng_int(r, 0, 3) == 0) {
        for (int h = 0; h < H; h++) slopes[h] = powf(2.0f, -8.0f * (h + 1) / H);
        o->alibi_slopes = slopes;
    }
    if (rng_int(r, 0, 3) == 0) {
        for (int h = 0; h < H; h++) sinks[h] = rng_uniform(r, -3.0f, 3.0f);
        o->sinks = sinks;
    }
}

int slow_machine(const mh_context* ctx, double limit_ms) {
    if (test_emulated()) return 1;
    test_rng r;
    rng_seed(&r, 1);
    test_problem t;
    problem_make(&t, &r, 1, 16, 512, 2, 2, 64, 64, MH_DTYPE_F32, LAYOUT_TOKEN_MAJOR, 1.0f);
    run_attention(ctx, &t.p, NULL); /* warm */
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    run_attention(ctx, &t.p, NULL);
    clock_gettime(CLOCK_MONOTONIC, &b);
    problem_free(&t);
    const double ms = 1e3 * (double)(b.tv_sec - a.tv_sec) + 1e-6 * (double)(b.tv_nsec - a.tv_nsec);
    if (ms > limit_ms) printf("slow machine (a 4-MFLOP call took %.0f ms): reduced shapes\n", ms);
    return ms > limit_ms;
}
