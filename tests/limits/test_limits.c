/*
 * Limits: very long caches, huge head counts, and requests that cannot be satisfied.
 *
 * 1. Decode over 1M keys in an f16 cache (H = 2, D = 8, d_model = 16: 64 MB of cache). The
 *    cache is filled through mh_layer_decode in chunks of 64K tokens. A chunk attends
 *    causally over everything before it, so filling 1M tokens with the real layer would cost
 *    O(1M^2); the chunks go through a twin layer (same weights) with window = 1 instead, which
 *    appends exactly the same K/V (a KV cache holds K/V only, and mh_layer_decode accepts any
 *    layer of the cache's shape). The last token is decoded by the real layer (no window),
 *    attending over all 1,048,576 keys, and compared with the double-precision oracle run on
 *    the same keys. Weights are multiples of 1/8 or 1/64 and inputs multiples of 1/4, so every
 *    K/V value is exact in f16 and the oracle sees exactly what the cache holds. (Sanitizer
 *    builds use 256K keys: the same code paths, in a quarter of the time.)
 * 2. Huge head counts: n_heads = 2^20 with head_dim 1 (MHA and GQA) creates, runs forward and
 *    decode, and matches the oracle.
 * 3. Sizes whose products overflow int, size_t or ptrdiff_t, and requests far beyond any
 *    memory (KV caches of capacity INT_MAX, weights of 2^61 elements, workspaces for
 *    INT_MAX x INT_MAX tokens, strides near PTRDIFF_MAX): each fails with
 *    MH_ERR_SIZE_OVERFLOW, MH_ERR_OUT_OF_MEMORY, MH_ERR_INVALID_ARGUMENT,
 *    MH_ERR_WORKSPACE_TOO_SMALL or MH_ERR_CACHE_FULL, writes nothing (the out pointer keeps a
 *    sentinel, outputs keep their poison) and never crashes. Every such request fails before
 *    reading the caller's (deliberately tiny) arrays or allocating more than an address
 *    space can hold (>= 2^48 bytes), so none can succeed by accident.
 * 4. Create requests that are large but representable (8 GB of weights): the weights are a
 *    read-only zero mapping that costs no memory, and RLIMIT_AS is lowered so the library's
 *    copy cannot be allocated: create must return MH_ERR_OUT_OF_MEMORY (and free what it had
 *    allocated). Skipped under sanitizers (their allocators reserve terabytes of address space).
 */
#define _GNU_SOURCE
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/mman.h>
#include <sys/resource.h>
#endif

#include "check.h"
#include "layer_fixture.h"
#include "oracle.h"
#include "problem.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define MH_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define MH_SANITIZED 1
#endif
#endif

/* ASan: a request beyond its maximum allocation size returns NULL (as malloc does) instead
 * of aborting the program; harmless without ASan. */
const char* __asan_default_options(void);
const char* __asan_default_options(void) { return "allocator_may_return_null=1"; }

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ------------------------------------------------------------------ 1. 1M keys in f16 */

enum { LD = 16, LH = 2, LDH = 8, CHUNK = 1 << 16 };

/* 1M keys; 256K under sanitizers (the same code paths at a quarter of the time, which is
 * 4-10x longer there); MH_LIMITS_LONG_KEYS overrides (e.g. for slow emulators). */
#if defined(MH_SANITIZED)
static int g_long_keys = 1 << 18;
#else
static int g_long_keys = 1 << 20;
#endif

/* Input element c of token t: a multiple of 1/4 in [-1, 1], from a hash (no storage). */
static float x_at(uint64_t t, int c) {
    uint64_t z = (t * LD + (uint64_t)c + 1) * 0x9E3779B97F4A7C15ull;
    z ^= z >> 31, z *= 0xBF58476D1CE4E5B9ull, z ^= z >> 29;
    return 0.25f * (float)((int)(z % 9) - 4);
}

static void x_rows(uint64_t t0, int n, float* x) {
    for (int t = 0; t < n; t++)
        for (int c = 0; c < LD; c++) x[(size_t)t * LD + c] = x_at(t0 + (uint64_t)t, c);
}

/* An exactly representable float (zero, or normal in f16) to its f16 bits. */
static uint16_t f16_exact(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    const uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a == 0) return (uint16_t)sign;
    if (a < 0x38800000u || a >= 0x47800000u || (a & 0x1fffu)) { /* subnormal, too big, inexact */
        fprintf(stderr, "f16_exact: %g is not exact in f16\n", (double)f);
        exit(1);
    }
    return (uint16_t)(sign | ((a - 0x38000000u) >> 13));
}

/* Weights k * step with |k| <= range. */
static void dyadic(test_rng* r, float* w, size_t n, float step, int range) {
    for (size_t i = 0; i < n; i++) w[i] = step * (float)rng_int(r, -range, range);
}

