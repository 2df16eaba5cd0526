/*
 * mh_convert_mha_to_gqa (MHA -> GQA/MQA by mean-pooling, GQA paper):
 *  - against a double oracle of the pooled weights (mean of each group's K/V heads), with and
 *    without biases, Dv != D and cross-attention input widths, from MHA and from a GQA source;
 *  - n_kv_heads = the source's K/V heads returns the source weights bitwise;
 *  - the converted weights make a working GQA layer equal to the double layer oracle on them,
 *    and equal to MHA whose K/V heads are the pooled ones repeat-interleaved;
 *  - bad arguments return MH_ERR_INVALID_ARGUMENT and write nothing.
 */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "layer_fixture.h"
#include "oracle.h"
#include "problem.h"

/* want[j*dim + r, c] = mean over h in group j of src[h*dim + r, c], in double. */
static double* pooled(const float* src, int kv_src, int kv, int dim, int cols) {
    const int g = kv_src / kv;
    double* out = calloc((size_t)kv * dim * cols, sizeof(double));
    for (int j = 0; j < kv; j++)
        for (int i = 0; i < g; i++)
            for (int r = 0; r < dim; r++)
                for (int c = 0; c < cols; c++)
                    out[((size_t)j * dim + r) * cols + c] += (double)src[((size_t)(j * g + i) * dim + r) * cols + c] / g;
    return out;
}

static void against_oracle(test_rng* r, mh_variant v, int H, int kv_src, int kv, int bias) {
    mh_layer_config c = mh_layer_config_default();
    c.variant = v, c.d_model = 20, c.n_heads = H, c.n_kv_heads = v == MH_VARIANT_MHA ? 0 : kv_src;
    c.head_dim = 6, c.head_dim_v = 5, c.kdim = 13, c.vdim = 11, c.bias = bias;
    const int D = 6, Dv = 5;
    float* wk = malloc(sizeof(float) * kv_src * D * 13);
    float* wv = malloc(sizeof(float) * kv_src * Dv * 11);
    float *bk = malloc(sizeof(float) * kv_src * D), *bv = malloc(sizeof(float) * kv_src * Dv);
    rng_fill(r, wk, (size_t)kv_src * D * 13, -1, 1), rng_fill(r, wv, (size_t)kv_src * Dv * 11, -1, 1);
    rng_fill(r, bk, (size_t)kv_src * D, -1, 1), rng_fill(r, bv, (size_t)kv_src * Dv, -1, 1);
    mh_layer_weights w = {.w_k = wk, .w_v = wv, .b_k = bias ? bk : NULL, .b_v = bias ? bv : NULL};
    float* ok = malloc(sizeof(float) * kv * D * 13);
    float* ov = malloc(sizeof(float) * kv * Dv * 11);
    float *obk = malloc(sizeof(float) * kv * D), *obv = malloc(sizeof(float) * kv * Dv);
    char what[120];
    snprintf(what, sizeof what, "convert variant %d H%d kv %d -> %d bias %d", (int)v, H, kv_src, kv, bias);
    if (check_status(what, mh_convert_mha_to_gqa(&c, &w, kv, ok, ov, bias ? obk : NULL, bias ? obv : NULL), MH_OK)) {
        double *pk = pooled(wk, kv_src, kv, D, 13), *pv = pooled(wv, kv_src, kv, Dv, 11);
        double *pbk = pooled(bk, kv_src, kv, D, 1), *pbv = pooled(bv, kv_src, kv, Dv, 1);
        /* one rounding of a mean of values in [-1, 1] */
        check_close(what, ok, pk, (size_t)kv * D * 13, FLT_EPSILON, FLT_EPSILON);
        check_close(what, ov, pv, (size_t)kv * Dv * 11, FLT_EPSILON, FLT_EPSILON);
        if (bias) {
            check_close(what, obk, pbk, (size_t)kv * D, FLT_EPSILON, FLT_EPSILON);
            check_close(what, obv, pbv, (size_t)kv * Dv, FLT_EPSILON, FLT_EPSILON);
        }
        if (kv == kv_src) {
            check_bitwise("same K/V head count: the source weights", ok, wk, (size_t)kv * D * 13);
            check_bitwise("same K/V head count: the source weights (V)", ov, wv, (size_t)kv * Dv * 11);
            if (bias) check_bitwise("same K/V head count: the source biases", obk, bk, (size_t)kv * D);
        }
        free(pk), free(pv), free(pbk), free(pbv);
    }
    free(wk), free(wv), free(bk), free(bv), free(ok), free(ov), free(obk), free(obv);
}

