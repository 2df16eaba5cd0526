/*
 * Every bad input gets its documented status AND writes nothing the caller can observe.
 *
 * Before each failing call the outputs it could touch (attention O, the probabilities buffer,
 * the layer output, the whole workspace buffer, a create's `out` pointer, a *_workspace_size's
 * `bytes`) are filled with a poison pattern; afterwards every byte must still be poison. The
 * KV cache is opaque, so it is checked through its length and its behaviour: after every
 * failed decode the next successful decode must give bitwise the same output as the same
 * decode on a fresh cache that never saw the failing calls.
 *
 * Sizes whose products overflow are built from small real buffers with huge dims or strides;
 * the library must reject them before touching any element. When a *_workspace_size call
 * unexpectedly accepts such a problem, the matching run call is not made (it would read far
 * out of bounds); the failure is reported instead.
 */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "multihead.h"
#include "problem.h"
#include "rng.h"

#define POISON 0xA5
#define BYTES_SENTINEL ((size_t)0x5A5A5A5Au)

static void* ws_alloc(size_t bytes) { return aligned_alloc(64, (bytes + 63) / 64 * 64); }

static void* sentinel_ptr(void) {
    static int marker;
    return &marker;
}

static void checkf(int cond, const char* fmt, const char* what) {
    char buf[512];
    snprintf(buf, sizeof buf, fmt, what);
    check_true(buf, cond);
}

/* ================================================================== context */
static void test_context_create(void) {
    mh_context_config cc = mh_context_config_default();
    mh_context* ctx = (mh_context*)sentinel_ptr();
    check_status("context: NULL config", mh_context_create(NULL, &ctx), MH_ERR_INVALID_ARGUMENT);
    check_true("context: NULL config: out untouched", ctx == (mh_context*)sentinel_ptr());
    check_status("context: NULL out", mh_context_create(&cc, NULL), MH_ERR_INVALID_ARGUMENT);
    const int threads[] = {-1, -7, INT_MIN};
    for (size_t i = 0; i < sizeof threads / sizeof threads[0]; i++) {
        char what[96];
        cc = mh_context_config_default();
        cc.num_threads = threads[i];
        ctx = (mh_context*)sentinel_ptr();
        snprintf(what, sizeof what, "context: num_threads %d", threads[i]);
        check_status(what, mh_context_create(&cc, &ctx), MH_ERR_INVALID_ARGUMENT);
        checkf(ctx == (mh_context*)sentinel_ptr(), "%s: out untouched", what);
    }
    const int isas[] = {MH_ISA_COUNT, 99, -1, INT_MIN};
    for (size_t i = 0; i < sizeof isas / sizeof isas[0]; i++) {
        char what[96];
        cc = mh_context_config_default();
        cc.isa = (mh_isa)isas[i];
        ctx = (mh_context*)sentinel_ptr();
        snprintf(what, sizeof what, "context: isa %d", isas[i]);
        check_status(what, mh_context_create(&cc, &ctx), MH_ERR_INVALID_ARGUMENT);
        checkf(ctx == (mh_context*)sentinel_ptr(), "%s: out untouched", what);
    }
}

/* ================================================================== mh_attention */
typedef struct attn_env {
    const mh_context* ctx;
    test_problem t;     /* the valid base problem */
    mh_attn_options opt; /* valid base options: causal, kv_len, mask, probs */
    int32_t kv_len[2];
    float* mask;
    float* probs;
    size_t probs_bytes;
    unsigned char* ws;
    size_t ws_cap; /* bytes allocated */
    size_t need;   /* bytes the base problem needs */
} attn_env;

static void attn_poison(attn_env* e) {
    memset(e->t.o, POISON, e->t.o_elems * sizeof(float));
    memset(e->probs, POISON, e->probs_bytes);
    memset(e->ws, POISON, e->ws_cap);
}

static void attn_untouched(const attn_env* e, const char* what) {
    checkf(all_bytes(e->t.o, e->t.o_elems * sizeof(float), POISON), "%s: O untouched", what);
    checkf(all_bytes(e->probs, e->probs_bytes, POISON), "%s: probs untouched", what);
    checkf(all_bytes(e->ws, e->ws_cap, POISON), "%s: workspace untouched", what);
}

/* mh_attention_workspace_size and mh_attention must both fail with `want` and write nothing. */
static void expect_attn(attn_env* e, const char* what, const mh_context* ctx, const mh_attn_problem* p,
                        const mh_attn_options* opt, mh_status want) {
    char buf[256];
    attn_poison(e);
    size_t bytes = BYTES_SENTINEL;
    const mh_status st = mh_attention_workspace_size(ctx, p, opt, &bytes);
    snprintf(buf, sizeof buf, "%s [workspace_size]", what);
    check_status(buf, st, want);
    checkf(bytes == BYTES_SENTINEL, "%s [workspace_size]: bytes untouched", what);
    if (st == MH_OK) {
        fprintf(stderr, "  %s: accepted by mh_attention_workspace_size; not running it\n", what);
        return;
    }
    const mh_status st2 = mh_attention(ctx, p, opt, e->ws, e->ws_cap);
    snprintf(buf, sizeof buf, "%s [attention]", what);
    check_status(buf, st2, want);
    attn_untouched(e, buf);
}

/* mh_attention only, with a given workspace pointer and size. */
static void expect_attn_ws(attn_env* e, const char* what, const mh_attn_problem* p,
                           const mh_attn_options* opt, void* ws, size_t ws_bytes, mh_status want) {
    attn_poison(e);
    check_status(what, mh_attention(e->ctx, p, opt, ws, ws_bytes), want);
    attn_untouched(e, what);
}

static void attn_setup(attn_env* e, const mh_context* ctx) {
    test_rng r;
    rng_seed(&r, 101);
    memset(e, 0, sizeof *e);
    e->ctx = ctx;
    /* B 2, N 3, M 5, H 4, Hkv 2, Dqk 8, Dv 6 */
    problem_make(&e->t, &r, 2, 3, 5, 4, 2, 8, 6, MH_DTYPE_F32, LAYOUT_TOKEN_MAJOR, 1.0f);
    const mh_attn_problem* p = &e->t.p;
    const size_t M = (size_t)p->n_kv, N = (size_t)p->n_q;
    e->mask = malloc(N * M * sizeof(float));
    rng_fill(&r, e->mask, N * M, -1.0f, 1.0f);
    e->probs_bytes = (size_t)p->batch * (size_t)p->n_heads * N * M * sizeof(float);
    e->probs = malloc(e->probs_bytes);
    e->kv_len[0] = 5, e->kv_len[1] = 3;
    e->opt = mh_attn_options_default();
    e->opt.causal = 1;
    e->opt.kv_len = e->kv_len;
    e->opt.mask = e->mask;
    e->opt.mask_stride_row = (ptrdiff_t)M; /* broadcast over batch and heads */
    e->opt.probs = e->probs;
    e->need = 0;
    check_status("attention: base workspace size",
                 mh_attention_workspace_size(ctx, p, &e->opt, &e->need), MH_OK);
    e->ws_cap = (e->need + 63) / 64 * 64 + 256;
    e->ws = ws_alloc(e->ws_cap);
    /* The base problem itself is valid: it runs and writes O and probs. */
    attn_poison(e);
    check_status("attention: base problem runs", mh_attention(ctx, p, &e->opt, e->ws, e->need), MH_OK);
    check_true("attention: base problem writes O",
               !all_bytes(e->t.o, e->t.o_elems * sizeof(float), POISON));
    check_true("attention: base problem writes probs", !all_bytes(e->probs, e->probs_bytes, POISON));
    check_status("attention: base problem runs with opt NULL",
                 mh_attention(ctx, p, NULL, e->ws, e->ws_cap), MH_OK);
}

static void attn_teardown(attn_env* e) {
    problem_free(&e->t);
    free(e->mask), free(e->probs), free(e->ws);
}

static void test_attention_pointers(attn_env* e) {
    mh_attn_problem p;
    expect_attn(e, "attention: NULL ctx", NULL, &e->t.p, &e->opt, MH_ERR_INVALID_ARGUMENT);
    expect_attn(e, "attention: NULL problem", e->ctx, NULL, &e->opt, MH_ERR_INVALID_ARGUMENT);
    p = e->t.p, p.q.data = NULL;
    expect_attn(e, "attention: NULL q", e->ctx, &p, &e->opt, MH_ERR_INVALID_ARGUMENT);
    p = e->t.p, p.k.data = NULL;
    expect_attn(e, "attention: NULL k", e->ctx, &p, &e->opt, MH_ERR_INVALID_ARGUMENT);
    p = e->t.p, p.v.data = NULL;
    expect_attn(e, "attention: NULL v", e->ctx, &p, &e->opt, MH_ERR_INVALID_ARGUMENT);
    p = e->t.p, p.o.data = NULL;
    expect_attn(e, "attention: NULL o", e->ctx, &p, &e->opt, MH_ERR_INVALID_ARGUMENT);
    p = e->t.p, p.o.data = NULL;
    expect_attn(e, "attention: NULL o, opt NULL", e->ctx, &p, NULL, MH_ERR_INVALID_ARGUMENT);

    check_status("attention: workspace_size with NULL bytes",
                 mh_attention_workspace_size(e->ctx, &e->t.p, &e->opt, NULL), MH_ERR_INVALID_ARGUMENT);
}

