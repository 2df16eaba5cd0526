/*
 * Results are bitwise identical for every thread count: the layer forward, decode and the
 * core with probabilities, on 1, 2, 3 and 5 threads (more threads than tasks included).
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "layer_fixture.h"
#include "problem.h"

enum { B = 2, N = 45, D_MODEL = 64, H = 8, HKV = 2, D = 16 };

static float* layer_run(const mh_context* ctx, const layer_fixture* f, const mh_layer_config* c,
                        const float* x) {
    mh_layer* L = NULL;
    check_status("create", fixture_recreate(f, ctx, c, &L), MH_OK);
    const size_t n = (size_t)B * N * D_MODEL;
    float* y = malloc(sizeof(float) * 2 * n);
    mh_attn_options opt = mh_attn_options_default();
    opt.causal = 1;
    mh_forward_args a = {.batch = B, .n_q = N, .query = x, .out = y, .opt = &opt};
    check_status("forward", run_forward(L, &a), MH_OK);
    mh_kv_cache* cache = NULL;
    check_status("cache", mh_kv_cache_create(L, B, N, MH_DTYPE_F32, &cache), MH_OK);
    check_status("decode", run_decode(L, cache, B, N, x, y + n), MH_OK);
    mh_kv_cache_destroy(cache);
    mh_layer_destroy(L);
    return y;
}

int main(void) {
    test_rng r;
    rng_seed(&r, 3);
    static const int threads[] = {1, 2, 3, 5};
    mh_layer_config c = mh_layer_config_default();
    c.variant = MH_VARIANT_GQA, c.d_model = D_MODEL, c.n_heads = H, c.n_kv_heads = HKV, c.head_dim = D, c.bias = 1;
    mh_context* ctx1 = test_context(1);
    layer_fixture f;
    check_status("fixture", fixture_make(&f, ctx1, &c, &r, 0.5f), MH_OK);
    const size_t n = (size_t)B * N * D_MODEL;
    float* x = malloc(sizeof(float) * n);
    rng_fill(&r, x, n, -1, 1);
    float* ref = layer_run(ctx1, &f, &c, x);

    test_problem t;
    problem_make(&t, &r, 2, 70, 130, 6, 3, 24, 20, MH_DTYPE_F32, LAYOUT_TOKEN_MAJOR, 1.0f);
    const size_t np = (size_t)2 * 6 * 70 * 130, no = t.o_elems;
    float *p_ref = malloc(sizeof(float) * np), *p_got = malloc(sizeof(float) * np);
    float* o_ref = malloc(sizeof(float) * no);
    mh_attn_options opt = mh_attn_options_default();
    opt.causal = 1, opt.probs = p_ref;
    check_status("core", run_attention(ctx1, &t.p, &opt), MH_OK);
    memcpy(o_ref, t.o, sizeof(float) * no);

    /* a decode-shaped core call long enough to split its key range */
    test_problem dq;
    problem_make(&dq, &r, 1, 1, 5000, 8, 1, 64, 64, MH_DTYPE_F16, LAYOUT_HEAD_MAJOR, 1.0f);
    float* dq_ref = malloc(sizeof(float) * dq.o_elems);
    check_status("decode core", run_attention(ctx1, &dq.p, NULL), MH_OK);
    memcpy(dq_ref, dq.o, sizeof(float) * dq.o_elems);

    /* a prefill-shaped core call with 16 K/V heads: on 1 to 3 threads each worker packs its
     * own heads' K/V tiles (core/driver_layout.h, mh_drv_pack_per_worker), on 5 they are packed
     * for the whole call first */
    test_problem pw;
    problem_make(&pw, &r, 2, 100, 150, 8, 8, 32, 32, MH_DTYPE_F16, LAYOUT_HEAD_MAJOR, 1.0f);
    float* pw_ref = malloc(sizeof(float) * pw.o_elems);
    mh_attn_options causal = mh_attn_options_default();
    causal.causal = 1;
    check_status("prefill core", run_attention(ctx1, &pw.p, &causal), MH_OK);
    memcpy(pw_ref, pw.o, sizeof(float) * pw.o_elems);

    for (int i = 1; i < 4; i++) {
        mh_context* ctx = test_context(threads[i]);
        float* y = layer_run(ctx, &f, &c, x);
        check_bitwise("layer forward + decode: same bits on any thread count", y, ref, 2 * n);
        opt.probs = p_got;
        check_status("core", run_attention(ctx, &t.p, &opt), MH_OK);
        check_bitwise("core output: same bits on any thread count", t.o, o_ref, no);
        check_bitwise("core probabilities: same bits on any thread count", p_got, p_ref, np);
        check_status("decode core", run_attention(ctx, &dq.p, NULL), MH_OK);
        check_bitwise("split-KV decode core: same bits on any thread count", dq.o, dq_ref, dq.o_elems);
        check_status("prefill core", run_attention(ctx, &pw.p, &causal), MH_OK);
        check_bitwise("prefill core, K/V packed per worker or per call: same bits", pw.o, pw_ref, pw.o_elems);
        free(y);
        mh_context_destroy(ctx);
    }
    free(x), free(ref), free(p_ref), free(p_got), free(o_ref);
    problem_free(&t);
    problem_free(&dq);
    problem_free(&pw);
    free(dq_ref), free(pw_ref);
    fixture_free(&f);
    mh_context_destroy(ctx1);
    return test_exit_code("test_threads_bitwise");
}