/* The pooled weights as a GQA layer: the layer oracle on them, and MHA with them repeated. */
static void as_layer(const mh_context* ctx, test_rng* r, int kv) {
    enum { B = 2, N = 17, DM = 24, H = 6, D = 8 };
    mh_layer_config c = mh_layer_config_default();
    c.d_model = DM, c.n_heads = H, c.head_dim = D, c.bias = 1;
    layer_fixture f;
    if (!check_status("mha create", fixture_make(&f, ctx, &c, r, 0.5f), MH_OK)) return;
    float *wk = malloc(sizeof(float) * kv * D * DM), *wv = malloc(sizeof(float) * kv * D * DM);
    float *bk = malloc(sizeof(float) * kv * D), *bv = malloc(sizeof(float) * kv * D);
    check_status("convert", mh_convert_mha_to_gqa(&c, &f.w, kv, wk, wv, bk, bv), MH_OK);
    mh_layer_config cg = c;
    cg.variant = MH_VARIANT_GQA, cg.n_kv_heads = kv;
    mh_layer_weights wg = f.w;
    wg.w_k = wk, wg.w_v = wv, wg.b_k = bk, wg.b_v = bv;
    /* MHA with K/V head h = pooled head h / (H / kv) */
    float *rk = malloc(sizeof(float) * H * D * DM), *rv = malloc(sizeof(float) * H * D * DM);
    float *rbk = malloc(sizeof(float) * H * D), *rbv = malloc(sizeof(float) * H * D);
    for (int h = 0; h < H; h++) {
        const int j = h / (H / kv);
        memcpy(rk + (size_t)h * D * DM, wk + (size_t)j * D * DM, sizeof(float) * D * DM);
        memcpy(rv + (size_t)h * D * DM, wv + (size_t)j * D * DM, sizeof(float) * D * DM);
        memcpy(rbk + h * D, bk + j * D, sizeof(float) * D), memcpy(rbv + h * D, bv + j * D, sizeof(float) * D);
    }
    mh_layer_weights wr = f.w;
    wr.w_k = rk, wr.w_v = rv, wr.b_k = rbk, wr.b_v = rbv;
    mh_layer *gqa = NULL, *rep = NULL;
    float* x = malloc(sizeof(float) * B * N * DM);
    float *yg = malloc(sizeof(float) * B * N * DM), *yr = malloc(sizeof(float) * B * N * DM);
    double* want = malloc(sizeof(double) * B * N * DM);
    rng_fill(r, x, (size_t)B * N * DM, -1, 1);
    mh_attn_options opt = mh_attn_options_default();
    opt.causal = 1;
    mh_forward_args a = {.batch = B, .n_q = N, .query = x, .out = yg, .opt = &opt};
    if (check_status("gqa create", mh_layer_create(ctx, &cg, &wg, &gqa), MH_OK) &&
        check_status("repeated mha create", mh_layer_create(ctx, &c, &wr, &rep), MH_OK)) {
        check_status("gqa forward", run_forward(gqa, &a), MH_OK);
        cg.head_dim_v = D, cg.kdim = cg.vdim = DM;
        oracle_layer_forward(&cg, &wg, &a, want);
        check_close("converted GQA layer == layer oracle", yg, want, (size_t)B * N * DM,
                    8 * FLT_EPSILON * (DM + H * D + N + 64), 2e-6);
        a.out = yr;
        check_status("mha forward", run_forward(rep, &a), MH_OK);
        check_close_f32("converted GQA == MHA with the pooled K/V heads repeated", yg, yr, (size_t)B * N * DM,
                        16 * FLT_EPSILON * (DM + H * D));
    }
    mh_layer_destroy(gqa), mh_layer_destroy(rep);
    free(wk), free(wv), free(bk), free(bv), free(rk), free(rv), free(rbk), free(rbv);
    free(x), free(yg), free(yr), free(want);
    fixture_free(&f);
}