static void test_attention_sizes(attn_env* e) {
    static const struct {
        const char* name;
        size_t off;
    } dims[] = {
        {"batch", offsetof(mh_attn_problem, batch)},
        {"n_q", offsetof(mh_attn_problem, n_q)},
        {"n_kv", offsetof(mh_attn_problem, n_kv)},
        {"n_heads", offsetof(mh_attn_problem, n_heads)},
        {"n_kv_heads", offsetof(mh_attn_problem, n_kv_heads)},
        {"head_dim_qk", offsetof(mh_attn_problem, head_dim_qk)},
        {"head_dim_v", offsetof(mh_attn_problem, head_dim_v)},
    };
    static const int bad[] = {0, -1, INT_MIN};
    for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
        for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
            char what[128];
            mh_attn_problem p = e->t.p;
            int value = bad[b];
            memcpy((unsigned char*)&p + dims[d].off, &value, sizeof value);
            snprintf(what, sizeof what, "attention: %s = %d", dims[d].name, bad[b]);
            /* kv_len has entries for the base batch only; the size check comes first anyway */
            expect_attn(e, what, e->ctx, &p, &e->opt, MH_ERR_INVALID_ARGUMENT);
            snprintf(what, sizeof what, "attention: %s = %d, opt NULL", dims[d].name, bad[b]);
            expect_attn(e, what, e->ctx, &p, NULL, MH_ERR_INVALID_ARGUMENT);
        }

    mh_attn_problem p = e->t.p;
    p.n_kv_heads = 3; /* 4 % 3 != 0 */
    expect_attn(e, "attention: n_heads 4 % n_kv_heads 3", e->ctx, &p, &e->opt, MH_ERR_INVALID_ARGUMENT);
    p = e->t.p, p.n_kv_heads = 8; /* more KV heads than query heads */
    expect_attn(e, "attention: n_heads 4, n_kv_heads 8", e->ctx, &p, &e->opt, MH_ERR_INVALID_ARGUMENT);
    p = e->t.p, p.n_heads = 3;
    expect_attn(e, "attention: n_heads 3 % n_kv_heads 2", e->ctx, &p, &e->opt, MH_ERR_INVALID_ARGUMENT);

    static const int bad_dtypes[] = {4, 99, -1}; /* 3 is MH_DTYPE_I8 (test_int8) */
    for (size_t i = 0; i < sizeof bad_dtypes / sizeof bad_dtypes[0]; i++) {
        char what[96];
        p = e->t.p, p.k_dtype = (mh_dtype)bad_dtypes[i];
        snprintf(what, sizeof what, "attention: k_dtype %d", bad_dtypes[i]);
        expect_attn(e, what, e->ctx, &p, &e->opt, MH_ERR_INVALID_ARGUMENT);
        p = e->t.p, p.v_dtype = (mh_dtype)bad_dtypes[i];
        snprintf(what, sizeof what, "attention: v_dtype %d", bad_dtypes[i]);
        expect_attn(e, what, e->ctx, &p, &e->opt, MH_ERR_INVALID_ARGUMENT);
    }

    const float scales[] = {NAN, INFINITY, -INFINITY};
    const char* const scale_names[] = {"nan", "inf", "-inf"};
    for (int i = 0; i < 3; i++) {
        char what[96];
        p = e->t.p, p.scale = scales[i];
        snprintf(what, sizeof what, "attention: scale %s", scale_names[i]);
        expect_attn(e, what, e->ctx, &p, &e->opt, MH_ERR_INVALID_ARGUMENT);
    }
}

static void test_attention_strides(attn_env* e) {
    static const struct {
        const char* name;
        size_t off;
    } strides[] = {
        {"q.stride_batch", offsetof(mh_attn_problem, q) + offsetof(mh_tensor, stride_batch)},
        {"q.stride_token", offsetof(mh_attn_problem, q) + offsetof(mh_tensor, stride_token)},
        {"q.stride_head", offsetof(mh_attn_problem, q) + offsetof(mh_tensor, stride_head)},
        {"k.stride_batch", offsetof(mh_attn_problem, k) + offsetof(mh_tensor, stride_batch)},
        {"k.stride_token", offsetof(mh_attn_problem, k) + offsetof(mh_tensor, stride_token)},
        {"k.stride_head", offsetof(mh_attn_problem, k) + offsetof(mh_tensor, stride_head)},
        {"v.stride_batch", offsetof(mh_attn_problem, v) + offsetof(mh_tensor, stride_batch)},
        {"v.stride_token", offsetof(mh_attn_problem, v) + offsetof(mh_tensor, stride_token)},
        {"v.stride_head", offsetof(mh_attn_problem, v) + offsetof(mh_tensor, stride_head)},
        {"o_stride_batch", offsetof(mh_attn_problem, o.stride_batch)},
        {"o_stride_token", offsetof(mh_attn_problem, o.stride_token)},
        {"o_stride_head", offsetof(mh_attn_problem, o.stride_head)},
    };
    static const ptrdiff_t negative[] = {-1, -64, PTRDIFF_MIN};
    for (size_t s = 0; s < sizeof strides / sizeof strides[0]; s++) {
        for (size_t n = 0; n < sizeof negative / sizeof negative[0]; n++) {
            char what[128];
            mh_attn_problem p = e->t.p;
            ptrdiff_t v = negative[n];
            memcpy((unsigned char*)&p + strides[s].off, &v, sizeof v);
            snprintf(what, sizeof what, "attention: %s = %td", strides[s].name, negative[n]);
            expect_attn(e, what, e->ctx, &p, &e->opt, MH_ERR_INVALID_ARGUMENT);
        }
        /* A huge stride: the largest index does not fit (size_t or ptrdiff_t). */
        static const ptrdiff_t huge[] = {PTRDIFF_MAX, PTRDIFF_MAX / 2};
        for (size_t n = 0; n < sizeof huge / sizeof huge[0]; n++) {
            char what[128];
            mh_attn_problem p = e->t.p;
            ptrdiff_t v = huge[n];
            memcpy((unsigned char*)&p + strides[s].off, &v, sizeof v);
            snprintf(what, sizeof what, "attention: %s = %td (overflow)", strides[s].name, huge[n]);
            expect_attn(e, what, e->ctx, &p, &e->opt, MH_ERR_SIZE_OVERFLOW);
        }
    }
}

static void test_attention_overflow(attn_env* e) {
    const mh_attn_problem* base = &e->t.p;
    const ptrdiff_t H = base->n_heads, Hkv = base->n_kv_heads, D = base->head_dim_qk;
    const ptrdiff_t Dv = base->head_dim_v;
    mh_attn_options opt = e->opt;
    opt.kv_len = NULL; /* kv_len[] has two entries: never let a huge batch index it */
    mh_attn_problem p;

    /* batch and n_q INT_MAX with consistent token-major strides: Q and O do not fit. */
    p = *base;
    p.batch = INT_MAX, p.n_q = INT_MAX;
    p.q.stride_token = H * D, p.q.stride_batch = (ptrdiff_t)INT_MAX * H * D;
    p.o.stride_token = H * Dv, p.o.stride_batch = (ptrdiff_t)INT_MAX * H * Dv;
    expect_attn(e, "attention: batch = n_q = INT_MAX", e->ctx, &p, &opt, MH_ERR_SIZE_OVERFLOW);
    expect_attn(e, "attention: batch = n_q = INT_MAX, opt NULL", e->ctx, &p, NULL, MH_ERR_SIZE_OVERFLOW);

    /* batch and n_kv INT_MAX: K and V do not fit. */
    p = *base;
    p.batch = INT_MAX, p.n_kv = INT_MAX;
    p.k.stride_token = Hkv * D, p.k.stride_batch = (ptrdiff_t)INT_MAX * Hkv * D;
    p.v.stride_token = Hkv * Dv, p.v.stride_batch = (ptrdiff_t)INT_MAX * Hkv * Dv;
    expect_attn(e, "attention: batch = n_kv = INT_MAX", e->ctx, &p, &opt, MH_ERR_SIZE_OVERFLOW);

    /* head_dim_qk and n_q INT_MAX (one sequence): Q does not fit in ptrdiff_t. */
    p = *base;
    p.batch = 1, p.n_q = INT_MAX, p.head_dim_qk = INT_MAX;
    p.q.stride_head = INT_MAX, p.q.stride_token = H * INT_MAX;
    p.k.stride_head = INT_MAX, p.k.stride_token = Hkv * INT_MAX, p.k.stride_batch = 0;
    expect_attn(e, "attention: n_q = head_dim_qk = INT_MAX", e->ctx, &p, &opt, MH_ERR_SIZE_OVERFLOW);

    /* Input views broadcast (strides 0) and O a real [1, INT_MAX, H, Dv] view, so every tensor
     * fits, but probs [B, H, N, M] does not. */
    p = *base;
    p.batch = 1, p.n_q = INT_MAX, p.n_kv = INT_MAX;
    p.q.stride_batch = p.q.stride_token = p.q.stride_head = 0;
    p.k.stride_batch = p.k.stride_token = p.k.stride_head = 0;
    p.v.stride_batch = p.v.stride_token = p.v.stride_head = 0;
    p.o.stride_head = p.head_dim_v, p.o.stride_token = (ptrdiff_t)p.n_heads * p.head_dim_v;
    p.o.stride_batch = 0;
    expect_attn(e, "attention: probs [1, H, INT_MAX, INT_MAX]", e->ctx, &p, &opt,
                MH_ERR_SIZE_OVERFLOW);

    /* A view of O whose elements overlap (all strides 0) would make tasks write the same
     * elements: rejected. */
    p = *base;
    p.o.stride_batch = p.o.stride_token = p.o.stride_head = 0;
    expect_attn(e, "attention: overlapping O view", e->ctx, &p, &opt, MH_ERR_INVALID_ARGUMENT);

    /* Broadcast views again, but the per-thread scratch (H/Hkv * q_tile rows of Dqk floats)
     * does not fit in size_t: the workspace size itself overflows. */
    p = *base;
    p.batch = 1, p.n_q = 1, p.n_heads = INT_MAX, p.n_kv_heads = 1, p.head_dim_qk = INT_MAX;
    p.head_dim_v = 1;
    p.q.stride_batch = p.q.stride_token = p.q.stride_head = 0;
    p.k.stride_batch = p.k.stride_token = p.k.stride_head = 0;
    p.v.stride_batch = p.v.stride_token = p.v.stride_head = 0;
    p.o.stride_batch = 0, p.o.stride_token = 0, p.o.stride_head = 1;
    opt = mh_attn_options_default();
    expect_attn(e, "attention: workspace size overflows", e->ctx, &p, &opt, MH_ERR_SIZE_OVERFLOW);
}

