/*
 * Head-sharded layers (mh_layer_create_shard, docs/scale-out.md) on the forced ISA:
 *  - the sum of the shards' outputs equals the full layer's, forward and decode over several
 *    steps (f32, f16, bf16 and int8 caches), for MHA, GQA, MQA (its K/V head replicated) and
 *    MoH (learned and norm routers, over MHA and GQA bases), 2, 4 and 8 shards where the heads allow,
 *    with biases (b_o on shard 0), ALiBi and sinks (the shard's heads), a window, rotary and
 *    QK-norm; the GQA family's sum also against the double oracle;
 *  - MoH: every shard's routing record equals the full layer's (bitwise);
 *  - mh_layer_get_shard and mh_layer_get_config (the full config) of a shard, its cache's bytes
 *    per token (its K/V heads only);
 *  - bad shard arguments (count, index, divisibility) and variants that mix heads are refused
 *    and write nothing.
 *
 * Tolerance: the full layer and the summed shards are two fp32 evaluations of the same sums
 * (the shards add their W_O partial products in another order, and an MQA shard's attention
 * blocks have fewer rows); each is within test_layer_oracle's bound of the exact result
 * (max_abs 8 eps (d + H Dv + M + 64), rel_l2 2e-6), so they are within twice that of each
 * other: rel_l2 4e-6. The caches store the same projected K/V rows, rounded alike.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "layer_fixture.h"
#include "oracle.h"
#include "problem.h"

#define MAX_SHARDS 8

/* A full layer's weights and config (MoH: router weights and config), its layer and shards. */
typedef struct sharded {
    layer_fixture f;
    mh_layer_config cfg; /* as created (MoH: variant_config -> mcfg) */
    mh_moh_config mcfg;
    mh_moh_weights mw;
    mh_layer_weights w;
    float *wr, *ws, *wh;
    float slopes[16], sinks[16];
    mh_layer* full;
    mh_layer* shard[MAX_SHARDS];
    int count;
} sharded;

typedef struct spec {
    mh_variant variant;
    int H, Hkv, hs, K; /* MoH: shared heads and top_k over a GQA base of Hkv K/V heads */
    int extras;        /* 1 ALiBi + sinks, 2 window, 4 rotary + QK-norm, 8 no bias, 16 MoH norm router */
} spec;

static float* random_or_null(test_rng* r, int use, size_t n) {
    if (!use) return NULL;
    float* m = malloc(sizeof(float) * n);
    rng_fill(r, m, n, -1.0f, 1.0f);
    return m;
}

static int make(sharded* s, const mh_context* ctx, test_rng* r, const spec* sp, int count) {
    memset(s, 0, sizeof *s);
    mh_layer_config c = mh_layer_config_default();
    const int moh = sp->variant == MH_VARIANT_MOH;
    c.variant = moh ? MH_VARIANT_GQA : sp->variant;
    c.d_model = 48, c.n_heads = sp->H, c.n_kv_heads = sp->Hkv, c.head_dim = 8, c.head_dim_v = 6;
    c.bias = !(sp->extras & 8);
    if (sp->extras & 4) {
        c.rotary.layout = MH_ROTARY_HALF, c.qk_norm = 1;
        c.head_dim_v = 8;
    }
    if (!check_status("fixture", fixture_make(&s->f, ctx, &c, r, 0.5f), MH_OK)) return 0;
    s->cfg = s->f.cfg;
    s->w = s->f.w;
    if (sp->extras & 1) {
        for (int h = 0; h < sp->H; h++) s->slopes[h] = 0.3f / (float)(h + 1), s->sinks[h] = rng_uniform(r, -1, 2);
        s->cfg.alibi_slopes = s->slopes, s->cfg.sinks = s->sinks;
    }
    if (sp->extras & 2) s->cfg.window = 7;
    if (moh) {
        const int E = sp->H - sp->hs, d = c.d_model, learned = !(sp->extras & 16);
        s->wr = random_or_null(r, learned && sp->K > 0, (size_t)E * d);
        s->ws = random_or_null(r, learned && sp->hs > 1, (size_t)sp->hs * d);
        s->wh = random_or_null(r, learned && sp->K > 0 && sp->hs > 0, 2 * (size_t)d);
        s->mw = mh_moh_weights_default();
        s->mw.w_router = s->wr, s->mw.w_shared = s->ws, s->mw.w_stage = s->wh;
        s->mcfg = mh_moh_config_default();
        s->mcfg.shared_heads = sp->hs, s->mcfg.top_k = sp->K;
        s->mcfg.router = learned ? MH_MOH_ROUTER_LEARNED : MH_MOH_ROUTER_NORM;
        s->cfg.variant = MH_VARIANT_MOH, s->cfg.variant_config = &s->mcfg;
        s->w.variant_weights = &s->mw;
    }
    s->count = count;
    if (!check_status("full layer", mh_layer_create(ctx, &s->cfg, &s->w, &s->full), MH_OK)) return 0;
    for (int i = 0; i < count; i++)
        if (!check_status("shard", mh_layer_create_shard(ctx, &s->cfg, &s->w, i, count, &s->shard[i]), MH_OK))
            return 0;
    return 1;
}