static void long_cache(const mh_context* ctx) {
    const double t_start = now();
    const int chunk = g_long_keys / 2 < CHUNK ? g_long_keys / 2 : CHUNK;
    const char* env = getenv("MH_LIMITS_LONG_KEYS");
    if (env && atoi(env) >= 2) g_long_keys = atoi(env);
    test_rng r;
    rng_seed(&r, 1000003);
    mh_layer_config c = mh_layer_config_default();
    c.d_model = LD, c.n_heads = LH, c.head_dim = LDH, c.bias = 1;
    layer_fixture f;
    if (!check_status("long cache: create", fixture_make(&f, ctx, &c, &r, 0.5f), MH_OK)) return;
    /* q and k small (scores within a few units, so all 1M keys carry weight), v larger;
     * k and v are multiples of 1/256 and 1/32 below 2^2 and 2^4: exact in f16 */
    dyadic(&r, f.wq, LH * LDH * LD, 1.0f / 64, 4), dyadic(&r, f.bq, LH * LDH, 1.0f / 64, 4);
    dyadic(&r, f.wk, LH * LDH * LD, 1.0f / 64, 4), dyadic(&r, f.bk, LH * LDH, 1.0f / 64, 4);
    dyadic(&r, f.wv, LH * LDH * LD, 1.0f / 8, 4), dyadic(&r, f.bv, LH * LDH, 1.0f / 8, 4);
    mh_layer_destroy(f.layer);
    f.layer = NULL;
    mh_layer *full = NULL, *fill = NULL;
    mh_layer_config cw = c;
    cw.window = 1;
    check_status("long cache: layer", fixture_recreate(&f, ctx, &c, &full), MH_OK);
    check_status("long cache: windowed twin", fixture_recreate(&f, ctx, &cw, &fill), MH_OK);
    mh_kv_cache* cache = NULL;
    if (!check_status("long cache: f16 cache",
                      mh_kv_cache_create(full, 1, g_long_keys, MH_DTYPE_F16, &cache), MH_OK))
        return;
    printf("%d-key f16 cache: %zu bytes per token, %.1f MB\n", g_long_keys, mh_kv_cache_bytes_per_token(cache),
           (double)mh_kv_cache_bytes_per_token(cache) * g_long_keys / 1e6);

    size_t ws_bytes = 0;
    check_status("long cache: chunk workspace", mh_layer_decode_workspace_size(fill, 1, chunk, &ws_bytes), MH_OK);
    void* ws = aligned_alloc(64, (ws_bytes + 63) / 64 * 64);
    float* x = malloc(sizeof(float) * (size_t)chunk * LD);
    float* y = malloc(sizeof(float) * (size_t)chunk * LD);
    mh_status st = MH_OK;
    for (int t = 0; t < g_long_keys - 1 && st == MH_OK; t += chunk) {
        const int n = g_long_keys - 1 - t < chunk ? g_long_keys - 1 - t : chunk;
        x_rows((uint64_t)t, n, x);
        st = mh_layer_decode(fill, cache, &(mh_decode_args){.batch = 1, .n_new = n, .x = x, .out = y}, ws, ws_bytes);
    }
    check_status("long cache: fill all but one token in 64K chunks", st, MH_OK);
    check_true("long cache: length after the fill", mh_kv_cache_length(cache) == g_long_keys - 1);
    const double t_fill = now();

    /* the last token, over all 1M keys */
    float x_last[LD], y_last[LD];
    x_rows(g_long_keys - 1, 1, x_last);
    st = mh_layer_decode(full, cache, &(mh_decode_args){.batch = 1, .n_new = 1, .x = x_last, .out = y_last}, ws, ws_bytes);
    const double t_decode = now();
    check_status("long cache: decode the last token over the whole cache", st, MH_OK);
    check_true("long cache: full", mh_kv_cache_length(cache) == g_long_keys);
    float poison[LD];
    for (int i = 0; i < LD; i++) poison[i] = y[i] = -777.0f;
    check_status("long cache: one more token is MH_ERR_CACHE_FULL",
                 mh_layer_decode(full, cache, &(mh_decode_args){.batch = 1, .n_new = 1, .x = x_last, .out = y}, ws, ws_bytes), MH_ERR_CACHE_FULL);
    check_true("long cache: a full cache's failed decode writes nothing",
               memcmp(y, poison, sizeof poison) == 0 && mh_kv_cache_length(cache) == g_long_keys);

    /* the oracle: K/V of every token (exact in f16), the last query, attention in double */
    const size_t kv_elems = (size_t)g_long_keys * LH * LDH;
    uint16_t* k16 = malloc(sizeof(uint16_t) * kv_elems);
    uint16_t* v16 = malloc(sizeof(uint16_t) * kv_elems);
    float row[LD];
    for (size_t t = 0; t < (size_t)g_long_keys; t++) {
        x_rows(t, 1, row);
        for (int o = 0; o < LH * LDH; o++) {
            float sk = f.bk[o], sv = f.bv[o]; /* exact: dyadic with few bits */
            for (int i = 0; i < LD; i++) sk += f.wk[o * LD + i] * row[i], sv += f.wv[o * LD + i] * row[i];
            k16[t * LH * LDH + (size_t)o] = f16_exact(sk);
            v16[t * LH * LDH + (size_t)o] = f16_exact(sv);
        }
    }
    double qd[LH * LDH];
    oracle_linear(x_last, 1, LD, f.wq, f.bq, LH * LDH, qd);
    float qf[LH * LDH];
    for (int i = 0; i < LH * LDH; i++) qf[i] = (float)qd[i]; /* exact */
    mh_attn_problem p;
    memset(&p, 0, sizeof p);
    p.batch = 1, p.n_q = 1, p.n_kv = g_long_keys, p.n_heads = LH, p.n_kv_heads = LH;
    p.head_dim_qk = p.head_dim_v = LDH;
    p.q = (mh_tensor){.data = qf, .stride_batch = LH * LDH, .stride_token = LH * LDH, .stride_head = LDH};
    p.k = (mh_tensor){.data = k16, .stride_batch = (ptrdiff_t)kv_elems, .stride_token = LH * LDH, .stride_head = LDH};
    p.v = (mh_tensor){.data = v16, .stride_batch = (ptrdiff_t)kv_elems, .stride_token = LH * LDH, .stride_head = LDH};
    p.k_dtype = p.v_dtype = MH_DTYPE_F16;
    float o_lib[LH * LDH];
    p.o.data = o_lib, p.o.stride_batch = LH * LDH, p.o.stride_token = LH * LDH, p.o.stride_head = LDH;
    mh_attn_options opt = mh_attn_options_default();
    opt.causal = 1;
    double o_ref[LH * LDH], want[LD];
    oracle_attention(&p, &opt, o_ref, NULL);
    for (int j = 0; j < LD; j++) {
        double s = f.bo[j];
        for (int i = 0; i < LH * LDH; i++) s += (double)f.wo[j * LH * LDH + i] * o_ref[i];
        want[j] = s;
    }
    /* Tolerance: the softmax sums 1M terms in f32. Blocked (tiles, split-KV chunks) the sum's
     * relative error stays ~1e-6 (a plain running sum could drift to ~1e-4); the attention
     * output is a weighted mean of |v| <= 8.5, then projected with |w_o| <= 0.5 over 16
     * inputs. 1e-4 absolute leaves 10x over what blocked summation gives. */
    err_stats e = err_f32_f64(y_last, want, LD);
    printf("%d-key decode vs oracle: max_abs %.3g, rel_l2 %.3g (fill %.2f s, last decode %.1f ms)\n",
           g_long_keys, e.max_abs, e.rel_l2, t_fill - t_start, 1e3 * (t_decode - t_fill));
    check_close("long cache: decode over every key (f16) == oracle", y_last, want, LD, 1e-4, 1e-5);
    /* a second computation: the core on the oracle's copy of the keys, through a strided
     * head-major view, must agree with the oracle just as closely */
    size_t core_bytes = 0;
    check_status("long cache: core workspace", mh_attention_workspace_size(ctx, &p, &opt, &core_bytes), MH_OK);
    void* core_ws = aligned_alloc(64, (core_bytes + 63) / 64 * 64);
    check_status("long cache: core over the f16 keys", mh_attention(ctx, &p, &opt, core_ws, core_bytes), MH_OK);
    check_close("long cache: core over the f16 keys == oracle", o_lib, o_ref, LH * LDH, 1e-5, 1e-5);
    free(core_ws), free(k16), free(v16), free(ws), free(x), free(y);
    mh_kv_cache_destroy(cache);
    mh_layer_destroy(full);
    mh_layer_destroy(fill);
    fixture_free(&f);
}