static void bad_arguments(test_rng* r) {
    mh_layer_config c = mh_layer_config_default();
    c.d_model = 8, c.n_heads = 4, c.head_dim = 2, c.bias = 1;
    float wk[64], wv[64], bk[8], bv[8], out[64], ob[8];
    rng_fill(r, wk, 64, -1, 1), rng_fill(r, wv, 64, -1, 1), rng_fill(r, bk, 8, -1, 1), rng_fill(r, bv, 8, -1, 1);
    const mh_layer_weights w = {.w_k = wk, .w_v = wv, .b_k = bk, .b_v = bv};
    mh_layer_weights nob = w;
    nob.b_v = NULL;
    mh_layer_config overlap = c, gqa_bad = c, neg = c;
    overlap.variant = MH_VARIANT_OVERLAP;
    gqa_bad.variant = MH_VARIANT_GQA, gqa_bad.n_kv_heads = 3;
    neg.head_dim = -2;
    struct {
        const char* what;
        const mh_layer_config* c;
        const mh_layer_weights* w;
        int kv;
        float* b;
    } bad[] = {
        {"NULL config", NULL, &w, 2, ob},         {"NULL weights", &c, NULL, 2, ob},
        {"n_kv_heads 0", &c, &w, 0, ob},          {"n_kv_heads does not divide H", &c, &w, 3, ob},
        {"n_kv_heads > H", &c, &w, 8, ob},        {"not a GQA-family source", &overlap, &w, 2, ob},
        {"bad source config", &gqa_bad, &w, 1, ob}, {"negative head_dim", &neg, &w, 2, ob},
        {"bias layer without a source bias", &c, &nob, 2, ob}, {"bias layer without output biases", &c, &w, 2, NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(out, 0x5a, sizeof out), memset(ob, 0x5a, sizeof ob);
        check_status(bad[i].what, mh_convert_mha_to_gqa(bad[i].c, bad[i].w, bad[i].kv, out, out + 32, bad[i].b, bad[i].b ? ob + 4 : NULL),
                     MH_ERR_INVALID_ARGUMENT);
        check_true("nothing written", all_bytes(out, sizeof out, 0x5a) && all_bytes(ob, sizeof ob, 0x5a));
    }
    check_status("NULL output", mh_convert_mha_to_gqa(&c, &w, 2, NULL, out, ob, ob + 4), MH_ERR_INVALID_ARGUMENT);
    c.bias = 0;
    check_status("biases given to a bias-free layer", mh_convert_mha_to_gqa(&c, &w, 2, out, out + 32, NULL, NULL),
                 MH_ERR_INVALID_ARGUMENT);
}

int main(void) {
    mh_context* ctx = test_context(2);
    test_rng r;
    rng_seed(&r, 61);
    for (int bias = 0; bias < 2; bias++) {
        against_oracle(&r, MH_VARIANT_MHA, 8, 8, 8, bias);
        against_oracle(&r, MH_VARIANT_MHA, 8, 8, 4, bias);
        against_oracle(&r, MH_VARIANT_MHA, 8, 8, 2, bias);
        against_oracle(&r, MH_VARIANT_MHA, 6, 6, 3, bias);
        against_oracle(&r, MH_VARIANT_MHA, 6, 6, 1, bias);
        against_oracle(&r, MH_VARIANT_GQA, 8, 4, 2, bias);
        against_oracle(&r, MH_VARIANT_GQA, 8, 4, 4, bias);
        against_oracle(&r, MH_VARIANT_MQA, 8, 1, 1, bias);
    }
    as_layer(ctx, &r, 2);
    as_layer(ctx, &r, 1);
    bad_arguments(&r);
    mh_context_destroy(ctx);
    return test_exit_code("test_convert_gqa");
}