static void release(sharded* s) {
    mh_layer_destroy(s->full);
    for (int i = 0; i < s->count; i++) mh_layer_destroy(s->shard[i]);
    free(s->wr), free(s->ws), free(s->wh);
    fixture_free(&s->f);
}

/* A routing record for rows tokens (MoH), or all NULL. */
typedef struct record {
    int32_t* heads;
    float* gates;
    int64_t load[16];
    mh_routing_record r;
} record;

static mh_routing_record* record_for(record* rec, const sharded* s, size_t rows) {
    memset(rec, 0, sizeof *rec);
    if (s->cfg.variant != MH_VARIANT_MOH) return NULL;
    const size_t A = (size_t)(s->mcfg.shared_heads + s->mcfg.top_k);
    rec->heads = malloc(sizeof(int32_t) * rows * A);
    rec->gates = malloc(sizeof(float) * rows * A);
    rec->r = (mh_routing_record){rec->heads, rec->gates, rec->load};
    return &rec->r;
}

static void check_records(const char* what, const record* got, const record* want, size_t n) {
    if (!want->heads) return;
    char msg[256];
    snprintf(msg, sizeof msg, "%s: routing record", what);
    check_true(msg, !memcmp(got->heads, want->heads, n * sizeof(int32_t)) &&
                        !memcmp(got->gates, want->gates, n * sizeof(float)) &&
                        !memcmp(got->load, want->load, sizeof want->load));
}

static void free_record(record* rec) { free(rec->heads), free(rec->gates); }

/* sum [n] = the shards' outputs added in shard order. */
static void add_into(float* sum, const float* part, size_t n, int first) {
    for (size_t i = 0; i < n; i++) sum[i] = first ? part[i] : sum[i] + part[i];
}

static void check_sum(const char* what, const float* sum, const float* full, size_t n) {
    const err_stats e = err_f32_f32(sum, full, n);
    char msg[256];
    snprintf(msg, sizeof msg, "%s: shard sum vs full layer, rel_l2 %.3g", what, e.rel_l2);
    check_true(msg, e.rel_l2 <= 4e-6);
}

