/*
 * Issue 14 items 18-22: the limits of the public API.
 *
 * 1. q_offset whose positions (q_offset + N, and their distance to M keys) overflow int64_t is
 *    MH_ERR_INVALID_ARGUMENT in mh_attention and mh_layer_forward, and writes nothing; the
 *    largest accepted q_offset runs (UBSan builds check the arithmetic).
 * 2. num_threads above MH_MAX_THREADS is refused; at MH_MAX_THREADS the size queries of
 *    impossible problems report MH_ERR_SIZE_OVERFLOW.
 * 3. Foreign objects (a zeroed block, as a destroyed handle's cleared magic reads, and another
 *    handle type) passed as a cache or a context are refused and left untouched.
 * 4. mh_attention_workspace_bound: random problems within random limits (random dtypes,
 *    layouts, probs, masks, head gates, kv_len, q_offset) never need more than the bound and run
 *    in exactly that many bytes; and the bound equals the largest real need within the limits
 *    (ratio 1: it is the need of the problem at the maxima of the sizes, at some batch and
 *    n_q). Among them, limits whose largest batch packs K/V per worker while a smaller batch
 *    packs every head at once, in more slots (core/driver.h, mh_drv_grid_heads_max).
 * 5. num_threads = 0 follows OMP_NUM_THREADS when the environment sets it (ctest runs this
 *    test with OMP_NUM_THREADS=1 and =3, both different from this 2-core machine's count).
 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "layer_fixture.h"
#include "problem.h"

static void* aligned(size_t bytes) { return aligned_alloc(64, (bytes + 63) / 64 * 64 + 64); }

static void q_offset_overflow(const mh_context* ctx) {
    test_rng r;
    rng_seed(&r, 18);
    test_problem t;
    const int N = 4, M = 8;
    problem_make(&t, &r, 1, N, M, 2, 1, 8, 8, MH_DTYPE_F32, LAYOUT_TOKEN_MAJOR, 1.0f);
    mh_attn_options o = mh_attn_options_default();
    o.causal = 1;
    const int64_t bad[] = {INT64_MAX, INT64_MAX - N - M + 1, INT64_MAX - N};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        o.q_offset = bad[i];
        memset(t.o, 0x7f, t.o_elems * sizeof(float));
        check_status("attention q_offset overflow", run_attention(ctx, &t.p, &o), MH_ERR_INVALID_ARGUMENT);
        check_true("attention q_offset overflow writes nothing", all_bytes(t.o, t.o_elems * sizeof(float), 0x7f));
    }
    o.q_offset = INT64_MAX - N - M; /* the largest accepted: every query sees every key */
    check_status("attention largest q_offset", run_attention(ctx, &t.p, &o), MH_OK);
    problem_free(&t);

    layer_fixture f;
    mh_layer_config c = mh_layer_config_default();
    c.d_model = 16, c.n_heads = 2, c.head_dim = 8;
    if (!check_status("mha create", fixture_make(&f, ctx, &c, &r, 0.5f), MH_OK)) return;
    float x[4 * 16], y[4 * 16];
    rng_fill(&r, x, 4 * 16, -1.0f, 1.0f);
    mh_forward_args a = {1, 4, 4, x, NULL, NULL, y, &o, NULL};
    o.q_offset = INT64_MAX - 4 - 4 + 1;
    memset(y, 0x7f, sizeof y);
    check_status("forward q_offset overflow", run_forward(f.layer, &a), MH_ERR_INVALID_ARGUMENT);
    check_true("forward q_offset overflow writes nothing", all_bytes(y, sizeof y, 0x7f));
    o.q_offset = INT64_MAX - 4 - 4;
    check_status("forward largest q_offset", run_forward(f.layer, &a), MH_OK);
    fixture_free(&f);
}