static void test_attention_options(attn_env* e) {
    const mh_attn_problem* p = &e->t.p;
    mh_attn_options o;
    char what[128];

    static const int32_t bad_kv[][2] = {{-1, 3}, {5, -1}, {6, 3}, {5, 6}, {INT32_MIN, 0}, {0, INT32_MAX}};
    for (size_t i = 0; i < sizeof bad_kv / sizeof bad_kv[0]; i++) {
        int32_t kv[2] = {bad_kv[i][0], bad_kv[i][1]};
        o = e->opt, o.kv_len = kv;
        snprintf(what, sizeof what, "attention: kv_len {%d, %d} (M = 5)", (int)kv[0], (int)kv[1]);
        expect_attn(e, what, e->ctx, p, &o, MH_ERR_INVALID_ARGUMENT);
    }
    /* a mask whose largest index does not fit */
    static float mask_elem;
    o = e->opt, o.mask = &mask_elem, o.mask_stride_row = 5, o.mask_stride_batch = PTRDIFF_MAX;
    expect_attn(e, "attention: mask stride_batch PTRDIFF_MAX", e->ctx, p, &o, MH_ERR_SIZE_OVERFLOW);
    o = e->opt, o.mask = &mask_elem, o.mask_stride_row = PTRDIFF_MAX / 2;
    expect_attn(e, "attention: mask stride_row PTRDIFF_MAX/2", e->ctx, p, &o, MH_ERR_SIZE_OVERFLOW);
    static const int causal[] = {2, -1, INT_MAX};
    for (size_t i = 0; i < sizeof causal / sizeof causal[0]; i++) {
        o = e->opt, o.causal = causal[i];
        snprintf(what, sizeof what, "attention: causal = %d", causal[i]);
        expect_attn(e, what, e->ctx, p, &o, MH_ERR_INVALID_ARGUMENT);
    }
    static const int window[] = {-1, INT_MIN};
    for (size_t i = 0; i < sizeof window / sizeof window[0]; i++) {
        o = e->opt, o.window = window[i];
        snprintf(what, sizeof what, "attention: window = %d", window[i]);
        expect_attn(e, what, e->ctx, p, &o, MH_ERR_INVALID_ARGUMENT);
    }
    static const int64_t q_off[] = {-1, -5, INT64_MIN + 1};
    for (size_t i = 0; i < sizeof q_off / sizeof q_off[0]; i++) {
        o = e->opt, o.q_offset = q_off[i];
        snprintf(what, sizeof what, "attention: q_offset = %lld", (long long)q_off[i]);
        expect_attn(e, what, e->ctx, p, &o, MH_ERR_INVALID_ARGUMENT);
    }
    const float softcap[] = {-1.0f, -FLT_MIN, INFINITY, -INFINITY, NAN};
    const char* const softcap_names[] = {"-1", "-tiny", "inf", "-inf", "nan"};
    for (size_t i = 0; i < sizeof softcap / sizeof softcap[0]; i++) {
        o = e->opt, o.softcap = softcap[i];
        snprintf(what, sizeof what, "attention: softcap = %s", softcap_names[i]);
        expect_attn(e, what, e->ctx, p, &o, MH_ERR_INVALID_ARGUMENT);
    }
    o = e->opt, o.mask_stride_batch = -1;
    expect_attn(e, "attention: mask_stride_batch = -1", e->ctx, p, &o, MH_ERR_INVALID_ARGUMENT);
    o = e->opt, o.mask_stride_head = -1;
    expect_attn(e, "attention: mask_stride_head = -1", e->ctx, p, &o, MH_ERR_INVALID_ARGUMENT);
    o = e->opt, o.mask_stride_row = -1;
    expect_attn(e, "attention: mask_stride_row = -1", e->ctx, p, &o, MH_ERR_INVALID_ARGUMENT);
    o = e->opt, o.mask_stride_row = PTRDIFF_MIN;
    expect_attn(e, "attention: mask_stride_row = PTRDIFF_MIN", e->ctx, p, &o, MH_ERR_INVALID_ARGUMENT);
}

static void test_attention_workspace(attn_env* e) {
    const mh_attn_problem* p = &e->t.p;
    expect_attn_ws(e, "attention: workspace one byte too small", p, &e->opt, e->ws, e->need - 1,
                   MH_ERR_WORKSPACE_TOO_SMALL);
    expect_attn_ws(e, "attention: workspace of 0 bytes", p, &e->opt, e->ws, 0, MH_ERR_WORKSPACE_TOO_SMALL);
    expect_attn_ws(e, "attention: NULL workspace", p, &e->opt, NULL, e->need, MH_ERR_INVALID_ARGUMENT);
    static const size_t shift[] = {1, 4, 8, 16, 32, 63};
    for (size_t i = 0; i < sizeof shift / sizeof shift[0]; i++) {
        char what[96];
        snprintf(what, sizeof what, "attention: workspace misaligned by %zu", shift[i]);
        expect_attn_ws(e, what, p, &e->opt, e->ws + shift[i], e->ws_cap - shift[i],
                       MH_ERR_INVALID_ARGUMENT);
    }
    /* exactly enough (and 64-aligned) works */
    attn_poison(e);
    check_status("attention: workspace of exactly the reported size",
                 mh_attention(e->ctx, p, &e->opt, e->ws, e->need), MH_OK);
    check_true("attention: exact workspace: bytes past it untouched",
               all_bytes(e->ws + e->need, e->ws_cap - e->need, POISON));
}

/* ================================================================== layers */
enum { WCAP = 8192, BCAP = 512 };

typedef struct wbufs {
    float w[4][WCAP];
    float b[4][BCAP];
} wbufs;

static mh_layer_weights weights_of(wbufs* wb, int bias) {
    mh_layer_weights w;
    memset(&w, 0, sizeof w);
    w.w_q = wb->w[0], w.w_k = wb->w[1], w.w_v = wb->w[2], w.w_o = wb->w[3];
    if (bias) w.b_q = wb->b[0], w.b_k = wb->b[1], w.b_v = wb->b[2], w.b_o = wb->b[3];
    return w;
}

static void expect_create(const char* what, const mh_context* ctx, const mh_layer_config* cfg,
                          const mh_layer_weights* w, mh_status want) {
    mh_layer* L = (mh_layer*)sentinel_ptr();
    const mh_status st = mh_layer_create(ctx, cfg, w, &L);
    check_status(what, st, want);
    checkf(L == (mh_layer*)sentinel_ptr(), "%s: out untouched", what);
    if (st == MH_OK && L != (mh_layer*)sentinel_ptr()) mh_layer_destroy(L);
}

static mh_layer_config base_config(void) {
    mh_layer_config c = mh_layer_config_default();
    c.variant = MH_VARIANT_MHA;
    c.d_model = 16, c.n_heads = 4, c.head_dim = 4, c.bias = 1;
    return c;
}

/* Every variant rejects the config and weights structs of the others (and MHA/GQA/MQA,
 * which have none, reject any). */