static void forward_case(sharded* s, test_rng* r, const char* what) {
    const int B = 2, N = 13, d = s->cfg.d_model;
    const size_t n = (size_t)B * N * d, A = (size_t)(s->mcfg.shared_heads + s->mcfg.top_k);
    float* x = malloc(sizeof(float) * n);
    float* full = malloc(sizeof(float) * n);
    float* part = malloc(sizeof(float) * n);
    float* sum = malloc(sizeof(float) * n);
    rng_fill(r, x, n, -1, 1);
    mh_attn_options opt = mh_attn_options_default();
    opt.causal = 1;
    record want, got;
    mh_forward_args a = {.batch = B, .n_q = N, .n_kv = N, .query = x, .out = full, .opt = &opt,
                         .routing = record_for(&want, s, (size_t)B * N)};
    if (!check_status(what, run_forward(s->full, &a), MH_OK)) goto out;
    for (int i = 0; i < s->count; i++) {
        a.out = part, a.routing = record_for(&got, s, (size_t)B * N);
        check_status(what, run_forward(s->shard[i], &a), MH_OK);
        add_into(sum, part, n, i == 0);
        check_records(what, &got, &want, (size_t)B * N * A);
        free_record(&got);
    }
    check_sum(what, sum, full, n);
    if (s->cfg.variant != MH_VARIANT_MOH && !s->cfg.qk_norm) { /* the GQA family: also the double oracle
                                                                  (which has no rotary or QK-norm) */
        mh_layer_config oc = s->f.cfg;
        oc.window = s->cfg.window, oc.alibi_slopes = s->cfg.alibi_slopes, oc.sinks = s->cfg.sinks;
        double* want_o = malloc(sizeof(double) * n);
        a.out = sum, a.routing = NULL;
        oracle_layer_forward(&oc, &s->w, &a, want_o);
        const int hdv = s->cfg.n_heads * s->f.cfg.head_dim_v;
        check_close(what, sum, want_o, n, 8 * FLT_EPSILON * (d + hdv + N + 64), 2e-6);
        free(want_o);
    }
out:
    free_record(&want);
    free(x), free(full), free(part), free(sum);
}

/* Decode in steps of 3, 1, 1, 2 tokens: the shards' caches hold their K/V heads only. */
static void decode_case(sharded* s, test_rng* r, mh_dtype dt, const char* what) {
    const int B = 2, d = s->cfg.d_model, steps[] = {3, 1, 1, 2}, T = 7;
    mh_kv_cache* cf = NULL;
    mh_kv_cache* cs[MAX_SHARDS] = {0};
    if (!check_status(what, mh_kv_cache_create(s->full, B, T, dt, &cf), MH_OK)) return;
    for (int i = 0; i < s->count; i++) {
        check_status(what, mh_kv_cache_create(s->shard[i], B, T, dt, &cs[i]), MH_OK);
        mh_shard_info info;
        mh_layer_get_shard(s->shard[i], &info);
        char msg[256];
        snprintf(msg, sizeof msg, "%s: cache bytes per token", what);
        check_true(msg, mh_kv_cache_bytes_per_token(cs[i]) * (size_t)s->cfg.n_kv_heads ==
                            mh_kv_cache_bytes_per_token(cf) * (size_t)info.n_kv_heads);
    }
    const size_t A = (size_t)(s->mcfg.shared_heads + s->mcfg.top_k);
    float *x = malloc(sizeof(float) * B * 3 * d), *full = malloc(sizeof(float) * B * 3 * d);
    float *part = malloc(sizeof(float) * B * 3 * d), *sum = malloc(sizeof(float) * B * 3 * d);
    for (size_t k = 0; k < sizeof steps / sizeof steps[0]; k++) {
        const int nn = steps[k];
        const size_t n = (size_t)B * nn * d;
        rng_fill(r, x, n, -1, 1);
        record want, got;
        size_t ws_bytes;
        mh_layer_decode_workspace_size(s->full, B, nn, &ws_bytes);
        void* ws = aligned_alloc(64, (ws_bytes + 63) / 64 * 64);
        mh_decode_args a = {.batch = B, .n_new = nn, .x = x, .out = full, .routing = record_for(&want, s, (size_t)B * nn)};
        check_status(what, mh_layer_decode(s->full, cf, &a, ws, ws_bytes), MH_OK);
        free(ws);
        for (int i = 0; i < s->count; i++) {
            mh_layer_decode_workspace_size(s->shard[i], B, nn, &ws_bytes);
            ws = aligned_alloc(64, (ws_bytes + 63) / 64 * 64);
            a.out = part, a.routing = record_for(&got, s, (size_t)B * nn);
            check_status(what, mh_layer_decode(s->shard[i], cs[i], &a, ws, ws_bytes), MH_OK);
            add_into(sum, part, n, i == 0);
            check_records(what, &got, &want, (size_t)B * nn * A);
            free_record(&got);
            free(ws);
        }
        check_sum(what, sum, full, n);
        free_record(&want);
    }
    mh_kv_cache_destroy(cf);
    for (int i = 0; i < s->count; i++) mh_kv_cache_destroy(cs[i]);
    free(x), free(full), free(part), free(sum);
}