/* ------------------------------------------------------------------ 2. huge head counts */

static void huge_heads(const mh_context* ctx, int n_heads, int n_kv_heads) {
    char what[200];
    test_rng r;
    rng_seed(&r, 4242 + (uint64_t)n_kv_heads);
    mh_layer_config c = mh_layer_config_default();
    c.variant = n_kv_heads == n_heads ? MH_VARIANT_MHA : MH_VARIANT_GQA;
    c.d_model = 3, c.n_heads = n_heads, c.n_kv_heads = n_kv_heads, c.head_dim = 1, c.bias = 1;
    layer_fixture f;
    snprintf(what, sizeof what, "%d heads (Hkv %d), head_dim 1: create", n_heads, n_kv_heads);
    mh_status st = fixture_make(&f, ctx, &c, &r, 0.5f);
    if (st == MH_ERR_OUT_OF_MEMORY) { /* allowed, though ~64 MB should be there */
        printf("%s: out of memory\n", what);
        fixture_free(&f);
        return;
    }
    if (!check_status(what, st, MH_OK)) return;
    enum { B = 1, N = 2 };
    float x[B * N * 3], y[B * N * 3], yd[B * N * 3];
    rng_fill(&r, x, B * N * 3, -1, 1);
    mh_attn_options opt = mh_attn_options_default();
    opt.causal = 1;
    mh_forward_args a = {.batch = B, .n_q = N, .query = x, .out = y, .opt = &opt};
    size_t fw = 0, dw = 0;
    mh_layer_forward_workspace_size(f.layer, B, N, N, &fw);
    mh_layer_decode_workspace_size(f.layer, B, 1, &dw);
    printf("%d heads (Hkv %d): packed weights %.1f MB, forward workspace %.1f MB, decode workspace %.1f MB\n",
           n_heads, n_kv_heads, (double)mh_layer_weights_bytes(f.layer) / 1e6, (double)fw / 1e6, (double)dw / 1e6);
    snprintf(what, sizeof what, "%d heads (Hkv %d): forward", n_heads, n_kv_heads);
    if (check_status(what, run_forward(f.layer, &a), MH_OK)) {
        double want[B * N * 3];
        oracle_layer_forward(&f.cfg, &f.w, &a, want);
        err_stats e = err_f32_f64(y, want, B * N * 3);
        printf("%d heads (Hkv %d): forward vs oracle max_abs %.3g rel_l2 %.3g\n", n_heads, n_kv_heads, e.max_abs, e.rel_l2);
        /* each output sums 2^20 head outputs x w_o: f32 rounding grows with sqrt(H) */
        snprintf(what, sizeof what, "%d heads (Hkv %d): forward == oracle", n_heads, n_kv_heads);
        check_close(what, y, want, B * N * 3, 1e-3, 1e-4);
    }
    mh_kv_cache* cache = NULL;
    snprintf(what, sizeof what, "%d heads (Hkv %d): KV cache", n_heads, n_kv_heads);
    if (check_status(what, mh_kv_cache_create(f.layer, B, N, MH_DTYPE_F32, &cache), MH_OK)) {
        float xt[B * 3], yt[B * 3];
        st = MH_OK;
        for (int t = 0; t < N && st == MH_OK; t++) {
            for (int b = 0; b < B; b++) memcpy(xt + b * 3, x + (b * N + t) * 3, sizeof(float) * 3);
            st = run_decode(f.layer, cache, B, 1, xt, yt);
            for (int b = 0; b < B; b++) memcpy(yd + (b * N + t) * 3, yt + b * 3, sizeof(float) * 3);
        }
        snprintf(what, sizeof what, "%d heads (Hkv %d): decode token by token", n_heads, n_kv_heads);
        check_status(what, st, MH_OK);
        err_stats e = err_f32_f32(yd, y, B * N * 3);
        printf("%d heads (Hkv %d): decode vs forward max_abs %.3g; forward output magnitude ~%.3g\n", n_heads, n_kv_heads, e.max_abs, (double)fabsf(y[0]));
        snprintf(what, sizeof what, "%d heads (Hkv %d): decode == forward", n_heads, n_kv_heads);
        check_close_f32(what, yd, y, B * N * 3, 1e-2);
        mh_kv_cache_destroy(cache);
    }
    fixture_free(&f);
}