static void test_foreign_fields(const mh_context* ctx, wbufs* wb) {
    static const mh_variant variants[] = {MH_VARIANT_MHA,     MH_VARIANT_GQA,    MH_VARIANT_MQA,
                                          MH_VARIANT_MOH,     MH_VARIANT_OVERLAP, MH_VARIANT_COLLAB,
                                          MH_VARIANT_DCMHA};
    const float* extra = wb->w[0]; /* any buffer large enough for a variant weight */
    mh_moh_config moh = mh_moh_config_default();
    moh.router = MH_MOH_ROUTER_NORM, moh.shared_heads = 1, moh.top_k = 1;
    mh_overlap_config overlap = mh_overlap_config_default();
    overlap.overlap = 1;
    mh_collab_config collab = mh_collab_config_default();
    collab.collab_dim = 8;
    const mh_dcmha_config dcmha = mh_dcmha_config_default();
    mh_moh_weights moh_w = mh_moh_weights_default();
    moh_w.w_router = extra;
    mh_collab_weights collab_w = mh_collab_weights_default();
    collab_w.mix = collab_w.content = extra;
    mh_dcmha_weights dcmha_w = mh_dcmha_weights_default();
    dcmha_w.w1 = dcmha_w.w2 = dcmha_w.wd = extra;
    const void* configs[] = {&moh, &overlap, &collab, &dcmha};
    const void* weights[] = {&moh_w, NULL, &collab_w, &dcmha_w};
    static const mh_variant owner[] = {MH_VARIANT_MOH, MH_VARIANT_OVERLAP, MH_VARIANT_COLLAB,
                                       MH_VARIANT_DCMHA};
    static const char* name[] = {"MoH", "overlap", "CollabHead", "DCMHA"};
    char what[160];
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) {
        const mh_variant v = variants[i];
        mh_layer_config c = base_config();
        mh_layer_weights w = weights_of(wb, 1);
        c.variant = v;
        if (v == MH_VARIANT_GQA) c.n_kv_heads = 2;
        for (int f = 0; f < 4; f++)
            if (owner[f] == v) c.variant_config = configs[f], w.variant_weights = weights[f];
        if (v == MH_VARIANT_COLLAB) w.b_q = w.b_k = NULL;
        if (v == MH_VARIANT_MOH) w.variant_weights = NULL; /* the norm router reads none */
        snprintf(what, sizeof what, "foreign fields: variant %d: its own structs create", (int)v);
        mh_layer* L = NULL;
        check_status(what, mh_layer_create(ctx, &c, &w, &L), MH_OK);
        /* the resolved variant config reads back only into a struct of the layer's own tag */
        for (int f = 0; f < 4 && L; f++) {
            union {
                mh_moh_config moh;
                mh_overlap_config overlap;
                mh_collab_config collab;
                mh_dcmha_config dcmha;
            } out;
            memset(&out, 0x5a, sizeof out);
            memcpy(&out, configs[f], sizeof(mh_variant));
            snprintf(what, sizeof what, "foreign fields: variant %d: get_variant_config into a %s config",
                     (int)v, name[f]);
            check_status(what, mh_layer_get_variant_config(L, &out),
                         owner[f] == v ? MH_OK : MH_ERR_INVALID_ARGUMENT);
            if (owner[f] != v) check_true(what, all_bytes((const unsigned char*)&out + sizeof(mh_variant),
                                                          sizeof out - sizeof(mh_variant), 0x5a));
        }
        check_status("get_variant_config: NULL out", mh_layer_get_variant_config(L, NULL),
                     MH_ERR_INVALID_ARGUMENT);
        mh_layer_destroy(L);
        for (int f = 0; f < 4; f++) {
            if (owner[f] == v) continue;
            mh_layer_config fc = c;
            mh_layer_weights fw = w;
            fc.variant_config = configs[f];
            snprintf(what, sizeof what, "foreign fields: variant %d rejects a %s config", (int)v, name[f]);
            expect_create(what, ctx, &fc, &w, MH_ERR_INVALID_ARGUMENT);
            if (!weights[f]) continue; /* overlapping heads have no weights of their own */
            fw.variant_weights = weights[f];
            snprintf(what, sizeof what, "foreign fields: variant %d rejects %s weights", (int)v, name[f]);
            expect_create(what, ctx, &c, &fw, MH_ERR_INVALID_ARGUMENT);
        }
    }
}

static void test_layer_create(const mh_context* ctx, wbufs* wb) {
    const mh_layer_weights W = weights_of(wb, 1), W0 = weights_of(wb, 0);
    mh_layer_config c = base_config();
    mh_layer_weights w;
    char what[128];

    mh_layer* ok = NULL;
    check_status("layer: base config creates", mh_layer_create(ctx, &c, &W, &ok), MH_OK);
    mh_layer_destroy(ok);

    expect_create("layer: NULL ctx", NULL, &c, &W, MH_ERR_INVALID_ARGUMENT);
    expect_create("layer: NULL config", ctx, NULL, &W, MH_ERR_INVALID_ARGUMENT);
    expect_create("layer: NULL weights", ctx, &c, NULL, MH_ERR_INVALID_ARGUMENT);
    check_status("layer: NULL out", mh_layer_create(ctx, &c, &W, NULL), MH_ERR_INVALID_ARGUMENT);

    static const int bad[] = {0, -1, INT_MIN};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        c = base_config(), c.d_model = bad[i];
        snprintf(what, sizeof what, "layer: d_model %d", bad[i]);
        expect_create(what, ctx, &c, &W, MH_ERR_INVALID_ARGUMENT);
        c = base_config(), c.n_heads = bad[i];
        snprintf(what, sizeof what, "layer: n_heads %d", bad[i]);
        expect_create(what, ctx, &c, &W, MH_ERR_INVALID_ARGUMENT);
        c = base_config(), c.head_dim = bad[i];
        snprintf(what, sizeof what, "layer: head_dim %d", bad[i]);
        expect_create(what, ctx, &c, &W, MH_ERR_INVALID_ARGUMENT);
        if (bad[i] < 0) { /* 0 means "default" for these */
            c = base_config(), c.n_kv_heads = bad[i];
            snprintf(what, sizeof what, "layer: n_kv_heads %d", bad[i]);
            expect_create(what, ctx, &c, &W, MH_ERR_INVALID_ARGUMENT);
            c = base_config(), c.head_dim_v = bad[i];
            snprintf(what, sizeof what, "layer: head_dim_v %d", bad[i]);
            expect_create(what, ctx, &c, &W, MH_ERR_INVALID_ARGUMENT);
            c = base_config(), c.kdim = bad[i];
            snprintf(what, sizeof what, "layer: kdim %d", bad[i]);
            expect_create(what, ctx, &c, &W, MH_ERR_INVALID_ARGUMENT);
            c = base_config(), c.vdim = bad[i];
            snprintf(what, sizeof what, "layer: vdim %d", bad[i]);
            expect_create(what, ctx, &c, &W, MH_ERR_INVALID_ARGUMENT);
            c = base_config(), c.window = bad[i];
            snprintf(what, sizeof what, "layer: window %d", bad[i]);
            expect_create(what, ctx, &c, &W, MH_ERR_INVALID_ARGUMENT);
        }
    }

    /* variant rules */
    c = base_config(), c.variant = MH_VARIANT_GQA, c.n_kv_heads = 3;
    expect_create("layer: GQA n_heads 4 % n_kv_heads 3", ctx, &c, &W, MH_ERR_INVALID_ARGUMENT);
    c = base_config(), c.variant = MH_VARIANT_GQA, c.n_kv_heads = 8;
    expect_create("layer: GQA n_heads 4, n_kv_heads 8", ctx, &c, &W, MH_ERR_INVALID_ARGUMENT);
    c = base_config(), c.variant = MH_VARIANT_GQA, c.n_heads = 6, c.n_kv_heads = 4;
    expect_create("layer: GQA n_heads 6 % n_kv_heads 4", ctx, &c, &W, MH_ERR_INVALID_ARGUMENT);
    c = base_config(), c.variant = MH_VARIANT_MHA, c.n_kv_heads = 2;
    expect_create("layer: MHA with n_kv_heads 2 != n_heads 4", ctx, &c, &W, MH_ERR_INVALID_ARGUMENT);
    c = base_config(), c.variant = MH_VARIANT_MHA, c.n_kv_heads = 1;
    expect_create("layer: MHA with n_kv_heads 1 != n_heads 4", ctx, &c, &W, MH_ERR_INVALID_ARGUMENT);
    c = base_config(), c.variant = MH_VARIANT_MQA, c.n_kv_heads = 2;
    expect_create("layer: MQA with n_kv_heads 2", ctx, &c, &W, MH_ERR_INVALID_ARGUMENT);
    c = base_config(), c.variant = MH_VARIANT_MQA, c.n_kv_heads = 4;
    expect_create("layer: MQA with n_kv_heads 4 (= n_heads)", ctx, &c, &W, MH_ERR_INVALID_ARGUMENT);
    static const int variants[] = {3, 99, -1, INT_MAX};
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) {
        c = base_config(), c.variant = (mh_variant)variants[i];
        snprintf(what, sizeof what, "layer: unknown variant %d", variants[i]);
        expect_create(what, ctx, &c, &W, MH_ERR_INVALID_ARGUMENT);
    }

    /* bias flag vs bias pointers */
    c = base_config(); /* bias 1 */
    expect_create("layer: bias 1, all bias pointers NULL", ctx, &c, &W0, MH_ERR_INVALID_ARGUMENT);
    for (int i = 0; i < 4; i++) {
        static const char* const bn[4] = {"b_q", "b_k", "b_v", "b_o"};
        w = W;
        if (i == 0) w.b_q = NULL;
        if (i == 1) w.b_k = NULL;
        if (i == 2) w.b_v = NULL;
        if (i == 3) w.b_o = NULL;
        snprintf(what, sizeof what, "layer: bias 1, %s NULL", bn[i]);
        expect_create(what, ctx, &c, &w, MH_ERR_INVALID_ARGUMENT);
        w = W0;
        if (i == 0) w.b_q = wb->b[0];
        if (i == 1) w.b_k = wb->b[1];
        if (i == 2) w.b_v = wb->b[2];
        if (i == 3) w.b_o = wb->b[3];
        c.bias = 0;
        snprintf(what, sizeof what, "layer: bias 0, %s non-NULL", bn[i]);
        expect_create(what, ctx, &c, &w, MH_ERR_INVALID_ARGUMENT);
        c.bias = 1;
    }
    c = base_config(), c.bias = 0;
    expect_create("layer: bias 0, all bias pointers set", ctx, &c, &W, MH_ERR_INVALID_ARGUMENT);
    static const int bias_flags[] = {2, -1};
    for (size_t i = 0; i < sizeof bias_flags / sizeof bias_flags[0]; i++) {
        c = base_config(), c.bias = bias_flags[i];
        snprintf(what, sizeof what, "layer: bias = %d (with biases)", bias_flags[i]);
        expect_create(what, ctx, &c, &W, MH_ERR_INVALID_ARGUMENT);
        snprintf(what, sizeof what, "layer: bias = %d (without biases)", bias_flags[i]);
        expect_create(what, ctx, &c, &W0, MH_ERR_INVALID_ARGUMENT);
    }

    /* weight pointers */
    for (int i = 0; i < 4; i++) {
        static const char* const wn[4] = {"w_q", "w_k", "w_v", "w_o"};
        c = base_config();
        w = W;
        if (i == 0) w.w_q = NULL;
        if (i == 1) w.w_k = NULL;
        if (i == 2) w.w_v = NULL;
        if (i == 3) w.w_o = NULL;
        snprintf(what, sizeof what, "layer: %s NULL", wn[i]);
        expect_create(what, ctx, &c, &w, MH_ERR_INVALID_ARGUMENT);
    }

    /* score options */
    const float bad_floats[] = {NAN, INFINITY, -INFINITY};
    const char* const bf_names[] = {"nan", "inf", "-inf"};
    for (int i = 0; i < 3; i++) {
        c = base_config(), c.scale = bad_floats[i];
        snprintf(what, sizeof what, "layer: scale %s", bf_names[i]);
        expect_create(what, ctx, &c, &W, MH_ERR_INVALID_ARGUMENT);
        c = base_config(), c.softcap = bad_floats[i];
        snprintf(what, sizeof what, "layer: softcap %s", bf_names[i]);
        expect_create(what, ctx, &c, &W, MH_ERR_INVALID_ARGUMENT);
    }
    c = base_config(), c.softcap = -1.0f;
    expect_create("layer: softcap -1", ctx, &c, &W, MH_ERR_INVALID_ARGUMENT);

    /* n_heads * head_dim (or * head_dim_v) does not fit in int: rejected before packing. */
    c = base_config(), c.n_heads = 65536, c.head_dim = 65536;
    expect_create("layer: n_heads 65536 * head_dim 65536 overflows int", ctx, &c, &W, MH_ERR_SIZE_OVERFLOW);
    c = base_config(), c.n_heads = 46341, c.head_dim = 46341;
    expect_create("layer: n_heads 46341 * head_dim 46341 overflows int", ctx, &c, &W, MH_ERR_SIZE_OVERFLOW);
    c = base_config(), c.n_heads = INT_MAX, c.head_dim = 2;
    expect_create("layer: n_heads INT_MAX * head_dim 2 overflows int", ctx, &c, &W, MH_ERR_SIZE_OVERFLOW);
    c = base_config(), c.n_heads = 65536, c.head_dim = 1, c.head_dim_v = 65536;
    expect_create("layer: n_heads 65536 * head_dim_v 65536 overflows int", ctx, &c, &W, MH_ERR_SIZE_OVERFLOW);
    c = base_config(), c.variant = MH_VARIANT_GQA, c.n_heads = 65536, c.n_kv_heads = 1;
    c.head_dim = 65536;
    expect_create("layer: GQA n_heads 65536 * head_dim 65536 overflows int", ctx, &c, &W, MH_ERR_SIZE_OVERFLOW);

    /* get_config */
    mh_layer_config out;
    memset(&out, POISON, sizeof out);
    check_status("layer: get_config(NULL)", mh_layer_get_config(NULL, &out), MH_ERR_INVALID_ARGUMENT);
    check_true("layer: get_config(NULL): out untouched", all_bytes(&out, sizeof out, POISON));
    c = base_config();
    mh_layer* L = NULL;
    if (mh_layer_create(ctx, &c, &W, &L) == MH_OK) {
        check_status("layer: get_config(layer, NULL)", mh_layer_get_config(L, NULL), MH_ERR_INVALID_ARGUMENT);
        mh_layer_destroy(L);
    }
}