static void thread_bound(void) {
    mh_context_config cfg = mh_context_config_default();
    mh_context* ctx = (mh_context*)&cfg; /* sentinel: must stay */
    const int bad[] = {INT_MAX, MH_MAX_THREADS + 1, -1};
    for (size_t i = 0; i < 3; i++) {
        cfg.num_threads = bad[i];
        check_status("num_threads out of range", mh_context_create(&cfg, &ctx), MH_ERR_INVALID_ARGUMENT);
        check_true("refused create writes nothing", ctx == (mh_context*)&cfg);
    }
    cfg.num_threads = MH_MAX_THREADS;
    if (!check_status("MH_MAX_THREADS", mh_context_create(&cfg, &ctx), MH_OK)) return;
    check_true("MH_MAX_THREADS kept", mh_context_num_threads(ctx) == MH_MAX_THREADS);
    size_t bytes = 7;
    mh_attn_limits huge = {INT_MAX, INT_MAX, INT_MAX, 1 << 20, 1 << 10, INT_MAX, INT_MAX};
    check_status("bound overflow", mh_attention_workspace_bound(ctx, &huge, &bytes), MH_ERR_SIZE_OVERFLOW);
    check_true("overflowing query writes nothing", bytes == 7);
    test_rng r;
    rng_seed(&r, 19);
    layer_fixture f;
    mh_layer_config c = mh_layer_config_default();
    c.d_model = 16, c.n_heads = 2, c.head_dim = 8;
    if (check_status("mha create", fixture_make(&f, ctx, &c, &r, 0.5f), MH_OK)) {
        check_status("decode size overflow", mh_layer_decode_workspace_size(f.layer, INT_MAX, INT_MAX, &bytes),
                     MH_ERR_SIZE_OVERFLOW);
        check_status("forward size overflow",
                     mh_layer_forward_workspace_size(f.layer, INT_MAX, INT_MAX, INT_MAX, &bytes),
                     MH_ERR_SIZE_OVERFLOW);
        check_true("overflowing queries write nothing", bytes == 7);
        fixture_free(&f);
    }
    mh_context_destroy(ctx);
}

static void foreign_handles(const mh_context* ctx) {
    test_rng r;
    rng_seed(&r, 20);
    layer_fixture f;
    mh_layer_config c = mh_layer_config_default();
    c.d_model = 16, c.n_heads = 2, c.head_dim = 8;
    if (!check_status("mha create", fixture_make(&f, ctx, &c, &r, 0.5f), MH_OK)) return;
    unsigned char* zero = aligned(4096); /* a cleared handle: what destroy leaves in the magic */
    memset(zero, 0, 4096);
    float x[16], y[16];
    rng_fill(&r, x, 16, -1.0f, 1.0f);
    mh_decode_args d = {.batch = 1, .n_new = 1, .x = x, .out = y};
    void* ws = aligned(1 << 20);
    mh_kv_cache* foreign[] = {(mh_kv_cache*)zero, (mh_kv_cache*)f.layer, (mh_kv_cache*)ctx};
    for (size_t i = 0; i < 3; i++) {
        memset(y, 0x7f, sizeof y);
        check_status("decode foreign cache", mh_layer_decode(f.layer, foreign[i], &d, ws, 1 << 20),
                     MH_ERR_INVALID_ARGUMENT);
        check_true("decode foreign cache writes nothing", all_bytes(y, sizeof y, 0x7f));
        check_true("foreign cache length", mh_kv_cache_length(foreign[i]) == 0);
        check_true("foreign cache capacity", mh_kv_cache_capacity(foreign[i]) == 0);
        check_true("foreign cache bytes", mh_kv_cache_bytes_per_token(foreign[i]) == 0);
    }
    mh_kv_cache_reset((mh_kv_cache*)zero);
    mh_kv_cache_destroy((mh_kv_cache*)zero); /* ignored: not a cache */
    check_true("reset/destroy leave a foreign object", all_bytes(zero, 4096, 0));
    mh_kv_cache* cache;
    if (check_status("cache create", mh_kv_cache_create(f.layer, 1, 4, MH_DTYPE_F32, &cache), MH_OK)) {
        check_status("decode live cache", mh_layer_decode(f.layer, cache, &d, ws, 1 << 20), MH_OK);
        check_true("live cache length", mh_kv_cache_length(cache) == 1);
        mh_kv_cache_destroy(cache);
    }
    /* contexts */
    const mh_context* fake = (const mh_context*)zero;
    check_true("foreign context threads", mh_context_num_threads(fake) == 0);
    check_true("foreign context isa", mh_context_isa(fake) == MH_ISA_AUTO);
    mh_layer* L = (mh_layer*)zero;
    check_status("layer create on foreign context", mh_layer_create(fake, &f.cfg, &f.w, &L), MH_ERR_INVALID_ARGUMENT);
    check_true("refused layer create writes nothing", L == (mh_layer*)zero);
    test_problem t;
    problem_make(&t, &r, 1, 2, 3, 2, 1, 8, 8, MH_DTYPE_F32, LAYOUT_TOKEN_MAJOR, 1.0f);
    check_status("attention on foreign context", mh_attention(fake, &t.p, NULL, ws, 1 << 20), MH_ERR_INVALID_ARGUMENT);
    size_t bytes;
    check_status("size on foreign context", mh_attention_workspace_size((const mh_context*)f.layer, &t.p, NULL, &bytes),
                 MH_ERR_INVALID_ARGUMENT);
    mh_context_destroy((mh_context*)zero); /* ignored */
    check_true("context destroy leaves a foreign object", all_bytes(zero, 4096, 0));
    problem_free(&t);
    free(ws);
    free(zero);
    fixture_free(&f);
}