/* ------------------------------------------------------------------ 3. impossible requests */

#define SENTINEL ((void*)(uintptr_t)0x5e17)

/* mh_layer_create of cfg with tiny weight arrays: must fail with one of `allowed` (a bit set
 * of statuses) and leave *out alone. */
enum { ZERO_FLOATS = 1 << 20 };
static float* g_zeros; /* ZERO_FLOATS zeros: as much as any failing create below may read */

static void create_fails(const mh_context* ctx, const mh_layer_config* cfg, unsigned allowed,
                         const char* what) {
    const float* w = g_zeros;
    mh_layer_weights wt = {.w_q = w, .w_k = w, .w_v = w, .w_o = w};
    if (cfg->bias) wt.b_q = wt.b_k = wt.b_v = wt.b_o = w;
    mh_layer* out = SENTINEL;
    mh_status st = mh_layer_create(ctx, cfg, &wt, &out);
    char msg[240];
    snprintf(msg, sizeof msg, "%s: fails cleanly (got %s)", what, mh_status_string(st));
    check_true(msg, st != MH_OK && (allowed & (1u << st)) != 0);
    snprintf(msg, sizeof msg, "%s: *out untouched", what);
    check_true(msg, out == SENTINEL);
    if (st == MH_OK && out != SENTINEL) mh_layer_destroy(out);
}

#define S(x) (1u << (x))