/* ------------------------------------------------------------------ forward */
typedef struct fwd_env {
    mh_layer* self; /* MHA, d_model 16, H 4, D 4, bias */
    mh_layer* cross; /* GQA, d_model 16, H 4, Hkv 2, D 4, Dv 6, kdim 12, vdim 10 */
    float *query, *key, *value, *out, *probs;
    size_t out_bytes, probs_bytes;
    unsigned char* ws;
    size_t ws_cap, need_self, need_cross;
    int32_t kv_len[2];
    float* mask;
} fwd_env;

enum { FB = 2, FN = 3, FM = 5, FD = 16, FH = 4, FKD = 12, FVD = 10 };

static void fwd_poison(fwd_env* e) {
    memset(e->out, POISON, e->out_bytes);
    memset(e->probs, POISON, e->probs_bytes);
    memset(e->ws, POISON, e->ws_cap);
}

static void expect_forward(fwd_env* e, const char* what, const mh_layer* L, const mh_forward_args* a,
                           void* ws, size_t ws_bytes, mh_status want) {
    fwd_poison(e);
    check_status(what, mh_layer_forward(L, a, ws, ws_bytes), want);
    checkf(all_bytes(e->out, e->out_bytes, POISON), "%s: out untouched", what);
    checkf(all_bytes(e->probs, e->probs_bytes, POISON), "%s: probs untouched", what);
    checkf(all_bytes(e->ws, e->ws_cap, POISON), "%s: workspace untouched", what);
}

static mh_forward_args self_args(fwd_env* e, const mh_attn_options* opt) {
    mh_forward_args a;
    memset(&a, 0, sizeof a);
    a.batch = FB, a.n_q = FN, a.n_kv = FN;
    a.query = e->query, a.out = e->out, a.opt = opt;
    return a;
}

static mh_forward_args cross_args(fwd_env* e, const mh_attn_options* opt) {
    mh_forward_args a = self_args(e, opt);
    a.n_kv = FM, a.key = e->key, a.value = e->value;
    return a;
}

