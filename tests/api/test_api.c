/*
 * The small public API surface: version macros against the linked library, status strings,
 * ISA names and the compiled/supported queries, context create/destroy, the *_default()
 * helpers, the resolved layer config, packed weight bytes, and KV cache bookkeeping
 * (bytes per token, capacity, length, reset).
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "dispatch/isa_list.h"
#include "problem.h"
#include "rng.h"

/* ------------------------------------------------------------------ version */
static void test_version(void) {
    char want[64];
    check_true("MH_VERSION_NUMBER formula",
               MH_VERSION_NUMBER == MH_VERSION_MAJOR * 10000 + MH_VERSION_MINOR * 100 + MH_VERSION_PATCH);
    check_true("mh_version_number() == MH_VERSION_NUMBER",
               mh_version_number() == (unsigned)MH_VERSION_NUMBER);
    snprintf(want, sizeof want, "%d.%d.%d", MH_VERSION_MAJOR, MH_VERSION_MINOR, MH_VERSION_PATCH);
    const char* got = mh_version_string();
    check_true("mh_version_string() not NULL", got != NULL);
    if (got) {
        if (!check_true("mh_version_string() == MAJOR.MINOR.PATCH", strcmp(got, want) == 0))
            fprintf(stderr, "  got \"%s\", want \"%s\"\n", got, want);
        check_true("mh_version_string() is stable", mh_version_string() == got ||
                                                        strcmp(mh_version_string(), got) == 0);
    }
}

/* ------------------------------------------------------------------ status strings */
static void test_status_strings(void) {
    enum { N_STATUS = MH_ERR_ISA_UNAVAILABLE + 1 };
    const char* s[N_STATUS];
    check_true("status values are stable",
               MH_OK == 0 && MH_ERR_INVALID_ARGUMENT == 1 && MH_ERR_UNSUPPORTED == 2 &&
                   MH_ERR_OUT_OF_MEMORY == 3 && MH_ERR_SIZE_OVERFLOW == 4 &&
                   MH_ERR_WORKSPACE_TOO_SMALL == 5 && MH_ERR_CACHE_FULL == 6 &&
                   MH_ERR_SHAPE_MISMATCH == 7 && MH_ERR_ISA_UNAVAILABLE == 8);
    for (int i = 0; i < N_STATUS; i++) {
        char what[96];
        s[i] = mh_status_string((mh_status)i);
        snprintf(what, sizeof what, "mh_status_string(%d) non-NULL and non-empty", i);
        check_true(what, s[i] != NULL && s[i][0] != '\0');
    }
    int distinct = 1;
    for (int i = 0; i < N_STATUS; i++)
        for (int j = i + 1; j < N_STATUS; j++)
            if (s[i] && s[j] && strcmp(s[i], s[j]) == 0) {
                fprintf(stderr, "  status %d and %d share the string \"%s\"\n", i, j, s[i]);
                distinct = 0;
            }
    check_true("status strings are distinct", distinct);

    const int unknown[] = {N_STATUS, 9, 100, INT_MAX, -1, INT_MIN};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        char what[96];
        const char* u = mh_status_string((mh_status)unknown[i]);
        snprintf(what, sizeof what, "mh_status_string(%d) (unknown) non-NULL and non-empty",
                 unknown[i]);
        check_true(what, u != NULL && u[0] != '\0');
    }
}