static void impossible_requests(const mh_context* ctx) {
    g_zeros = calloc(ZERO_FLOATS, sizeof(float));
    mh_layer_config c = mh_layer_config_default();
    /* int products */
    c.d_model = 4, c.n_heads = 1 << 16, c.head_dim = 1 << 15; /* H*D = 2^31 */
    create_fails(ctx, &c, S(MH_ERR_SIZE_OVERFLOW), "n_heads * head_dim = 2^31");
    c.n_heads = 46341, c.head_dim = 46341; /* just over INT_MAX */
    create_fails(ctx, &c, S(MH_ERR_SIZE_OVERFLOW), "n_heads * head_dim = 46341^2");
    c.n_heads = 1 << 20, c.head_dim = 1, c.head_dim_v = 1 << 12; /* H*Dv = 2^32 */
    create_fails(ctx, &c, S(MH_ERR_SIZE_OVERFLOW), "n_heads * head_dim_v = 2^32");
    c.n_heads = INT_MAX, c.head_dim = 2, c.head_dim_v = 0, c.variant = MH_VARIANT_MQA;
    create_fails(ctx, &c, S(MH_ERR_SIZE_OVERFLOW), "MQA, n_heads INT_MAX * head_dim 2");
    /* size_t products: 2^30 x 2^31 weight elements (2^63 bytes) */
    c = mh_layer_config_default();
    c.d_model = INT_MAX, c.n_heads = 1 << 15, c.head_dim = 1 << 15;
    create_fails(ctx, &c, S(MH_ERR_SIZE_OVERFLOW) | S(MH_ERR_OUT_OF_MEMORY), "w_q of 2^30 x INT_MAX");
    c = mh_layer_config_default(); /* w_q [2^17, 1] is packed (and read), then w_k fails */
    c.d_model = 1, c.n_heads = 1 << 17, c.head_dim = 1, c.kdim = INT_MAX, c.vdim = 1;
    create_fails(ctx, &c, S(MH_ERR_OUT_OF_MEMORY), "w_k of 2^17 x INT_MAX (2^50 bytes) after w_q");
    /* invalid sizes */
    c = mh_layer_config_default();
    c.d_model = -1, c.n_heads = 2, c.head_dim = 2;
    create_fails(ctx, &c, S(MH_ERR_INVALID_ARGUMENT), "d_model -1");
    c.d_model = 4, c.n_heads = INT_MIN;
    create_fails(ctx, &c, S(MH_ERR_INVALID_ARGUMENT), "n_heads INT_MIN");
    c.n_heads = 2, c.head_dim = 2, c.kdim = -5;
    create_fails(ctx, &c, S(MH_ERR_INVALID_ARGUMENT), "kdim -5");
    c.kdim = 0, c.window = INT_MIN;
    create_fails(ctx, &c, S(MH_ERR_INVALID_ARGUMENT), "window INT_MIN");

    /* a valid layer with many heads for the cache and workspace requests */
    test_rng r;
    rng_seed(&r, 77);
    c = mh_layer_config_default();
    c.variant = MH_VARIANT_GQA, c.d_model = 2, c.n_heads = 1 << 12, c.n_kv_heads = 1 << 12, c.head_dim = 16;
    layer_fixture f;
    if (!check_status("2^12-head layer", fixture_make(&f, ctx, &c, &r, 0.5f), MH_OK)) return;
    static const struct {
        int batch, capacity;
        mh_dtype dt;
        unsigned allowed;
        const char* what;
    } caches[] = {
        /* 2^12 heads x 16 x INT_MAX x 2 bytes: 2^48 bytes per tensor (more than any address space) */
        {1, INT_MAX, MH_DTYPE_F16, S(MH_ERR_OUT_OF_MEMORY) | S(MH_ERR_SIZE_OVERFLOW), "cache 1 x INT_MAX, 2^12 heads x 16, f16"},
        {1, INT_MAX, MH_DTYPE_F32, S(MH_ERR_OUT_OF_MEMORY) | S(MH_ERR_SIZE_OVERFLOW), "cache 1 x INT_MAX, 2^12 heads x 16, f32"},
        {INT_MAX, INT_MAX, MH_DTYPE_F32, S(MH_ERR_SIZE_OVERFLOW), "cache INT_MAX x INT_MAX, 2^12 heads x 16"},
        {4096, 1 << 20, MH_DTYPE_BF16, S(MH_ERR_OUT_OF_MEMORY) | S(MH_ERR_SIZE_OVERFLOW), "cache 4096 x 2^20, 2^12 heads x 16 (2^61 bytes)"},
        {0, 16, MH_DTYPE_F16, S(MH_ERR_INVALID_ARGUMENT), "cache batch 0"},
        {1, INT_MIN, MH_DTYPE_F16, S(MH_ERR_INVALID_ARGUMENT), "cache capacity INT_MIN"},
        {1, INT_MAX, MH_DTYPE_I8, S(MH_ERR_OUT_OF_MEMORY) | S(MH_ERR_SIZE_OVERFLOW), "cache 1 x INT_MAX, 2^12 heads x 16, int8"},
        {1, 16, (mh_dtype)4, S(MH_ERR_INVALID_ARGUMENT), "cache dtype 4"},
    };
    for (size_t i = 0; i < sizeof caches / sizeof caches[0]; i++) {
        mh_kv_cache* kv = SENTINEL;
        mh_status st = mh_kv_cache_create(f.layer, caches[i].batch, caches[i].capacity, caches[i].dt, &kv);
        char msg[240];
        snprintf(msg, sizeof msg, "%s: fails cleanly (got %s)", caches[i].what, mh_status_string(st));
        check_true(msg, st != MH_OK && (caches[i].allowed & S(st)) != 0);
        snprintf(msg, sizeof msg, "%s: *out untouched", caches[i].what);
        check_true(msg, kv == SENTINEL);
        if (st == MH_OK && kv != SENTINEL) mh_kv_cache_destroy(kv);
    }

    /* workspaces: sizes that overflow, and sizes that are representable but absurd (the call
     * must then refuse a small workspace without reading its tiny inputs) */
    size_t bytes = 12345;
    mh_status st = mh_layer_forward_workspace_size(f.layer, INT_MAX, INT_MAX, INT_MAX, &bytes);
    check_true("forward workspace for INT_MAX^2 tokens: MH_ERR_SIZE_OVERFLOW, *bytes untouched",
               st == MH_ERR_SIZE_OVERFLOW && bytes == 12345);
    st = mh_layer_decode_workspace_size(f.layer, INT_MAX, INT_MAX, &bytes);
    check_true("decode workspace for INT_MAX^2 tokens: MH_ERR_SIZE_OVERFLOW, *bytes untouched",
               st == MH_ERR_SIZE_OVERFLOW && bytes == 12345);
    float in[64] = {0}, out[64], poison[64];
    for (int i = 0; i < 64; i++) out[i] = poison[i] = -555.0f;
    char ws_buf[256 + 64];
    void* ws = (void*)(((uintptr_t)ws_buf + 63) & ~(uintptr_t)63);
    mh_forward_args a = {.batch = INT_MAX, .n_q = INT_MAX, .query = in, .out = out};
    st = mh_layer_forward(f.layer, &a, ws, 256);
    check_true("forward of INT_MAX x INT_MAX tokens: fails cleanly", st == MH_ERR_SIZE_OVERFLOW);
    a.batch = 1, a.n_q = INT_MAX;
    st = mh_layer_forward_workspace_size(f.layer, 1, INT_MAX, INT_MAX, &bytes);
    check_true("forward workspace for 1 x INT_MAX tokens: overflow or a size",
               st == MH_ERR_SIZE_OVERFLOW || st == MH_OK);
    if (st == MH_OK) printf("forward workspace for 1 x INT_MAX tokens, 2^12 heads: %.3g bytes\n", (double)bytes);
    st = mh_layer_forward(f.layer, &a, ws, 256);
    check_true("forward of 1 x INT_MAX tokens with a 256-byte workspace: fails cleanly",
               st == MH_ERR_SIZE_OVERFLOW || st == MH_ERR_WORKSPACE_TOO_SMALL);
    mh_attn_options po = mh_attn_options_default();
    float probs[4];
    po.probs = probs;
    a.batch = 1 << 20, a.n_q = 1 << 20, a.opt = &po; /* probs: 2^20 * 2^12 * 2^20 * 2^20 floats */
    st = mh_layer_forward(f.layer, &a, ws, 256);
    check_true("forward with probs of 2^64 elements: MH_ERR_SIZE_OVERFLOW", st == MH_ERR_SIZE_OVERFLOW);
    check_true("failed forwards wrote nothing", memcmp(out, poison, sizeof out) == 0);
    mh_kv_cache* small = NULL;
    check_status("small cache", mh_kv_cache_create(f.layer, 1, 8, MH_DTYPE_F16, &small), MH_OK);
    st = mh_layer_decode(f.layer, small, &(mh_decode_args){.batch = 1, .n_new = INT_MAX, .x = in, .out = out}, ws, 256);
    check_true("decode of INT_MAX new tokens: MH_ERR_CACHE_FULL", st == MH_ERR_CACHE_FULL);
    check_true("failed decode wrote nothing", memcmp(out, poison, sizeof out) == 0 && mh_kv_cache_length(small) == 0);
    mh_kv_cache_destroy(small);
    fixture_free(&f);

    /* mh_attention: views whose largest index does not fit, masks likewise */
    float q[64] = {0}, k[64] = {0}, v[64] = {0};
    mh_attn_problem p;
    memset(&p, 0, sizeof p);
    p.batch = 2, p.n_q = 2, p.n_kv = 2, p.n_heads = 1, p.n_kv_heads = 1, p.head_dim_qk = 4, p.head_dim_v = 4;
    p.q = (mh_tensor){.data = q, .stride_batch = 8, .stride_token = 4, .stride_head = 4};
    p.k = (mh_tensor){.data = k, .stride_batch = 8, .stride_token = 4, .stride_head = 4};
    p.v = (mh_tensor){.data = v, .stride_batch = 8, .stride_token = 4, .stride_head = 4};
    p.o.data = out, p.o.stride_batch = 8, p.o.stride_token = 4, p.o.stride_head = 4;
    p.k.stride_batch = PTRDIFF_MAX / 2 + 1; /* (B - 1) * stride: fits; + the rest: does not */
    p.k.stride_token = PTRDIFF_MAX / 2;
    st = mh_attention_workspace_size(ctx, &p, NULL, &bytes);
    check_true("K view whose last index overflows ptrdiff_t: MH_ERR_SIZE_OVERFLOW", st == MH_ERR_SIZE_OVERFLOW);
    p.k = (mh_tensor){.data = k, .stride_batch = 8, .stride_token = 4, .stride_head = 4};
    p.batch = INT_MAX, p.n_q = INT_MAX, p.n_kv = INT_MAX;
    p.q = (mh_tensor){.data = q, .stride_batch = (ptrdiff_t)INT_MAX * 4, .stride_token = 4, .stride_head = 4};
    p.k = p.v = p.q;
    p.o.stride_batch = (ptrdiff_t)INT_MAX * 4;
    st = mh_attention(ctx, &p, NULL, ws, 256);
    check_true("attention of INT_MAX^3 sizes: fails cleanly (overflow or workspace too small)",
               st == MH_ERR_SIZE_OVERFLOW || st == MH_ERR_WORKSPACE_TOO_SMALL);
    p.batch = 1, p.n_q = 1;
    p.q = (mh_tensor){.data = q, .stride_batch = 4, .stride_token = 4, .stride_head = 4};
    p.o.stride_batch = 4;
    mh_attn_options mo = mh_attn_options_default();
    mo.mask = q, mo.mask_stride_row = PTRDIFF_MAX / 2;
    p.n_q = 3, p.q = (mh_tensor){.data = q, .stride_batch = 12, .stride_token = 4, .stride_head = 4}, p.o.stride_batch = 12;
    p.n_kv = 2, p.k = p.v = (mh_tensor){.data = k, .stride_batch = 8, .stride_token = 4, .stride_head = 4};
    st = mh_attention(ctx, &p, &mo, ws, 256);
    check_true("mask whose last index overflows: MH_ERR_SIZE_OVERFLOW", st == MH_ERR_SIZE_OVERFLOW);
    check_true("failed attention calls wrote nothing", memcmp(out, poison, sizeof out) == 0);

    /* a context of INT_MAX threads: per-thread scratch times INT_MAX */
    mh_context_config cc = mh_context_config_default();
    cc.num_threads = INT_MAX;
    cc.isa = mh_context_isa(ctx);
    mh_context* big = SENTINEL;
    st = mh_context_create(&cc, &big);
    check_true("context of INT_MAX threads: created or refused cleanly",
               st == MH_OK || (st == MH_ERR_INVALID_ARGUMENT && big == SENTINEL));
    if (st == MH_OK) {
        p.n_q = 1, p.q = (mh_tensor){.data = q, .stride_batch = 4, .stride_token = 4, .stride_head = 4}, p.o.stride_batch = 4;
        st = mh_attention_workspace_size(big, &p, NULL, &bytes);
        check_true("INT_MAX threads: workspace size overflows or is a number",
                   st == MH_OK || st == MH_ERR_SIZE_OVERFLOW);
        if (st == MH_OK) printf("workspace of a 1-query call on an INT_MAX-thread context: %.3g bytes\n", (double)bytes);
        mh_context_destroy(big);
    }
    free(g_zeros);
}

