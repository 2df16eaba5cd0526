/*
 * One decode workspace serves every smaller n_new: for every variant, batch 1 and 3, the size
 * mh_layer_decode_workspace_size reports never drops as n_new grows (the attention's plan
 * changes with the number of query rows: a single query tile reserves split-KV partials), and
 * a prompt, single steps and a short chunk all run in the workspace sized once for the
 * largest n_new, with the same bits as with workspaces of their own exact sizes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "dcmha_fixture.h"
#include "layer_fixture.h"
#include "problem.h"

enum { N_MAX = 200, D_MODEL = 32 };

static void* aligned(size_t bytes) { return aligned_alloc(64, (bytes + 63) / 64 * 64); }

/* Sizes for n_new = 1..N_MAX never drop. */
static void sizes_never_drop(const mh_layer* layer, const char* name, int batch) {
    size_t prev = 0, worst_drop = 0;
    int at = 0;
    for (int n = 1; n <= N_MAX; n++) {
        size_t bytes = 0;
        if (!check_status("decode size", mh_layer_decode_workspace_size(layer, batch, n, &bytes), MH_OK)) return;
        if (bytes < prev && prev - bytes > worst_drop) worst_drop = prev - bytes, at = n;
        prev = bytes > prev ? bytes : prev;
    }
    char what[160];
    snprintf(what, sizeof what, "%s B=%d: decode size never drops as n_new grows (dropped %zu bytes at n_new %d)",
             name, batch, worst_drop, at);
    check_true(what, worst_drop == 0);
}

/* Prompt of 150, two single steps and a chunk of 7 in one workspace of the N_MAX size, equal
 * bit for bit to the same calls with their own exact workspaces. */
static void one_workspace_serves_all(const mh_layer* layer, const char* name, int batch, test_rng* r) {
    static const int steps[] = {150, 1, 1, 7};
    const int total = 159;
    const size_t n = (size_t)batch * total * D_MODEL;
    float *x = malloc(n * sizeof(float)), *y_one = malloc(n * sizeof(float)), *y_own = malloc(n * sizeof(float));
    rng_fill(r, x, n, -1, 1);
    size_t bytes = 0;
    mh_layer_decode_workspace_size(layer, batch, N_MAX, &bytes);
    void* ws = aligned(bytes);
    mh_kv_cache *c1 = NULL, *c2 = NULL;
    mh_kv_cache_create(layer, batch, total, MH_DTYPE_F16, &c1);
    mh_kv_cache_create(layer, batch, total, MH_DTYPE_F16, &c2);
    int ok = c1 && c2;
    float *xs = malloc(n * sizeof(float)), *ys = malloc(n * sizeof(float));
    for (size_t s = 0, t0 = 0; ok && s < sizeof steps / sizeof steps[0]; t0 += (size_t)steps[s], s++) {
        const size_t k = (size_t)steps[s];
        for (int b = 0; b < batch; b++) /* x rows t0 .. t0 + k of every sequence, contiguous */
            memcpy(xs + (size_t)b * k * D_MODEL, x + ((size_t)b * total + t0) * D_MODEL, k * D_MODEL * sizeof(float));
        mh_decode_args a = {.batch = batch, .n_new = steps[s], .x = xs, .out = ys};
        ok &= mh_layer_decode(layer, c1, &a, ws, bytes) == MH_OK;
        for (int b = 0; b < batch; b++)
            memcpy(y_one + ((size_t)b * total + t0) * D_MODEL, ys + (size_t)b * k * D_MODEL, k * D_MODEL * sizeof(float));
        ok &= run_decode(layer, c2, batch, steps[s], xs, ys) == MH_OK;
        for (int b = 0; b < batch; b++)
            memcpy(y_own + ((size_t)b * total + t0) * D_MODEL, ys + (size_t)b * k * D_MODEL, k * D_MODEL * sizeof(float));
    }
    char what[160];
    snprintf(what, sizeof what, "%s B=%d: a prompt, steps and a chunk run in the workspace sized for n_new %d",
             name, batch, N_MAX);
    check_true(what, ok);
    snprintf(what, sizeof what, "%s B=%d: the same bits as with exact workspaces", name, batch);
    check_true(what, ok && memcmp(y_one, y_own, n * sizeof(float)) == 0);
    mh_kv_cache_destroy(c1), mh_kv_cache_destroy(c2);
    free(ws), free(x), free(xs), free(ys), free(y_one), free(y_own);
}

static void check_layer(const mh_layer* layer, const char* name, test_rng* r) {
    for (int batch = 1; batch <= 3; batch += 2) {
        sizes_never_drop(layer, name, batch);
        one_workspace_serves_all(layer, name, batch, r);
    }
}

int main(void) {
    mh_context* ctx = test_context(2);
    test_rng r;
    rng_seed(&r, 77);
    mh_moh_config moh = mh_moh_config_default();
    moh.router = MH_MOH_ROUTER_NORM, moh.shared_heads = 2, moh.top_k = 3;
    mh_overlap_config ov = mh_overlap_config_default();
    ov.overlap = 2;
    mh_collab_config co = mh_collab_config_default();
    co.collab_dim = 16;
    const struct {
        const char* name;
        mh_variant v;
        int kv_heads;
        const void* vcfg;
    } cases[] = {{"mha", MH_VARIANT_MHA, 8, NULL},        {"gqa", MH_VARIANT_GQA, 2, NULL},
                 {"mqa", MH_VARIANT_MQA, 1, NULL},        {"overlap", MH_VARIANT_OVERLAP, 0, &ov},
                 {"moh", MH_VARIANT_MOH, 2, &moh},        {"collab", MH_VARIANT_COLLAB, 0, &co}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mh_layer_config c = mh_layer_config_default();
        c.variant = cases[i].v, c.d_model = D_MODEL, c.n_heads = 8, c.n_kv_heads = cases[i].kv_heads;
        c.head_dim = 8, c.bias = 1, c.variant_config = cases[i].vcfg;
        layer_fixture f;
        if (!check_status(cases[i].name, fixture_make(&f, ctx, &c, &r, 0.5f), MH_OK)) continue;
        check_layer(f.layer, cases[i].name, &r);
        fixture_free(&f);
    }
    mh_layer_config c = mh_layer_config_default();
    c.variant = MH_VARIANT_DCMHA, c.d_model = D_MODEL, c.n_heads = 8, c.head_dim = 8, c.bias = 1;
    dcmha_fixture d;
    if (check_status("dcmha", dcmha_fixture_make(&d, ctx, &c, &r, 0.5f, 0.2f, 0), MH_OK)) {
        check_layer(d.layer, "dcmha", &r);
        dcmha_fixture_free(&d);
    }
    mh_context_destroy(ctx);
    return test_exit_code("test_decode_workspace");
}