/* ------------------------------------------------------------------ ISAs */
static void test_isa_queries(void) {
    /* the names from the ISA registry (src/dispatch/isa_list.h) */
#define ISA_NAME(E, name, ...) [MH_ISA_##E] = #name,
    static const char* const names[MH_ISA_COUNT] = {[MH_ISA_AUTO] = "auto", MH_ISA_LIST(ISA_NAME)};
#undef ISA_NAME
    check_true("MH_ISA_COUNT == 6 and enum values stable",
               MH_ISA_COUNT == 6 && MH_ISA_AUTO == 0 && MH_ISA_SCALAR == 1 && MH_ISA_AVX2 == 2 &&
                   MH_ISA_AVX512 == 3 && MH_ISA_NEON == 4 && MH_ISA_SVE == 5);
    for (int i = 0; i < MH_ISA_COUNT; i++) {
        char what[96];
        const char* n = mh_isa_name((mh_isa)i);
        snprintf(what, sizeof what, "mh_isa_name(%d) == \"%s\"", i, names[i]);
        if (!check_true(what, n != NULL && strcmp(n, names[i]) == 0))
            fprintf(stderr, "  got \"%s\"\n", n ? n : "(null)");
    }
    const int bad[] = {MH_ISA_COUNT, 7, 99, INT_MAX, -1, INT_MIN};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char what[96];
        const char* n = mh_isa_name((mh_isa)bad[i]);
        snprintf(what, sizeof what, "mh_isa_name(%d) == \"unknown\"", bad[i]);
        check_true(what, n != NULL && strcmp(n, "unknown") == 0);
        snprintf(what, sizeof what, "mh_isa_compiled(%d) == 0", bad[i]);
        check_true(what, mh_isa_compiled((mh_isa)bad[i]) == 0);
        snprintf(what, sizeof what, "mh_isa_supported(%d) == 0", bad[i]);
        check_true(what, mh_isa_supported((mh_isa)bad[i]) == 0);
    }

    check_true("scalar is compiled", mh_isa_compiled(MH_ISA_SCALAR) == 1);
    check_true("scalar is supported", mh_isa_supported(MH_ISA_SCALAR) == 1);
    check_true("auto is not a compiled ISA", mh_isa_compiled(MH_ISA_AUTO) == 0);
    check_true("auto is not a supported ISA", mh_isa_supported(MH_ISA_AUTO) == 0);
    for (int i = MH_ISA_SCALAR; i < MH_ISA_COUNT; i++) {
        char what[96];
        const int c = mh_isa_compiled((mh_isa)i), s = mh_isa_supported((mh_isa)i);
        snprintf(what, sizeof what, "%s: compiled/supported are 0 or 1", names[i]);
        check_true(what, (c == 0 || c == 1) && (s == 0 || s == 1));
        snprintf(what, sizeof what, "%s: supported implies compiled", names[i]);
        check_true(what, !s || c);
        printf("  isa %-7s compiled %d supported %d\n", names[i], c, s);
    }
    /* every registry ISA of another architecture is not supported here */
#if defined(__x86_64__) || defined(__i386__)
    const char* const here = "x86_64";
#elif defined(__aarch64__)
    const char* const here = "aarch64";
#else
    const char* const here = "";