static void info_case(const sharded* s, const char* what) {
    for (int i = 0; i < s->count; i++) {
        mh_shard_info info;
        mh_layer_config c;
        check_status(what, mh_layer_get_shard(s->shard[i], &info), MH_OK);
        check_status(what, mh_layer_get_config(s->shard[i], &c), MH_OK);
        const int h = s->cfg.n_heads / s->count, mqa = s->f.cfg.n_kv_heads == 1;
        const int kv = mqa ? 1 : s->f.cfg.n_kv_heads / s->count;
        char msg[256];
        snprintf(msg, sizeof msg, "%s: shard %d info and config", what, i);
        check_true(msg, info.index == i && info.count == s->count && info.head_begin == i * h && info.n_heads == h &&
                            info.kv_head_begin == (mqa ? 0 : i * kv) && info.n_kv_heads == kv &&
                            c.n_heads == s->cfg.n_heads && c.n_kv_heads == s->f.cfg.n_kv_heads &&
                            c.variant == s->cfg.variant);
    }
    mh_shard_info info;
    check_status(what, mh_layer_get_shard(s->full, &info), MH_OK);
    check_true("full layer's shard info", info.index == 0 && info.count == 1 && info.head_begin == 0 &&
                                              info.n_heads == s->cfg.n_heads && info.n_kv_heads == s->f.cfg.n_kv_heads);
}

static void run(const mh_context* ctx, test_rng* r, const spec* sp, int count) {
    char what[160];
    snprintf(what, sizeof what, "variant %d H%d Hkv%d hs%d K%d extras %d count %d", (int)sp->variant, sp->H, sp->Hkv,
             sp->hs, sp->K, sp->extras, count);
    sharded s;
    if (make(&s, ctx, r, sp, count)) {
        info_case(&s, what);
        forward_case(&s, r, what);
        const mh_dtype dts[] = {MH_DTYPE_F32, MH_DTYPE_F16, MH_DTYPE_BF16, MH_DTYPE_I8};
        for (int k = 0; k < 4; k++) decode_case(&s, r, dts[k], what);
    }
    release(&s);
}

/* A refused shard leaves *out alone. */
static void refused(const mh_context* ctx, const mh_layer_config* c, const mh_layer_weights* w, int index, int count,
                    mh_status want, const char* what) {
    mh_layer* out = (mh_layer*)(uintptr_t)0x1234;
    check_status(what, mh_layer_create_shard(ctx, c, w, index, count, &out), want);
    check_true(what, out == (mh_layer*)(uintptr_t)0x1234);
}