/* ------------------------------------------------------------------ 4. large creates, OOM */

#if defined(__linux__) && !defined(MH_SANITIZED)
static long vm_size_kb(void) {
    FILE* f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long kb = -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmSize:", 7) == 0) kb = atol(line + 7);
    fclose(f);
    return kb;
}

static void out_of_memory(const mh_context* ctx) {
    /* 8 GB + a page of read-only zeros: costs address space only */
    const size_t span = ((size_t)INT_MAX + 4096) * sizeof(float);
    void* zeros = mmap(NULL, span, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    const long vm = vm_size_kb();
    if (zeros == MAP_FAILED || vm < 0) {
        printf("out-of-memory creates: skipped (no 8 GB mapping here)\n");
        return;
    }
    struct rlimit old, lim;
    getrlimit(RLIMIT_AS, &old);
    lim = old;
    lim.rlim_cur = (rlim_t)(vm + 512 * 1024) * 1024; /* 512 MB more than now */
    if (old.rlim_cur != RLIM_INFINITY && old.rlim_cur < lim.rlim_cur) lim.rlim_cur = old.rlim_cur;
    if (setrlimit(RLIMIT_AS, &lim) != 0) {
        printf("out-of-memory creates: skipped (setrlimit failed)\n");
        munmap(zeros, span);
        return;
    }
    /* the limit must really hold (qemu-user accepts setrlimit but does not apply it): a
     * 768 MB request (never touched) must fail */
    void* (*volatile alloc)(size_t) = malloc; /* not elided by the compiler */
    void* probe = alloc((size_t)768 << 20);
    if (probe) {
        free(probe);
        setrlimit(RLIMIT_AS, &old);
        munmap(zeros, span);
        printf("out-of-memory creates: skipped (RLIMIT_AS is not enforced here)\n");
        return;
    }
    const float* z = zeros;
    static const struct {
        int d_model, n_heads, head_dim, kdim, alibi;
        const char* what;
    } cases[] = {
        {1, INT_MAX, 1, 0, 0, "n_heads INT_MAX (8 GB w_q)"},
        {1, INT_MAX, 1, 0, 1, "n_heads INT_MAX with ALiBi slopes (8 GB copy)"},
        {INT_MAX, 1, 1, 0, 0, "d_model INT_MAX (8 GB w_q, w_k, w_v, w_o)"},
        {1, 1, 1, INT_MAX, 0, "kdim INT_MAX (w_q fine, 8 GB w_k)"},
        {4096, 1 << 14, 16, 0, 0, "d_model 4096 x 2^14 heads x 16 (4 GB per matrix)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mh_layer_config c = mh_layer_config_default();
        c.d_model = cases[i].d_model, c.n_heads = cases[i].n_heads, c.head_dim = cases[i].head_dim;
        c.kdim = cases[i].kdim, c.vdim = cases[i].kdim ? 1 : 0;
        if (cases[i].alibi) c.alibi_slopes = z;
        mh_layer_weights w = {.w_q = z, .w_k = z, .w_v = z, .w_o = z};
        mh_layer* out = SENTINEL;
        const mh_status st = mh_layer_create(ctx, &c, &w, &out);
        char msg[240];
        snprintf(msg, sizeof msg, "%s under a 512 MB address-space limit: MH_ERR_OUT_OF_MEMORY (got %s)",
                 cases[i].what, mh_status_string(st));
        check_true(msg, st == MH_ERR_OUT_OF_MEMORY && out == SENTINEL);
        if (st == MH_OK) mh_layer_destroy(out);
    }
    /* a cache that does not fit the limit either */
    mh_layer_config c = mh_layer_config_default();
    c.d_model = 4, c.n_heads = 4, c.head_dim = 64;
    test_rng r;
    rng_seed(&r, 9);
    layer_fixture f;
    if (check_status("small layer", fixture_make(&f, ctx, &c, &r, 0.5f), MH_OK)) {
        mh_kv_cache* kv = SENTINEL;
        const mh_status st = mh_kv_cache_create(f.layer, 8, 1 << 20, MH_DTYPE_F32, &kv); /* 16 GB */
        check_true("a 16 GB cache under the limit: MH_ERR_OUT_OF_MEMORY", st == MH_ERR_OUT_OF_MEMORY && kv == SENTINEL);
        if (st == MH_OK && kv != SENTINEL) mh_kv_cache_destroy(kv);
    }
    setrlimit(RLIMIT_AS, &old);
    fixture_free(&f);
    munmap(zeros, span);
}
#endif

static int want_part(int argc, char** argv, const char* part) {
    if (argc < 2) return 1;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], part) == 0) return 1;
    return 0;
}