static size_t need_of(const mh_context* ctx, const mh_attn_problem* p, const mh_attn_options* o) {
    size_t n = 0;
    check_status("workspace size", mh_attention_workspace_size(ctx, p, o, &n), MH_OK);
    return n;
}

/* A random problem within lim run in exactly `bound` bytes. */
static void fits_bound(const mh_context* ctx, test_rng* r, const mh_attn_limits* lim, size_t bound) {
    const int B = rng_int(r, 1, lim->max_batch), N = rng_int(r, 1, lim->max_q);
    const int M = rng_int(r, 1, lim->max_kv), H = lim->n_heads;
    const mh_dtype dt = (mh_dtype)rng_int(r, 0, 2);
    test_problem t;
    problem_make(&t, r, B, N, M, H, lim->n_kv_heads, rng_int(r, 1, lim->max_head_dim_qk),
                 rng_int(r, 1, lim->max_head_dim_v), dt, (test_layout)rng_int(r, 0, 2), 1.0f);
    mh_attn_options o = mh_attn_options_default();
    o.causal = rng_int(r, 0, 1);
    const size_t BHNM = (size_t)B * H * N * M;
    float* probs = rng_int(r, 0, 1) ? malloc(BHNM * sizeof(float)) : NULL;
    float* mask = rng_int(r, 0, 2) == 0 ? calloc(BHNM, sizeof(float)) : NULL;
    float* gates = !probs && !mask && rng_int(r, 0, 1) ? malloc((size_t)B * N * H * sizeof(float)) : NULL;
    int32_t kv_len[8];
    if (rng_int(r, 0, 1)) {
        for (int b = 0; b < B; b++) kv_len[b] = rng_int(r, 0, M);
        o.kv_len = kv_len;
    }
    if (rng_int(r, 0, 1)) o.q_offset = rng_int(r, 0, 3 * M);
    if (gates)
        for (size_t i = 0; i < (size_t)B * N * H; i++) gates[i] = (float)rng_int(r, 0, 2) * 0.5f;
    o.probs = probs, o.head_gates = gates, o.mask = mask;
    o.mask_stride_batch = (ptrdiff_t)H * N * M, o.mask_stride_head = (ptrdiff_t)N * M, o.mask_stride_row = M;
    const size_t need = need_of(ctx, &t.p, &o);
    if (!check_true("problem within the limits fits the bound", need <= bound))
        fprintf(stderr, "  B=%d N=%d M=%d need %zu > bound %zu\n", B, N, M, need, bound);
    void* ws = aligned(bound);
    check_status("runs in the bound", mh_attention(ctx, &t.p, &o, ws, bound), MH_OK);
    free(ws), free(probs), free(mask), free(gates);
    problem_free(&t);
}