#endif
#define OFF_ARCH(E, name, arch, ...) \
    if (strcmp(#arch, "any") != 0 && strcmp(#arch, here) != 0) \
        check_true(#arch " ISA " #name " not supported here", !mh_isa_supported(MH_ISA_##E));
    MH_ISA_LIST(OFF_ARCH)
#undef OFF_ARCH
}

/* ------------------------------------------------------------------ defaults and contexts */
static void test_defaults(void) {
    mh_context_config cc = mh_context_config_default();
    check_true("context config default: num_threads 0, isa auto",
               cc.num_threads == 0 && cc.isa == MH_ISA_AUTO);

    mh_attn_options o = mh_attn_options_default();
    check_true("attn options default: q_offset END", o.q_offset == MH_Q_OFFSET_END);
    check_true("attn options default: everything else zero",
               o.causal == 0 && o.window == 0 && o.kv_len == NULL && o.mask == NULL &&
                   o.mask_stride_batch == 0 && o.mask_stride_head == 0 && o.mask_stride_row == 0 &&
                   o.softcap == 0.0f && o.alibi_slopes == NULL && o.sinks == NULL && o.probs == NULL);

    mh_layer_config lc = mh_layer_config_default();
    check_true("layer config default: MHA, all zero",
               lc.variant == MH_VARIANT_MHA && lc.d_model == 0 && lc.n_heads == 0 &&
                   lc.n_kv_heads == 0 && lc.head_dim == 0 && lc.head_dim_v == 0 && lc.kdim == 0 &&
                   lc.vdim == 0 && lc.bias == 0 && lc.scale == 0.0f && lc.window == 0 &&
                   lc.softcap == 0.0f && lc.alibi_slopes == NULL && lc.sinks == NULL);
}

static void test_contexts(void) {
    mh_context_config cc = mh_context_config_default();
    mh_context* ctx = NULL;
    mh_isa def = MH_ISA_AUTO;
    const mh_status dst = mh_isa_default(&def);
    check_status("mh_isa_default", dst, MH_OK);
    if (dst == MH_OK) {
        check_true("default ISA is a real ISA", def > MH_ISA_AUTO && def < MH_ISA_COUNT);
        check_true("default ISA is supported", mh_isa_supported(def) == 1);
    }

    /* defaults: all processors, the default ISA */
    check_status("create (defaults)", mh_context_create(&cc, &ctx), MH_OK);
    check_true("create (defaults) gives a context", ctx != NULL);
    if (ctx) {
        check_true("num_threads 0 -> all processors (>= 1)", mh_context_num_threads(ctx) >= 1);
        if (dst == MH_OK) check_true("auto context uses mh_isa_default()", mh_context_isa(ctx) == def);
        check_true("auto context ISA supported", mh_isa_supported(mh_context_isa(ctx)) == 1);
        printf("  default context: isa %s, %d threads\n", mh_isa_name(mh_context_isa(ctx)),
               mh_context_num_threads(ctx));
    }
    const int all_procs = ctx ? mh_context_num_threads(ctx) : 0;
    mh_context_destroy(ctx);

    /* explicit thread counts are kept exactly */
    const int counts[] = {1, 3, 2, 17};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        char what[96];
        ctx = NULL;
        cc.num_threads = counts[i];
        snprintf(what, sizeof what, "create (num_threads %d)", counts[i]);
        check_status(what, mh_context_create(&cc, &ctx), MH_OK);
        if (ctx) {
            snprintf(what, sizeof what, "num_threads %d reported", counts[i]);
            check_true(what, mh_context_num_threads(ctx) == counts[i]);
        }
        mh_context_destroy(ctx);
    }

    /* two contexts at once are independent */
    mh_context *a = NULL, *b = NULL;
    cc.num_threads = 0;
    check_status("create a", mh_context_create(&cc, &a), MH_OK);
    cc.num_threads = 3;
    check_status("create b", mh_context_create(&cc, &b), MH_OK);
    if (a && b) {
        check_true("two contexts are distinct objects", a != b);
        check_true("a keeps all processors", mh_context_num_threads(a) == all_procs);
        check_true("b keeps 3", mh_context_num_threads(b) == 3);
    }
    mh_context_destroy(b);
    mh_context_destroy(a);

    /* forced scalar always works */
    cc.num_threads = 1;
    cc.isa = MH_ISA_SCALAR;
    ctx = NULL;
    check_status("create (forced scalar)", mh_context_create(&cc, &ctx), MH_OK);
    if (ctx) check_true("forced scalar context reports scalar", mh_context_isa(ctx) == MH_ISA_SCALAR);
    mh_context_destroy(ctx);

    /* every destroy accepts NULL */
    mh_context_destroy(NULL);
    mh_layer_destroy(NULL);
    mh_kv_cache_destroy(NULL);
    check_true("destroy(NULL) is safe for context, layer and KV cache", 1);
}

/* ------------------------------------------------------------------ layers */
typedef struct weights_buf {
    float *wq, *wk, *wv, *wo, *bq, *bk, *bv, *bo;
    mh_layer_weights w;
} weights_buf;

/* Random weights for a RESOLVED config (n_kv_heads, head_dim_v, kdim, vdim filled). */
static void weights_make(weights_buf* b, test_rng* r, const mh_layer_config* c) {
    const size_t H = (size_t)c->n_heads, Hkv = (size_t)c->n_kv_heads, D = (size_t)c->head_dim;
    const size_t Dv = (size_t)c->head_dim_v, dm = (size_t)c->d_model;
    const size_t nq = H * D * dm, nk = Hkv * D * (size_t)c->kdim, nv = Hkv * Dv * (size_t)c->vdim;
    const size_t no = dm * H * Dv;
    const float a = 0.3f;
    memset(b, 0, sizeof *b);
    b->wq = malloc(nq * sizeof(float)), rng_fill(r, b->wq, nq, -a, a);
    b->wk = malloc(nk * sizeof(float)), rng_fill(r, b->wk, nk, -a, a);
    b->wv = malloc(nv * sizeof(float)), rng_fill(r, b->wv, nv, -a, a);
    b->wo = malloc(no * sizeof(float)), rng_fill(r, b->wo, no, -a, a);
    b->w.w_q = b->wq, b->w.w_k = b->wk, b->w.w_v = b->wv, b->w.w_o = b->wo;
    if (c->bias) {
        b->bq = malloc(H * D * sizeof(float)), rng_fill(r, b->bq, H * D, -a, a);
        b->bk = malloc(Hkv * D * sizeof(float)), rng_fill(r, b->bk, Hkv * D, -a, a);
        b->bv = malloc(Hkv * Dv * sizeof(float)), rng_fill(r, b->bv, Hkv * Dv, -a, a);
        b->bo = malloc(dm * sizeof(float)), rng_fill(r, b->bo, dm, -a, a);
        b->w.b_q = b->bq, b->w.b_k = b->bk, b->w.b_v = b->bv, b->w.b_o = b->bo;
    }
}

static void weights_free(weights_buf* b) {
    free(b->wq), free(b->wk), free(b->wv), free(b->wo);
    free(b->bq), free(b->bk), free(b->bv), free(b->bo);
    memset(b, 0, sizeof *b);
}

/* Unpacked float bytes of the layer's weights (and biases). */
static size_t unpacked_bytes(const mh_layer_config* c) {
    const size_t H = (size_t)c->n_heads, Hkv = (size_t)c->n_kv_heads, D = (size_t)c->head_dim;
    const size_t Dv = (size_t)c->head_dim_v, dm = (size_t)c->d_model;
    size_t n = H * D * dm + Hkv * D * (size_t)c->kdim + Hkv * Dv * (size_t)c->vdim + dm * H * Dv;
    if (c->bias) n += H * D + Hkv * D + Hkv * Dv + dm;
    return n * sizeof(float);
}

typedef struct layer_case {
    const char* name;
    mh_layer_config in;   /* as given */
    mh_layer_config want; /* as resolved (pointers NULL) */
} layer_case;

static int config_equal(const mh_layer_config* a, const mh_layer_config* b) {
    return a->variant == b->variant && a->d_model == b->d_model && a->n_heads == b->n_heads &&
           a->n_kv_heads == b->n_kv_heads && a->head_dim == b->head_dim &&
           a->head_dim_v == b->head_dim_v && a->kdim == b->kdim && a->vdim == b->vdim &&
           a->bias == b->bias && a->scale == b->scale && a->window == b->window &&
           a->softcap == b->softcap && a->alibi_slopes == b->alibi_slopes && a->sinks == b->sinks;
}

static void print_config(const char* tag, const mh_layer_config* c) {
    fprintf(stderr,
            "  %s: variant %d d_model %d H %d Hkv %d D %d Dv %d kdim %d vdim %d bias %d scale %g "
            "window %d softcap %g alibi %p sinks %p\n",
            tag, (int)c->variant, c->d_model, c->n_heads, c->n_kv_heads, c->head_dim,
            c->head_dim_v, c->kdim, c->vdim, c->bias, (double)c->scale, c->window,
            (double)c->softcap, (const void*)c->alibi_slopes, (const void*)c->sinks);
}

static void test_layer_configs(const mh_context* ctx) {
    static const float slopes[8] = {0.5f, 0.25f, 0.125f, 0.0625f, 0.03f, 0.02f, 0.01f, 0.005f};
    static const float sinks[8] = {0.1f, -0.2f, 0.3f, -0.4f, 0.5f, -0.6f, 0.7f, -0.8f};
    enum { N_CASES = 8 };
    layer_case cases[N_CASES];
    memset(cases, 0, sizeof cases);
    for (int i = 0; i < N_CASES; i++) cases[i].in = mh_layer_config_default();

    /* MQA, n_kv_heads 0 -> 1; head_dim_v 0 -> head_dim; kdim/vdim 0 -> d_model */
    cases[0].name = "MQA defaults";
    cases[0].in.variant = MH_VARIANT_MQA;
    cases[0].in.d_model = 16, cases[0].in.n_heads = 4, cases[0].in.head_dim = 4;
    cases[0].want = cases[0].in;
    cases[0].want.n_kv_heads = 1, cases[0].want.head_dim_v = 4;
    cases[0].want.kdim = 16, cases[0].want.vdim = 16;

    /* MHA, n_kv_heads 0 -> n_heads */
    cases[1].name = "MHA defaults";
    cases[1].in.variant = MH_VARIANT_MHA;
    cases[1].in.d_model = 12, cases[1].in.n_heads = 3, cases[1].in.head_dim = 5, cases[1].in.bias = 1;
    cases[1].want = cases[1].in;
    cases[1].want.n_kv_heads = 3, cases[1].want.head_dim_v = 5;
    cases[1].want.kdim = 12, cases[1].want.vdim = 12;

    /* GQA with everything explicit: kept as given */
    cases[2].name = "GQA explicit";
    cases[2].in.variant = MH_VARIANT_GQA;
    cases[2].in.d_model = 16, cases[2].in.n_heads = 6, cases[2].in.n_kv_heads = 2;
    cases[2].in.head_dim = 4, cases[2].in.head_dim_v = 6, cases[2].in.kdim = 12;
    cases[2].in.vdim = 10, cases[2].in.bias = 1, cases[2].in.scale = 0.3f;
    cases[2].want = cases[2].in;

    /* model-level options are kept, pointers are cleared */
    cases[3].name = "MHA with window/softcap/alibi/sinks";
    cases[3].in.variant = MH_VARIANT_MHA;
    cases[3].in.d_model = 8, cases[3].in.n_heads = 4, cases[3].in.n_kv_heads = 4;
    cases[3].in.head_dim = 2, cases[3].in.window = 3, cases[3].in.softcap = 5.0f;
    cases[3].in.alibi_slopes = slopes, cases[3].in.sinks = sinks;
    cases[3].want = cases[3].in;
    cases[3].want.head_dim_v = 2, cases[3].want.kdim = 8, cases[3].want.vdim = 8;
    cases[3].want.alibi_slopes = NULL, cases[3].want.sinks = NULL;

    /* MQA with explicit n_kv_heads 1 and only vdim given */
    cases[4].name = "MQA explicit, vdim only";
    cases[4].in.variant = MH_VARIANT_MQA;
    cases[4].in.d_model = 10, cases[4].in.n_heads = 5, cases[4].in.n_kv_heads = 1;
    cases[4].in.head_dim = 3, cases[4].in.vdim = 7;
    cases[4].want = cases[4].in;
    cases[4].want.head_dim_v = 3, cases[4].want.kdim = 10;

    /* GQA with n_kv_heads == n_heads (degenerates to MHA) and == 1 (to MQA) are valid */
    cases[5].name = "GQA Hkv == H";
    cases[5].in.variant = MH_VARIANT_GQA;
    cases[5].in.d_model = 8, cases[5].in.n_heads = 4, cases[5].in.n_kv_heads = 4, cases[5].in.head_dim = 2;
    cases[5].want = cases[5].in;
    cases[5].want.head_dim_v = 2, cases[5].want.kdim = 8, cases[5].want.vdim = 8;

    cases[6].name = "GQA Hkv == 1";
    cases[6].in.variant = MH_VARIANT_GQA;
    cases[6].in.d_model = 8, cases[6].in.n_heads = 4, cases[6].in.n_kv_heads = 1, cases[6].in.head_dim = 2;
    cases[6].in.bias = 1;
    cases[6].want = cases[6].in;
    cases[6].want.head_dim_v = 2, cases[6].want.kdim = 8, cases[6].want.vdim = 8;

    /* only kdim given: vdim still resolves to d_model (not to kdim) */
    cases[7].name = "GQA kdim only";
    cases[7].in.variant = MH_VARIANT_GQA;
    cases[7].in.d_model = 8, cases[7].in.n_heads = 4, cases[7].in.n_kv_heads = 2, cases[7].in.head_dim = 2;
    cases[7].in.kdim = 5;
    cases[7].want = cases[7].in;
    cases[7].want.head_dim_v = 2, cases[7].want.vdim = 8;

    test_rng r;
    rng_seed(&r, 11);
    for (int i = 0; i < N_CASES; i++) {
        char what[160];
        weights_buf wb;
        weights_make(&wb, &r, &cases[i].want);
        mh_layer* L = NULL;
        snprintf(what, sizeof what, "%s: create", cases[i].name);
        if (!check_status(what, mh_layer_create(ctx, &cases[i].in, &wb.w, &L), MH_OK) || !L) {
            weights_free(&wb);
            continue;
        }
        /* scale 0 resolves to 1/sqrt(head_dim) */
        if (cases[i].want.scale == 0.0f) cases[i].want.scale = 1.0f / sqrtf((float)cases[i].want.head_dim);
        mh_layer_config got;
        memset(&got, 0xA5, sizeof got);
        snprintf(what, sizeof what, "%s: get_config", cases[i].name);
        check_status(what, mh_layer_get_config(L, &got), MH_OK);
        snprintf(what, sizeof what, "%s: resolved config", cases[i].name);
        if (!check_true(what, config_equal(&got, &cases[i].want))) {
            print_config("got ", &got);
            print_config("want", &cases[i].want);
        }
        const size_t wbytes = mh_layer_weights_bytes(L), need = unpacked_bytes(&cases[i].want);
        snprintf(what, sizeof what, "%s: weights_bytes %zu >= unpacked %zu", cases[i].name, wbytes, need);
        check_true(what, wbytes >= need);
        mh_layer_destroy(L);
        weights_free(&wb);
    }

    /* The layer copies config and weights: destroying the context and the caller's buffers
     * after create must not matter. */
    {
        mh_context_config cc = mh_context_config_default();
        cc.num_threads = 2;
        mh_context* c2 = NULL;
        check_status("private context", mh_context_create(&cc, &c2), MH_OK);
        mh_layer_config cfg = cases[2].in;
        weights_buf wb;
        weights_make(&wb, &r, &cases[2].want);
        mh_layer* L = NULL;
        if (c2 && check_status("create on private context", mh_layer_create(c2, &cfg, &wb.w, &L), MH_OK)) {
            mh_context_destroy(c2);
            c2 = NULL;
            memset(&cfg, 0, sizeof cfg);
            weights_free(&wb);
            mh_layer_config got;
            check_status("get_config after ctx destroyed", mh_layer_get_config(L, &got), MH_OK);
            check_true("config survives the context and the caller's copy",
                       config_equal(&got, &cases[2].want));
        } else {
            weights_free(&wb);
        }
        mh_layer_destroy(L);
        mh_context_destroy(c2);
    }
}

/* ------------------------------------------------------------------ KV cache bookkeeping */
static void* ws_alloc(size_t bytes) { return aligned_alloc(64, (bytes + 63) / 64 * 64 + 64); }

static void test_kv_cache(const mh_context* ctx) {
    mh_layer_config cfg = mh_layer_config_default();
    cfg.variant = MH_VARIANT_GQA;
    cfg.d_model = 16, cfg.n_heads = 4, cfg.n_kv_heads = 2, cfg.head_dim = 4, cfg.head_dim_v = 6;
    cfg.bias = 1;
    mh_layer_config res = cfg;
    res.kdim = res.vdim = cfg.d_model;
    test_rng r;
    rng_seed(&r, 23);
    weights_buf wb;
    weights_make(&wb, &r, &res);
    mh_layer* L = NULL;
    if (!check_status("kv: layer create", mh_layer_create(ctx, &cfg, &wb.w, &L), MH_OK) || !L) {
        weights_free(&wb);
        return;
    }
    static const mh_dtype dts[3] = {MH_DTYPE_F32, MH_DTYPE_F16, MH_DTYPE_BF16};
    static const size_t es[3] = {4, 2, 2};
    static const char* const dn[3] = {"f32", "f16", "bf16"};
    const int B = 2, cap = 7, n_new = 3;
    const size_t x_elems = (size_t)B * n_new * (size_t)cfg.d_model;
    float* x = malloc(x_elems * sizeof(float));
    float* out1 = malloc(x_elems * sizeof(float));
    float* out2 = malloc(x_elems * sizeof(float));
    rng_fill(&r, x, x_elems, -1.0f, 1.0f);
    size_t ws_bytes = 0;
    check_status("kv: decode workspace size", mh_layer_decode_workspace_size(L, B, n_new, &ws_bytes), MH_OK);
    void* ws = ws_alloc(ws_bytes);

    for (int d = 0; d < 3; d++) {
        char what[128];
        mh_kv_cache* c = NULL;
        snprintf(what, sizeof what, "kv %s: create", dn[d]);
        if (!check_status(what, mh_kv_cache_create(L, B, cap, dts[d], &c), MH_OK) || !c) continue;
        const size_t want = (size_t)cfg.n_kv_heads * (size_t)(cfg.head_dim + cfg.head_dim_v) * es[d];
        snprintf(what, sizeof what, "kv %s: bytes_per_token %zu == Hkv*(D+Dv)*%zu = %zu", dn[d],
                 mh_kv_cache_bytes_per_token(c), es[d], want);
        check_true(what, mh_kv_cache_bytes_per_token(c) == want);
        snprintf(what, sizeof what, "kv %s: capacity", dn[d]);
        check_true(what, mh_kv_cache_capacity(c) == cap);
        snprintf(what, sizeof what, "kv %s: new cache is empty", dn[d]);
        check_true(what, mh_kv_cache_length(c) == 0);

        snprintf(what, sizeof what, "kv %s: decode 3", dn[d]);
        check_status(what, mh_layer_decode(L, c, &(mh_decode_args){.batch = B, .n_new = n_new, .x = x, .out = out1}, ws, ws_bytes), MH_OK);
        snprintf(what, sizeof what, "kv %s: length 3 after decode", dn[d]);
        check_true(what, mh_kv_cache_length(c) == 3);
        snprintf(what, sizeof what, "kv %s: decode 3 more", dn[d]);
        check_status(what, mh_layer_decode(L, c, &(mh_decode_args){.batch = B, .n_new = n_new, .x = x, .out = out2}, ws, ws_bytes), MH_OK);
        snprintf(what, sizeof what, "kv %s: length 6", dn[d]);
        check_true(what, mh_kv_cache_length(c) == 6);
        snprintf(what, sizeof what, "kv %s: capacity unchanged by decode", dn[d]);
        check_true(what, mh_kv_cache_capacity(c) == cap);

        mh_kv_cache_reset(c);
        snprintf(what, sizeof what, "kv %s: reset -> length 0", dn[d]);
        check_true(what, mh_kv_cache_length(c) == 0);
        snprintf(what, sizeof what, "kv %s: capacity unchanged by reset", dn[d]);
        check_true(what, mh_kv_cache_capacity(c) == cap);
        snprintf(what, sizeof what, "kv %s: bytes_per_token unchanged by reset", dn[d]);
        check_true(what, mh_kv_cache_bytes_per_token(c) == want);
        /* after a reset the cache behaves like a fresh one */
        snprintf(what, sizeof what, "kv %s: decode after reset", dn[d]);
        check_status(what, mh_layer_decode(L, c, &(mh_decode_args){.batch = B, .n_new = n_new, .x = x, .out = out2}, ws, ws_bytes), MH_OK);
        snprintf(what, sizeof what, "kv %s: decode after reset == first decode", dn[d]);
        check_bitwise(what, out2, out1, x_elems);
        snprintf(what, sizeof what, "kv %s: length 3 after reset + decode", dn[d]);
        check_true(what, mh_kv_cache_length(c) == 3);
        mh_kv_cache_destroy(c);
    }

    /* batch 1, capacity 1 is the smallest cache */
    mh_kv_cache* small = NULL;
    check_status("kv: create batch 1 capacity 1", mh_kv_cache_create(L, 1, 1, MH_DTYPE_F32, &small), MH_OK);
    if (small) {
        check_true("kv small: capacity 1", mh_kv_cache_capacity(small) == 1);
        check_true("kv small: length 0", mh_kv_cache_length(small) == 0);
    }
    mh_kv_cache_destroy(small);

    free(ws), free(x), free(out1), free(out2);
    mh_layer_destroy(L);
    weights_free(&wb);
}

int main(void) {
    test_version();
    test_status_strings();
    test_isa_queries();
    test_defaults();
    test_contexts();
    mh_context* ctx = test_context(2);
    test_layer_configs(ctx);
    test_kv_cache(ctx);
    mh_context_destroy(ctx);
    return test_exit_code("test_api");
}