static void test_forward(const mh_context* ctx, wbufs* wb) {
    fwd_env e;
    memset(&e, 0, sizeof e);
    test_rng r;
    rng_seed(&r, 202);
    const mh_layer_weights W = weights_of(wb, 1);
    mh_layer_config c = base_config();
    check_status("forward: create self layer", mh_layer_create(ctx, &c, &W, &e.self), MH_OK);
    c.variant = MH_VARIANT_GQA, c.n_kv_heads = 2, c.head_dim_v = 6, c.kdim = FKD, c.vdim = FVD;
    check_status("forward: create cross layer", mh_layer_create(ctx, &c, &W, &e.cross), MH_OK);
    if (!e.self || !e.cross) {
        mh_layer_destroy(e.self), mh_layer_destroy(e.cross);
        return;
    }
    e.query = malloc(sizeof(float) * FB * FN * FD);
    e.key = malloc(sizeof(float) * FB * FM * FKD);
    e.value = malloc(sizeof(float) * FB * FM * FVD);
    rng_fill(&r, e.query, FB * FN * FD, -1, 1);
    rng_fill(&r, e.key, FB * FM * FKD, -1, 1);
    rng_fill(&r, e.value, FB * FM * FVD, -1, 1);
    e.out_bytes = sizeof(float) * FB * FN * FD;
    e.out = malloc(e.out_bytes);
    e.probs_bytes = sizeof(float) * FB * FH * FN * FM; /* large enough for self (M = N) too */
    e.probs = malloc(e.probs_bytes);
    e.mask = malloc(sizeof(float) * FN * FM);
    rng_fill(&r, e.mask, FN * FM, -1, 1);
    check_status("forward: self workspace size",
                 mh_layer_forward_workspace_size(e.self, FB, FN, FN, &e.need_self), MH_OK);
    check_status("forward: cross workspace size",
                 mh_layer_forward_workspace_size(e.cross, FB, FN, FM, &e.need_cross), MH_OK);
    const size_t big = e.need_self > e.need_cross ? e.need_self : e.need_cross;
    e.ws_cap = (big + 63) / 64 * 64 + 256;
    e.ws = ws_alloc(e.ws_cap);

    /* valid per-call options */
    mh_attn_options so = mh_attn_options_default(), co;
    so.causal = 1, so.mask = e.mask, so.mask_stride_row = FN, so.probs = e.probs;
    e.kv_len[0] = FM, e.kv_len[1] = 2;
    co = mh_attn_options_default();
    co.kv_len = e.kv_len, co.mask = e.mask, co.mask_stride_row = FM, co.probs = e.probs;

    /* the base calls are valid */
    mh_forward_args a = self_args(&e, &so);
    fwd_poison(&e);
    check_status("forward: base self call runs", mh_layer_forward(e.self, &a, e.ws, e.need_self), MH_OK);
    check_true("forward: base self call writes out", !all_bytes(e.out, e.out_bytes, POISON));
    a = cross_args(&e, &co);
    check_status("forward: base cross call runs", mh_layer_forward(e.cross, &a, e.ws, e.need_cross), MH_OK);
    a = self_args(&e, NULL);
    check_status("forward: base self call, opt NULL", mh_layer_forward(e.self, &a, e.ws, e.ws_cap), MH_OK);

    char what[160];
    /* pointers */
    a = self_args(&e, &so);
    expect_forward(&e, "forward: NULL layer", NULL, &a, e.ws, e.ws_cap, MH_ERR_INVALID_ARGUMENT);
    expect_forward(&e, "forward: NULL args", e.self, NULL, e.ws, e.ws_cap, MH_ERR_INVALID_ARGUMENT);
    a = self_args(&e, &so), a.query = NULL;
    expect_forward(&e, "forward: NULL query", e.self, &a, e.ws, e.ws_cap, MH_ERR_INVALID_ARGUMENT);
    a = self_args(&e, &so), a.out = NULL;
    expect_forward(&e, "forward: NULL out", e.self, &a, e.ws, e.ws_cap, MH_ERR_INVALID_ARGUMENT);
    a = cross_args(&e, &co), a.query = NULL;
    expect_forward(&e, "forward: cross, NULL query", e.cross, &a, e.ws, e.ws_cap, MH_ERR_INVALID_ARGUMENT);
    a = cross_args(&e, &co), a.out = NULL;
    expect_forward(&e, "forward: cross, NULL out", e.cross, &a, e.ws, e.ws_cap, MH_ERR_INVALID_ARGUMENT);
    a = cross_args(&e, &co), a.value = NULL;
    expect_forward(&e, "forward: key given, value NULL", e.cross, &a, e.ws, e.ws_cap, MH_ERR_INVALID_ARGUMENT);
    a = cross_args(&e, &co), a.key = NULL;
    expect_forward(&e, "forward: value given, key NULL", e.cross, &a, e.ws, e.ws_cap, MH_ERR_INVALID_ARGUMENT);
    a = self_args(&e, &so), a.key = e.query;
    expect_forward(&e, "forward: self layer, key given, value NULL", e.self, &a, e.ws, e.ws_cap,
                   MH_ERR_INVALID_ARGUMENT);
    a = self_args(&e, &so);
    expect_forward(&e, "forward: self-attention on a kdim != d_model layer", e.cross, &a, e.ws,
                   e.ws_cap, MH_ERR_INVALID_ARGUMENT);
    a = self_args(&e, NULL);
    expect_forward(&e, "forward: self-attention on a kdim != d_model layer, opt NULL", e.cross, &a,
                   e.ws, e.ws_cap, MH_ERR_INVALID_ARGUMENT);

    /* sizes */
    static const int bad[] = {0, -1, INT_MIN};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        a = self_args(&e, &so), a.batch = bad[i];
        snprintf(what, sizeof what, "forward: batch %d", bad[i]);
        expect_forward(&e, what, e.self, &a, e.ws, e.ws_cap, MH_ERR_INVALID_ARGUMENT);
        a = self_args(&e, &so), a.n_q = bad[i];
        snprintf(what, sizeof what, "forward: n_q %d", bad[i]);
        expect_forward(&e, what, e.self, &a, e.ws, e.ws_cap, MH_ERR_INVALID_ARGUMENT);
        a = cross_args(&e, &co), a.n_kv = bad[i];
        snprintf(what, sizeof what, "forward: cross, n_kv %d", bad[i]);
        expect_forward(&e, what, e.cross, &a, e.ws, e.ws_cap, MH_ERR_INVALID_ARGUMENT);
        a = cross_args(&e, NULL), a.n_kv = bad[i];
        snprintf(what, sizeof what, "forward: cross, n_kv %d, opt NULL", bad[i]);
        expect_forward(&e, what, e.cross, &a, e.ws, e.ws_cap, MH_ERR_INVALID_ARGUMENT);
    }

    /* model-level options in the per-call options */
    static const float slopes[FH] = {0.5f, 0.25f, 0.125f, 0.0625f};
    static const float sinks[FH] = {0.f, 0.f, 0.f, 0.f};
    mh_attn_options o;
    o = so, o.window = 1;
    a = self_args(&e, &o);
    expect_forward(&e, "forward: opt.window 1 (layer-level)", e.self, &a, e.ws, e.ws_cap, MH_ERR_INVALID_ARGUMENT);
    o = so, o.softcap = 1.0f;
    a = self_args(&e, &o);
    expect_forward(&e, "forward: opt.softcap 1 (layer-level)", e.self, &a, e.ws, e.ws_cap, MH_ERR_INVALID_ARGUMENT);
    o = so, o.alibi_slopes = slopes;
    a = self_args(&e, &o);
    expect_forward(&e, "forward: opt.alibi_slopes (layer-level)", e.self, &a, e.ws, e.ws_cap,
                   MH_ERR_INVALID_ARGUMENT);
    o = so, o.sinks = sinks;
    a = self_args(&e, &o);
    expect_forward(&e, "forward: opt.sinks (layer-level)", e.self, &a, e.ws, e.ws_cap, MH_ERR_INVALID_ARGUMENT);
    o = co, o.window = 2;
    a = cross_args(&e, &o);
    expect_forward(&e, "forward: cross, opt.window 2 (layer-level)", e.cross, &a, e.ws, e.ws_cap,
                   MH_ERR_INVALID_ARGUMENT);
    o = co, o.sinks = sinks;
    a = cross_args(&e, &o);
    expect_forward(&e, "forward: cross, opt.sinks (layer-level)", e.cross, &a, e.ws, e.ws_cap,
                   MH_ERR_INVALID_ARGUMENT);

    /* invalid per-call options */
    o = so, o.causal = 2;
    a = self_args(&e, &o);
    expect_forward(&e, "forward: opt.causal 2", e.self, &a, e.ws, e.ws_cap, MH_ERR_INVALID_ARGUMENT);
    o = so, o.q_offset = -1;
    a = self_args(&e, &o);
    expect_forward(&e, "forward: opt.q_offset -1", e.self, &a, e.ws, e.ws_cap, MH_ERR_INVALID_ARGUMENT);
    int32_t kv_bad[2] = {FN + 1, 1}; /* self-attention: M = n_q = 3 */
    o = so, o.kv_len = kv_bad;
    a = self_args(&e, &o);
    expect_forward(&e, "forward: self, kv_len 4 > M = n_q = 3", e.self, &a, e.ws, e.ws_cap,
                   MH_ERR_INVALID_ARGUMENT);
    int32_t kv_bad2[2] = {FM, FM + 1};
    o = co, o.kv_len = kv_bad2;
    a = cross_args(&e, &o);
    expect_forward(&e, "forward: cross, kv_len 6 > M = 5", e.cross, &a, e.ws, e.ws_cap, MH_ERR_INVALID_ARGUMENT);
    int32_t kv_neg[2] = {FM, -1};
    o = co, o.kv_len = kv_neg;
    a = cross_args(&e, &o);
    expect_forward(&e, "forward: cross, kv_len -1", e.cross, &a, e.ws, e.ws_cap, MH_ERR_INVALID_ARGUMENT);
    o = so, o.mask_stride_row = -1;
    a = self_args(&e, &o);
    expect_forward(&e, "forward: opt.mask_stride_row -1", e.self, &a, e.ws, e.ws_cap, MH_ERR_INVALID_ARGUMENT);
    o = so, o.mask_stride_head = -1;
    a = self_args(&e, &o);
    expect_forward(&e, "forward: opt.mask_stride_head -1", e.self, &a, e.ws, e.ws_cap, MH_ERR_INVALID_ARGUMENT);
    o = so, o.mask_stride_batch = -1;
    a = self_args(&e, &o);
    expect_forward(&e, "forward: opt.mask_stride_batch -1", e.self, &a, e.ws, e.ws_cap, MH_ERR_INVALID_ARGUMENT);
    o = so, o.softcap = NAN;
    a = self_args(&e, &o);
    expect_forward(&e, "forward: opt.softcap nan", e.self, &a, e.ws, e.ws_cap, MH_ERR_INVALID_ARGUMENT);

    /* overflowing sizes, rejected before any access */
    a = self_args(&e, NULL), a.batch = INT_MAX, a.n_q = INT_MAX;
    expect_forward(&e, "forward: batch = n_q = INT_MAX", e.self, &a, e.ws, e.ws_cap, MH_ERR_SIZE_OVERFLOW);
    a = cross_args(&e, NULL), a.batch = INT_MAX, a.n_kv = INT_MAX;
    expect_forward(&e, "forward: cross, batch = n_kv = INT_MAX", e.cross, &a, e.ws, e.ws_cap,
                   MH_ERR_SIZE_OVERFLOW);
    o = co, o.kv_len = NULL;
    a = cross_args(&e, &o), a.batch = INT_MAX, a.n_q = INT_MAX, a.n_kv = INT_MAX;
    expect_forward(&e, "forward: cross, probs [INT_MAX, 4, INT_MAX, INT_MAX]", e.cross, &a, e.ws,
                   e.ws_cap, MH_ERR_SIZE_OVERFLOW);

    /* workspace */
    a = self_args(&e, &so);
    expect_forward(&e, "forward: workspace one byte too small", e.self, &a, e.ws, e.need_self - 1,
                   MH_ERR_WORKSPACE_TOO_SMALL);
    expect_forward(&e, "forward: workspace of 0 bytes", e.self, &a, e.ws, 0, MH_ERR_WORKSPACE_TOO_SMALL);
    expect_forward(&e, "forward: NULL workspace", e.self, &a, NULL, e.ws_cap, MH_ERR_INVALID_ARGUMENT);
    expect_forward(&e, "forward: workspace misaligned by 8", e.self, &a, e.ws + 8, e.ws_cap - 8,
                   MH_ERR_INVALID_ARGUMENT);
    expect_forward(&e, "forward: workspace misaligned by 1", e.self, &a, e.ws + 1, e.ws_cap - 1,
                   MH_ERR_INVALID_ARGUMENT);
    a = cross_args(&e, &co);
    expect_forward(&e, "forward: cross, workspace one byte too small", e.cross, &a, e.ws,
                   e.need_cross - 1, MH_ERR_WORKSPACE_TOO_SMALL);

    /* forward workspace size */
    size_t bytes = BYTES_SENTINEL;
    check_status("forward ws size: NULL layer", mh_layer_forward_workspace_size(NULL, FB, FN, FN, &bytes),
                 MH_ERR_INVALID_ARGUMENT);
    check_status("forward ws size: NULL bytes", mh_layer_forward_workspace_size(e.self, FB, FN, FN, NULL),
                 MH_ERR_INVALID_ARGUMENT);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(what, sizeof what, "forward ws size: batch %d", bad[i]);
        check_status(what, mh_layer_forward_workspace_size(e.self, bad[i], FN, FN, &bytes), MH_ERR_INVALID_ARGUMENT);
        snprintf(what, sizeof what, "forward ws size: n_q %d", bad[i]);
        check_status(what, mh_layer_forward_workspace_size(e.self, FB, bad[i], FN, &bytes), MH_ERR_INVALID_ARGUMENT);
        snprintf(what, sizeof what, "forward ws size: n_kv %d", bad[i]);
        check_status(what, mh_layer_forward_workspace_size(e.cross, FB, FN, bad[i], &bytes), MH_ERR_INVALID_ARGUMENT);
    }
    check_status("forward ws size: INT_MAX everywhere overflows",
                 mh_layer_forward_workspace_size(e.cross, INT_MAX, INT_MAX, INT_MAX, &bytes), MH_ERR_SIZE_OVERFLOW);
    check_true("forward ws size: bytes untouched by every failure", bytes == BYTES_SENTINEL);

    mh_layer_destroy(e.self), mh_layer_destroy(e.cross);
    free(e.query), free(e.key), free(e.value), free(e.out), free(e.probs), free(e.mask), free(e.ws);
}