static void bad_args(const mh_context* ctx, test_rng* r) {
    layer_fixture f;
    mh_layer_config c = mh_layer_config_default();
    c.variant = MH_VARIANT_GQA, c.d_model = 16, c.n_heads = 8, c.n_kv_heads = 2, c.head_dim = 4;
    if (!check_status("bad args fixture", fixture_make(&f, ctx, &c, r, 0.5f), MH_OK)) return;
    refused(ctx, &f.cfg, &f.w, 0, 0, MH_ERR_INVALID_ARGUMENT, "count 0");
    refused(ctx, &f.cfg, &f.w, -1, 2, MH_ERR_INVALID_ARGUMENT, "index -1");
    refused(ctx, &f.cfg, &f.w, 2, 2, MH_ERR_INVALID_ARGUMENT, "index == count");
    refused(ctx, &f.cfg, &f.w, 0, 3, MH_ERR_INVALID_ARGUMENT, "H % count");
    refused(ctx, &f.cfg, &f.w, 0, 4, MH_ERR_INVALID_ARGUMENT, "Hkv % count");
    refused(NULL, &f.cfg, &f.w, 0, 2, MH_ERR_INVALID_ARGUMENT, "no context");
    /* a layer's forward takes no partial-attention options (mh_attention only) */
    float x[16 * 2], y[16 * 2], lse[8 * 2];
    rng_fill(r, x, 32, -1, 1);
    mh_attn_options opt = mh_attn_options_default();
    opt.lse = lse;
    mh_forward_args a = {.batch = 1, .n_q = 2, .n_kv = 2, .query = x, .out = y, .opt = &opt};
    check_status("forward with lse", run_forward(f.layer, &a), MH_ERR_INVALID_ARGUMENT);
    opt.lse = NULL, opt.kv_offset = 4;
    check_status("forward with kv_offset", run_forward(f.layer, &a), MH_ERR_INVALID_ARGUMENT);
    fixture_free(&f);
    /* variants that mix heads: refused before their own weights are read (DCMHA's generator
     * weights are not made here, so its fixture's own create fails) */
    const mh_variant mixing[] = {MH_VARIANT_OVERLAP, MH_VARIANT_COLLAB, MH_VARIANT_DCMHA};
    mh_collab_config cc = mh_collab_config_default();
    cc.collab_dim = 8;
    for (int k = 0; k < 3; k++) {
        c = mh_layer_config_default();
        c.variant = mixing[k], c.d_model = 16, c.n_heads = 4, c.head_dim = 4;
        if (mixing[k] == MH_VARIANT_COLLAB) c.variant_config = &cc;
        fixture_make(&f, ctx, &c, r, 0.5f);
        refused(ctx, &f.cfg, &f.w, 0, 2, MH_ERR_UNSUPPORTED, "a variant that mixes heads");
        if (mixing[k] == MH_VARIANT_OVERLAP) { /* count 1 is the full layer */
            mh_layer* one = NULL;
            check_status("count 1 of a mixing variant", mh_layer_create_shard(ctx, &f.cfg, &f.w, 0, 1, &one), MH_OK);
            mh_layer_destroy(one);
        }
        fixture_free(&f);
    }
}

int main(void) {
    mh_context* ctx = test_context(2);
    test_rng r;
    rng_seed(&r, 1818);
    const spec specs[] = {
        {MH_VARIANT_MHA, 8, 8, 0, 0, 1},  {MH_VARIANT_GQA, 8, 4, 0, 0, 2}, {MH_VARIANT_GQA, 8, 2, 0, 0, 1 | 8},
        {MH_VARIANT_MQA, 8, 1, 0, 0, 1},  {MH_VARIANT_MHA, 4, 4, 0, 0, 4}, {MH_VARIANT_MOH, 8, 8, 2, 3, 1},
        {MH_VARIANT_MOH, 8, 4, 1, 4, 4},  {MH_VARIANT_MOH, 8, 8, 0, 2, 8},  {MH_VARIANT_MOH, 8, 4, 2, 3, 16 | 1},
        {MH_VARIANT_MOH, 8, 8, 3, 2, 16 | 4},
    };
    for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++)
        for (int count = 2; count <= MAX_SHARDS; count *= 2) {
            const int kv = specs[k].Hkv;
            if (specs[k].H % count || (kv > 1 && kv % count)) continue;
            run(ctx, &r, &specs[k], count);
        }
    bad_args(ctx, &r);
    mh_context_destroy(ctx);
    return test_exit_code("test_shard");
}