/* Slow-machine limit (tests/support/problem.h). */
#define SLOW_MS 10.0

/* test_limits [long] [heads] [impossible] [oom]: the parts to run (default all) */
int main(int argc, char** argv) {
    mh_context* ctx = test_context(1);
    const int slow = slow_machine(ctx, SLOW_MS);
    if (slow) g_long_keys = 1 << 12; /* still split (>= 2048 keys) */
    const double t0 = now();
    if (want_part(argc, argv, "long")) long_cache(ctx);
    const double t1 = now();
    if (want_part(argc, argv, "heads")) {
        huge_heads(ctx, slow ? 1 << 14 : 1 << 20, slow ? 1 << 7 : 1 << 10); /* GQA: 2^20 query heads */
        huge_heads(ctx, slow ? 1 << 12 : 1 << 18, slow ? 1 << 12 : 1 << 18); /* MHA: 2^18 heads */
    }
    const double t2 = now();
    if (want_part(argc, argv, "impossible")) impossible_requests(ctx);
#if defined(__linux__) && !defined(MH_SANITIZED)
    if (want_part(argc, argv, "oom")) out_of_memory(ctx);
#else
    printf("out-of-memory creates under RLIMIT_AS: skipped (sanitizer build)\n");
#endif
    printf("timings: long cache %.2f s, 2^20 heads %.2f s, the rest %.2f s\n", t1 - t0, t2 - t1, now() - t2);
    mh_context_destroy(ctx);
    return test_exit_code("test_limits");
}