/* ================================================================== KV cache and decode */
static void expect_cache_create(const char* what, const mh_layer* L, int batch, int cap, mh_dtype dt,
                                mh_status want) {
    mh_kv_cache* c = (mh_kv_cache*)sentinel_ptr();
    const mh_status st = mh_kv_cache_create(L, batch, cap, dt, &c);
    check_status(what, st, want);
    checkf(c == (mh_kv_cache*)sentinel_ptr(), "%s: out untouched", what);
    if (st == MH_OK && c != (mh_kv_cache*)sentinel_ptr()) mh_kv_cache_destroy(c);
}

static void test_cache_create(const mh_context* ctx, wbufs* wb) {
    const mh_layer_weights W = weights_of(wb, 1);
    mh_layer_config c = base_config();
    mh_layer* L = NULL;
    if (!check_status("cache: create layer", mh_layer_create(ctx, &c, &W, &L), MH_OK)) return;
    char what[128];
    mh_kv_cache* ok = NULL;
    check_status("cache: base create", mh_kv_cache_create(L, 2, 4, MH_DTYPE_F32, &ok), MH_OK);
    mh_kv_cache_destroy(ok);
    expect_cache_create("cache: NULL layer", NULL, 2, 4, MH_DTYPE_F32, MH_ERR_INVALID_ARGUMENT);
    check_status("cache: NULL out", mh_kv_cache_create(L, 2, 4, MH_DTYPE_F32, NULL), MH_ERR_INVALID_ARGUMENT);
    static const int bad[] = {0, -1, INT_MIN};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(what, sizeof what, "cache: batch %d", bad[i]);
        expect_cache_create(what, L, bad[i], 4, MH_DTYPE_F32, MH_ERR_INVALID_ARGUMENT);
        snprintf(what, sizeof what, "cache: capacity %d", bad[i]);
        expect_cache_create(what, L, 2, bad[i], MH_DTYPE_F32, MH_ERR_INVALID_ARGUMENT);
    }
    static const int dts[] = {4, 99, -1}; /* 3 is MH_DTYPE_I8 (test_int8_cache) */
    for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++) {
        snprintf(what, sizeof what, "cache: dtype %d", dts[i]);
        expect_cache_create(what, L, 2, 4, (mh_dtype)dts[i], MH_ERR_INVALID_ARGUMENT);
    }
    /* [batch][Hkv][capacity][D] elements do not fit: refused before allocating */
    expect_cache_create("cache: batch = capacity = INT_MAX overflows", L, INT_MAX, INT_MAX, MH_DTYPE_F32,
                        MH_ERR_SIZE_OVERFLOW);
    mh_layer_destroy(L);
}

typedef struct dec_env {
    const mh_context* ctx;
    mh_layer* g;       /* GQA d_model 16, H 4, Hkv 2, D 4, Dv 6: the cache's layer */
    mh_layer* other[4]; /* layers of another KV shape */
    mh_layer* cross;   /* same KV shape as g, but kdim 12 */
    float* x;          /* [B, CAP, d_model] all tokens */
    float* out;        /* [B, CAP, d_model] */
    size_t out_bytes;
    unsigned char* ws;
    size_t ws_cap;
} dec_env;

enum { DB = 2, DCAP = 4, DD = 16 };

/* The rows of the tokens [t0, t0 + n) of every sequence, packed as [B, n, d_model]. */
static void tokens(const dec_env* e, int t0, int n, float* dst) {
    for (int b = 0; b < DB; b++)
        memcpy(dst + (size_t)b * n * DD, e->x + ((size_t)b * DCAP + t0) * DD, sizeof(float) * n * DD);
}

static void dec_poison(dec_env* e) {
    memset(e->out, POISON, e->out_bytes);
    memset(e->ws, POISON, e->ws_cap);
}

/* A failing decode: status, cache length unchanged, out and workspace untouched. */
static void expect_decode(dec_env* e, const char* what, const mh_layer* L, mh_kv_cache* c, mh_kv_cache* c_len,
                          int batch, int n_new, const float* x, float* out, void* ws, size_t ws_bytes,
                          mh_status want) {
    const int len = mh_kv_cache_length(c_len);
    dec_poison(e);
    check_status(what, mh_layer_decode(L, c, &(mh_decode_args){.batch = batch, .n_new = n_new, .x = x, .out = out}, ws, ws_bytes), want);
    checkf(mh_kv_cache_length(c_len) == len, "%s: cache length unchanged", what);
    checkf(mh_kv_cache_capacity(c_len) == DCAP, "%s: cache capacity unchanged", what);
    checkf(all_bytes(e->out, e->out_bytes, POISON), "%s: out untouched", what);
    checkf(all_bytes(e->ws, e->ws_cap, POISON), "%s: workspace untouched", what);
}

/* Every failure that does not depend on the cache being full, at the current length. */
static void failing_decodes(dec_env* e, mh_kv_cache* c, int n, const float* x, const char* tag) {
    char what[512];
    size_t need = 0;
    mh_layer_decode_workspace_size(e->g, DB, n, &need);
#define EXPECT(desc, L, cache, batch, nn, xx, oo, ws, wsb, want)                                     \
    do {                                                                                           \
        snprintf(what, sizeof what, "decode %s: %s", tag, desc);                                   \
        expect_decode(e, what, L, cache, c, batch, nn, xx, oo, ws, wsb, want);                     \
    } while (0)
    EXPECT("NULL layer", NULL, c, DB, n, x, e->out, e->ws, e->ws_cap, MH_ERR_INVALID_ARGUMENT);
    EXPECT("NULL cache", e->g, NULL, DB, n, x, e->out, e->ws, e->ws_cap, MH_ERR_INVALID_ARGUMENT);
    EXPECT("NULL x", e->g, c, DB, n, NULL, e->out, e->ws, e->ws_cap, MH_ERR_INVALID_ARGUMENT);
    EXPECT("NULL out", e->g, c, DB, n, x, NULL, e->ws, e->ws_cap, MH_ERR_INVALID_ARGUMENT);
    EXPECT("batch 0", e->g, c, 0, n, x, e->out, e->ws, e->ws_cap, MH_ERR_INVALID_ARGUMENT);
    EXPECT("batch -1", e->g, c, -1, n, x, e->out, e->ws, e->ws_cap, MH_ERR_INVALID_ARGUMENT);
    EXPECT("n_new 0", e->g, c, DB, 0, x, e->out, e->ws, e->ws_cap, MH_ERR_INVALID_ARGUMENT);
    EXPECT("n_new -1", e->g, c, DB, -1, x, e->out, e->ws, e->ws_cap, MH_ERR_INVALID_ARGUMENT);
    EXPECT("n_new INT_MIN", e->g, c, DB, INT_MIN, x, e->out, e->ws, e->ws_cap, MH_ERR_INVALID_ARGUMENT);
    /* (batch 1 on a batch-2 cache is legal since 0.4.0: it advances sequence 0 alone) */
    EXPECT("batch 3 on a 2-sequence cache", e->g, c, 3, n, x, e->out, e->ws, e->ws_cap, MH_ERR_SHAPE_MISMATCH);
    static const char* const other[4] = {"MHA Hkv 4 D 4 Dv 4", "GQA Hkv 2 D 4 Dv 4 (Dv differs)",
                                         "GQA Hkv 2 D 8 Dv 6 (D differs)", "MQA Hkv 1 D 4 Dv 6 (Hkv differs)"};
    for (int i = 0; i < 4; i++) {
        char desc[128];
        snprintf(desc, sizeof desc, "cache made for another layer shape (%s)", other[i]);
        EXPECT(desc, e->other[i], c, DB, n, x, e->out, e->ws, e->ws_cap, MH_ERR_SHAPE_MISMATCH);
    }
    EXPECT("cross-attention layer (kdim != d_model)", e->cross, c, DB, n, x, e->out, e->ws, e->ws_cap,
           MH_ERR_UNSUPPORTED);
    EXPECT("n_new INT_MAX (cache full)", e->g, c, DB, INT_MAX, x, e->out, e->ws, e->ws_cap, MH_ERR_CACHE_FULL);
    EXPECT("workspace one byte too small", e->g, c, DB, n, x, e->out, e->ws, need - 1, MH_ERR_WORKSPACE_TOO_SMALL);
    EXPECT("workspace of 0 bytes", e->g, c, DB, n, x, e->out, e->ws, 0, MH_ERR_WORKSPACE_TOO_SMALL);
    EXPECT("NULL workspace", e->g, c, DB, n, x, e->out, NULL, e->ws_cap, MH_ERR_INVALID_ARGUMENT);
    EXPECT("workspace misaligned by 16", e->g, c, DB, n, x, e->out, e->ws + 16, e->ws_cap - 16,
           MH_ERR_INVALID_ARGUMENT);
    EXPECT("workspace misaligned by 1", e->g, c, DB, n, x, e->out, e->ws + 1, e->ws_cap - 1,
           MH_ERR_INVALID_ARGUMENT);
    /* more tokens than the room left */
    const int room = DCAP - mh_kv_cache_length(c);
    EXPECT("n_new = room + 1 (cache full)", e->g, c, DB, room + 1, x, e->out, e->ws, e->ws_cap,
           MH_ERR_CACHE_FULL);
#undef EXPECT
}