static void workspace_bound(const mh_context* ctx) {
    test_rng r;
    rng_seed(&r, 21);
    double worst_ratio = 0.0;
    for (int round = 0; round < 25; round++) {
        const int hkv = rng_int(&r, 1, 3);
        mh_attn_limits lim = {rng_int(&r, 1, 3), rng_int(&r, 1, 80), rng_int(&r, 1, 600),
                              hkv * rng_int(&r, 1, 8), hkv, rng_int(&r, 1, 80), rng_int(&r, 1, 80)};
        if (round == 24) /* on 2 threads: 8 K/V heads packed per worker at batch 2, 4 at once at batch 1;
                            * 4000 keys, so the 4 heads' tiles outweigh the rest of batch 2's layout
                            * with either key tile (64 on Arm, 512 on x86) */
            lim = (mh_attn_limits){2, 200, 4000, 4, 4, 32, 32};
        size_t bound = 0;
        if (!check_status("bound", mh_attention_workspace_bound(ctx, &lim, &bound), MH_OK)) return;
        for (int i = 0; i < 6; i++) fits_bound(ctx, &r, &lim, bound);
        /* the largest real need within the limits: the maxima at every n_q, gated or not */
        test_problem t;
        problem_make(&t, &r, lim.max_batch, lim.max_q, lim.max_kv, lim.n_heads, lim.n_kv_heads,
                     lim.max_head_dim_qk, lim.max_head_dim_v, MH_DTYPE_F32, LAYOUT_TOKEN_MAJOR, 1.0f);
        float* gates = calloc((size_t)lim.max_batch * lim.max_q * lim.n_heads, sizeof(float));
        mh_attn_options gated = mh_attn_options_default();
        gated.head_gates = gates;
        size_t largest = 0, at_max_batch = 0;
        for (int batch = 1; batch <= lim.max_batch; batch++)
            for (int n = 1; n <= lim.max_q; n++) {
                t.p.batch = batch, t.p.n_q = n;
                size_t need = need_of(ctx, &t.p, NULL);
                const size_t g = need_of(ctx, &t.p, &gated);
                need = g > need ? g : need;
                largest = need > largest ? need : largest;
                if (batch == lim.max_batch) at_max_batch = need > at_max_batch ? need : at_max_batch;
            }
        if (round == 24) check_true("a smaller batch can need more", largest > at_max_batch);
        const double ratio = (double)bound / (double)largest;
        worst_ratio = ratio > worst_ratio ? ratio : worst_ratio;
        check_true("bound is the largest real need", bound == largest);
        free(gates);
        problem_free(&t);
    }
    printf("workspace bound / largest real need: %.3f at worst\n", worst_ratio);
}

static void zero_threads_follow_openmp(void) {
    mh_context_config cfg = mh_context_config_default();
    mh_context* ctx;
    if (!check_status("create 0 threads", mh_context_create(&cfg, &ctx), MH_OK)) return;
    const int n = mh_context_num_threads(ctx);
    const char* env = getenv("OMP_NUM_THREADS");
    check_true("0 threads: 1..MH_MAX_THREADS", n >= 1 && n <= MH_MAX_THREADS);
    if (env) {
        printf("OMP_NUM_THREADS=%s: context threads %d\n", env, n);
        check_true("0 threads follow OMP_NUM_THREADS", n == atoi(env));
    }
    mh_context_destroy(ctx);
}

int main(void) {
    mh_context* ctx = test_context(2);
    zero_threads_follow_openmp();
    q_offset_overflow(ctx);
    thread_bound();
    foreign_handles(ctx);
    workspace_bound(ctx);
    mh_context_destroy(ctx);
    return test_exit_code("test_api_limits");
}