static void test_decode(const mh_context* ctx, wbufs* wb) {
    dec_env e;
    memset(&e, 0, sizeof e);
    e.ctx = ctx;
    test_rng r;
    rng_seed(&r, 303);
    const mh_layer_weights W = weights_of(wb, 1);
    mh_layer_config c = base_config();
    c.variant = MH_VARIANT_GQA, c.n_kv_heads = 2, c.head_dim_v = 6;
    int ok = check_status("decode: create layer", mh_layer_create(ctx, &c, &W, &e.g), MH_OK);
    mh_layer_config oc[4];
    for (int i = 0; i < 4; i++) oc[i] = base_config();
    oc[0].variant = MH_VARIANT_MHA; /* Hkv 4, D 4, Dv 4 */
    oc[1].variant = MH_VARIANT_GQA, oc[1].n_kv_heads = 2;
    oc[2].variant = MH_VARIANT_GQA, oc[2].n_kv_heads = 2, oc[2].head_dim = 8, oc[2].head_dim_v = 6;
    oc[3].variant = MH_VARIANT_MQA, oc[3].head_dim_v = 6;
    for (int i = 0; i < 4; i++)
        ok &= check_status("decode: create other layer", mh_layer_create(ctx, &oc[i], &W, &e.other[i]), MH_OK);
    mh_layer_config xc = c;
    xc.kdim = 12;
    ok &= check_status("decode: create cross layer", mh_layer_create(ctx, &xc, &W, &e.cross), MH_OK);
    if (!ok) goto done;

    const size_t all = (size_t)DB * DCAP * DD;
    e.x = malloc(sizeof(float) * all);
    rng_fill(&r, e.x, all, -1, 1);
    e.out_bytes = sizeof(float) * all;
    e.out = malloc(e.out_bytes);
    size_t need_max = 0;
    check_status("decode: workspace size", mh_layer_decode_workspace_size(e.g, DB, DCAP, &need_max), MH_OK);
    e.ws_cap = (need_max + 63) / 64 * 64 + 256;
    e.ws = ws_alloc(e.ws_cap);
    float* xin = malloc(sizeof(float) * all);
    float* ref = malloc(sizeof(float) * all);

    /* Chunks: 2 tokens, 1, 1 (= capacity 4). */
    static const int chunk[3] = {2, 1, 1};
    static const mh_dtype dts[3] = {MH_DTYPE_F32, MH_DTYPE_F16, MH_DTYPE_BF16};
    static const char* const dn[3] = {"f32", "f16", "bf16"};
    for (int d = 0; d < 3; d++) {
        mh_kv_cache *fresh = NULL, *cache = NULL;
        char what[160];
        if (!check_status("decode: create fresh cache", mh_kv_cache_create(e.g, DB, DCAP, dts[d], &fresh), MH_OK) ||
            !check_status("decode: create test cache", mh_kv_cache_create(e.g, DB, DCAP, dts[d], &cache), MH_OK)) {
            mh_kv_cache_destroy(fresh), mh_kv_cache_destroy(cache);
            continue;
        }
        int t0 = 0;
        for (int s = 0; s < 3; s++) {
            const int n = chunk[s];
            char tag[64];
            snprintf(tag, sizeof tag, "%s step %d (length %d, n_new %d)", dn[d], s, t0, n);
            tokens(&e, t0, n, xin);
            /* reference on a cache that never saw a failing call */
            snprintf(what, sizeof what, "decode %s: reference", tag);
            check_status(what, mh_layer_decode(e.g, fresh, &(mh_decode_args){.batch = DB, .n_new = n, .x = xin, .out = ref}, e.ws, e.ws_cap), MH_OK);
            /* the failing calls, then the same decode on the test cache */
            failing_decodes(&e, cache, n, xin, tag);
            dec_poison(&e);
            snprintf(what, sizeof what, "decode %s: succeeds after the failures", tag);
            check_status(what, mh_layer_decode(e.g, cache, &(mh_decode_args){.batch = DB, .n_new = n, .x = xin, .out = e.out}, e.ws, e.ws_cap), MH_OK);
            snprintf(what, sizeof what, "decode %s: same output as on the fresh cache", tag);
            check_bitwise(what, e.out, ref, (size_t)DB * n * DD);
            snprintf(what, sizeof what, "decode %s: length grows by n_new", tag);
            check_true(what, mh_kv_cache_length(cache) == t0 + n && mh_kv_cache_length(fresh) == t0 + n);
            t0 += n;
        }
        /* The cache is full now: one more token is refused and changes nothing. */
        snprintf(what, sizeof what, "decode %s: full cache", dn[d]);
        tokens(&e, 0, 1, xin);
        expect_decode(&e, what, e.g, cache, cache, DB, 1, xin, e.out, e.ws, e.ws_cap, MH_ERR_CACHE_FULL);
        snprintf(what, sizeof what, "decode %s: full cache, length stays at capacity", dn[d]);
        check_true(what, mh_kv_cache_length(cache) == DCAP);
        /* After reset, both caches replay identically: the failures left nothing behind. */
        mh_kv_cache_reset(cache), mh_kv_cache_reset(fresh);
        tokens(&e, 0, DCAP, xin);
        check_status("decode: replay on reset fresh cache",
                     mh_layer_decode(e.g, fresh, &(mh_decode_args){.batch = DB, .n_new = DCAP, .x = xin, .out = ref}, e.ws, e.ws_cap), MH_OK);
        check_status("decode: replay on reset test cache",
                     mh_layer_decode(e.g, cache, &(mh_decode_args){.batch = DB, .n_new = DCAP, .x = xin, .out = e.out}, e.ws, e.ws_cap), MH_OK);
        snprintf(what, sizeof what, "decode %s: replay after reset identical", dn[d]);
        check_bitwise(what, e.out, ref, all);
        mh_kv_cache_destroy(fresh), mh_kv_cache_destroy(cache);
    }

    /* A cross-attention layer's own cache cannot be decoded into either. */
    {
        mh_kv_cache* xcache = NULL;
        const mh_status st = mh_kv_cache_create(e.cross, DB, DCAP, MH_DTYPE_F32, &xcache);
        if (st == MH_OK && xcache) {
            tokens(&e, 0, 1, xin);
            expect_decode(&e, "decode: cross layer on its own cache", e.cross, xcache, xcache, DB, 1, xin,
                          e.out, e.ws, e.ws_cap, MH_ERR_UNSUPPORTED);
            mh_kv_cache_destroy(xcache);
        } else {
            check_status("decode: cache for a cross layer refused as unsupported", st, MH_ERR_UNSUPPORTED);
        }
    }

    /* decode workspace size */
    {
        size_t bytes = BYTES_SENTINEL;
        char what[96];
        check_status("decode ws size: NULL layer", mh_layer_decode_workspace_size(NULL, DB, 1, &bytes),
                     MH_ERR_INVALID_ARGUMENT);
        check_status("decode ws size: NULL bytes", mh_layer_decode_workspace_size(e.g, DB, 1, NULL),
                     MH_ERR_INVALID_ARGUMENT);
        static const int bad[] = {0, -1, INT_MIN};
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            snprintf(what, sizeof what, "decode ws size: batch %d", bad[i]);
            check_status(what, mh_layer_decode_workspace_size(e.g, bad[i], 1, &bytes), MH_ERR_INVALID_ARGUMENT);
            snprintf(what, sizeof what, "decode ws size: n_new %d", bad[i]);
            check_status(what, mh_layer_decode_workspace_size(e.g, DB, bad[i], &bytes), MH_ERR_INVALID_ARGUMENT);
        }
        check_status("decode ws size: INT_MAX x INT_MAX overflows",
                     mh_layer_decode_workspace_size(e.g, INT_MAX, INT_MAX, &bytes), MH_ERR_SIZE_OVERFLOW);
        check_true("decode ws size: bytes untouched by every failure", bytes == BYTES_SENTINEL);
    }
    free(xin), free(ref);

done:
    mh_layer_destroy(e.g), mh_layer_destroy(e.cross);
    for (int i = 0; i < 4; i++) mh_layer_destroy(e.other[i]);
    free(e.x), free(e.out), free(e.ws);
}

int main(void) {
    test_context_create();
    mh_context* ctx = test_context(2);

    attn_env ae;
    attn_setup(&ae, ctx);
    test_attention_pointers(&ae);
    test_attention_sizes(&ae);
    test_attention_strides(&ae);
    test_attention_overflow(&ae);
    test_attention_options(&ae);
    test_attention_workspace(&ae);
    attn_teardown(&ae);

    wbufs* wb = malloc(sizeof *wb);
    test_rng r;
    rng_seed(&r, 404);
    for (int i = 0; i < 4; i++) rng_fill(&r, wb->w[i], WCAP, -0.3f, 0.3f);
    for (int i = 0; i < 4; i++) rng_fill(&r, wb->b[i], BCAP, -0.3f, 0.3f);
    test_layer_create(ctx, wb);
    test_foreign_fields(ctx, wb);
    test_forward(ctx, wb);
    test_cache_create(ctx, wb);
    test_decode(ctx, wb);
    free(wb);

    mh_context_destroy(ctx);
    return test_exit_code("test_bad_input");
}
