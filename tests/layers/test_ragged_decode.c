/*
 * Ragged batches and paged caches (mh_decode_args.seq_ids / n_new_seq, mh_kv_cache_create_ex):
 *  - a ragged decode (4 sequences of 150, 64, 9 and 128 tokens; every call advances a random
 *    subset of them, in random order, by random counts up to n_new; the others are left
 *    alone) equals each sequence's own causal forward, for MHA, GQA, MQA, overlapping heads,
 *    MoH (learned and norm routers), and a GQA layer with window, soft-cap, ALiBi and sinks;
 *  - a paged cache gives BITWISE the contiguous cache's outputs over the same calls, for f32,
 *    f16 and int8 caches, chunks (n_new 5) and single tokens, blocks of 64 and 128 tokens
 *    (64 and 128 divide some of the lengths, not the others), also where a decode's key tile
 *    is wider than the blocks (many rows per K/V head: MQA's chunks, and 8 heads' tokens);
 *  - the together-advancing shape is unchanged: explicit ids 0..B-1 and counts n give the
 *    defaults' bits on a contiguous and a paged cache, and permuted ids give every sequence
 *    the same bits;
 *  - every ragged call runs in one workspace of mh_layer_decode_workspace_size(4, n_new) and
 *    writes no output row past its packed rows (tests/support/seq_fixture.c).
 * The comparison with the forward uses test_decode's tolerance (they tile differently).
 */
#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "layer_fixture.h"
#include "problem.h"
#include "seq_fixture.h"

enum { S = 4, DM = 32, H = 4, D = 8, CAP = 160 };
static const int g_len[S] = {150, 64, 9, 128};

static double tolerance(const mh_layer_config* c) {
    return 8 * FLT_EPSILON * (c->d_model + c->n_heads * c->head_dim + CAP + 64);
}

/* 1 if every sequence's outputs are bitwise equal. */
static int same_bits(const seq_set* s, float** a, float** b) {
    for (int i = 0; i < s->n_seqs; i++)
        if (memcmp(a[i], b[i], sizeof(float) * (size_t)s->len[i] * DM) != 0) return 0;
    return 1;
}

/* The ragged decode of s on a cache of this storage (fresh), into y. */
static void decode_on(const mh_layer* L, const seq_set* s, mh_dtype dt, int block, int n_new, uint64_t seed,
                      float** y) {
    mh_kv_cache* cache = seq_cache(L, S, CAP, dt, block, 0);
    check_status("ragged decode", seq_decode(L, cache, s, n_new, S, seed, y), MH_OK);
    for (int i = 0; i < s->n_seqs; i++) {
        int len = -1;
        mh_kv_cache_seq_length(cache, i, &len);
        check_true("every sequence decoded to its end", len == s->len[i]);
    }
    check_true("cache length = the longest sequence", mh_kv_cache_length(cache) == 150);
    mh_kv_cache_destroy(cache);
}

static void ragged_case(const char* name, const mh_layer* L, const mh_layer_config* c, int paged, test_rng* r) {
    char what[200];
    seq_set s;
    seq_set_make(&s, S, g_len, DM, r);
    float *ref[S], *yc[S], *yp[S];
    seq_outputs(&s, ref), seq_outputs(&s, yc), seq_outputs(&s, yp);
    seq_forward(L, &s, ref);
    static const int n_news[2] = {5, 1};
    for (int k = 0; k < 2; k++) {
        const int n_new = n_news[k];
        decode_on(L, &s, MH_DTYPE_F32, 0, n_new, 100 + (uint64_t)k, yc);
        for (int i = 0; i < S; i++) {
            snprintf(what, sizeof what, "%s: ragged decode (n_new %d) of sequence %d == its forward", name, n_new, i);
            check_close_f32(what, yc[i], ref[i], (size_t)g_len[i] * DM, tolerance(c));
        }
        for (int block = 64; paged && block <= 128; block += 64) {
            decode_on(L, &s, MH_DTYPE_F32, block, n_new, 100 + (uint64_t)k, yp);
            snprintf(what, sizeof what, "%s: paged f32 (block %d, n_new %d) == contiguous, bitwise", name, block, n_new);
            check_true(what, same_bits(&s, yp, yc));
        }
    }
    static const mh_dtype low[2] = {MH_DTYPE_F16, MH_DTYPE_I8};
    for (int k = 0; k < 2 && paged; k++) {
        decode_on(L, &s, low[k], 0, 5, 7, yc);
        decode_on(L, &s, low[k], 64, 5, 7, yp);
        snprintf(what, sizeof what, "%s: paged %s (block 64) == contiguous, bitwise", name, k ? "int8" : "f16");
        check_true(what, same_bits(&s, yp, yc));
    }
    seq_outputs_free(&s, ref), seq_outputs_free(&s, yc), seq_outputs_free(&s, yp);
    seq_set_free(&s);
}

static mh_layer_config base_config(mh_variant v, int n_kv) {
    mh_layer_config c = mh_layer_config_default();
    c.variant = v, c.d_model = DM, c.n_heads = H, c.n_kv_heads = n_kv, c.head_dim = D, c.bias = 1;
    return c;
}

static void plain_variants(const mh_context* ctx, test_rng* r) {
    /* MQA of 8 heads of 4 dims: 8 rows per K/V head, on the direct kernels in runs of a wider
     * tile for single tokens (the runs and the tile's pieces cross blocks of 64 and 128) */
    static const struct {
        const char* name;
        mh_variant v;
        int n_kv, heads;
    } cases[] = {{"MHA", MH_VARIANT_MHA, 0, H}, {"GQA", MH_VARIANT_GQA, 2, H}, {"MQA", MH_VARIANT_MQA, 0, H},
                 {"MQA 8 heads", MH_VARIANT_MQA, 0, 2 * H}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mh_layer_config c = base_config(cases[i].v, cases[i].n_kv);
        c.n_heads = cases[i].heads, c.head_dim = DM / cases[i].heads;
        layer_fixture f;
        if (!check_status("create", fixture_make(&f, ctx, &c, r, 0.5f), MH_OK)) continue;
        ragged_case(cases[i].name, f.layer, &f.cfg, 1, r);
        fixture_free(&f);
    }
    const mh_overlap_config oc = {MH_VARIANT_OVERLAP, 2};
    mh_layer_config c = base_config(MH_VARIANT_OVERLAP, 0);
    c.variant_config = &oc;
    layer_fixture f;
    if (check_status("create overlap", fixture_make(&f, ctx, &c, r, 0.5f), MH_OK)) ragged_case("overlap o=2", f.layer, &f.cfg, 1, r);
    fixture_free(&f);
    /* layer options: a sliding window (contiguous only), soft-cap, ALiBi, sinks */
    float slopes[H], sinks[H];
    for (int h = 0; h < H; h++) slopes[h] = 0.25f / (float)(h + 1), sinks[h] = 0.5f * (float)h;
    c = base_config(MH_VARIANT_GQA, 2);
    c.window = 7, c.softcap = 5.0f, c.alibi_slopes = slopes, c.sinks = sinks;
    if (check_status("create windowed", fixture_make(&f, ctx, &c, r, 0.5f), MH_OK))
        ragged_case("GQA window/softcap/ALiBi/sinks", f.layer, &f.cfg, 0, r);
    fixture_free(&f);
    /* rotary + QK-norm: each sequence's new tokens rotate at their own cache positions */
    c = base_config(MH_VARIANT_GQA, 2);
    c.rotary = (mh_rotary_config){.layout = MH_ROTARY_HALF}, c.qk_norm = 1;
    if (check_status("create rotary", fixture_make(&f, ctx, &c, r, 0.5f), MH_OK))
        ragged_case("GQA rotary + QK-norm", f.layer, &f.cfg, 1, r);
    fixture_free(&f);
}

static void moh_variants(const mh_context* ctx, test_rng* r) {
    mh_layer_config c = base_config(MH_VARIANT_GQA, 2);
    layer_fixture f;
    if (!check_status("create", fixture_make(&f, ctx, &c, r, 0.5f), MH_OK)) return;
    float* router = malloc(sizeof(float) * (H + 2) * DM); /* W_r, W_s, W_h rows */
    rng_fill(r, router, (size_t)(H + 2) * DM, -0.5f, 0.5f);
    for (int norm = 0; norm < 2; norm++) {
        const mh_moh_config mc = norm ? (mh_moh_config){MH_VARIANT_MOH, MH_MOH_ROUTER_NORM, 1, 2}
                                      : (mh_moh_config){MH_VARIANT_MOH, MH_MOH_ROUTER_LEARNED, 2, 1};
        mh_layer_config m = f.cfg;
        m.variant = MH_VARIANT_MOH, m.variant_config = &mc;
        mh_layer_weights w = f.w;
        const mh_moh_weights rw = {MH_VARIANT_MOH, router, router, router};
        if (!norm) w.variant_weights = &rw;
        mh_layer* L = NULL;
        if (!check_status("create MoH", mh_layer_create(ctx, &m, &w, &L), MH_OK)) continue;
        ragged_case(norm ? "MoH norm router" : "MoH learned router", L, &f.cfg, 1, r);
        mh_layer_destroy(L);
    }
    free(router);
    fixture_free(&f);
}

/* Three sequences advancing together in chunks, through the defaults and through explicit
 * ids and counts (contiguous, paged, and with the ids permuted): the same bits. */
static void together_unchanged(const mh_context* ctx, test_rng* r) {
    enum { B = 3, T = 70 };
    static const int chunks[] = {11, 1, 5, 1, 1, 64};
    mh_layer_config c = base_config(MH_VARIANT_GQA, 2);
    layer_fixture f;
    if (!check_status("create", fixture_make(&f, ctx, &c, r, 0.5f), MH_OK)) return;
    const size_t n = (size_t)B * T * DM;
    float *x = malloc(sizeof(float) * n), *y0 = malloc(sizeof(float) * n), *y1 = malloc(sizeof(float) * n);
    float *xc = malloc(sizeof(float) * n), *yc = malloc(sizeof(float) * n);
    rng_fill(r, x, n, -1, 1);
    mh_kv_cache* cache = seq_cache(f.layer, B, T, MH_DTYPE_F32, 0, 0);
    decode_in_chunks(f.layer, cache, B, T, DM, x, y0, chunks);
    mh_kv_cache_destroy(cache);
    static const int32_t ids[3][B] = {{0, 1, 2}, {0, 1, 2}, {2, 0, 1}};
    static const char* const names[3] = {"explicit ids and counts, contiguous", "explicit ids and counts, paged",
                                         "permuted ids, paged"};
    for (int k = 0; k < 3; k++) {
        cache = seq_cache(f.layer, B, T, MH_DTYPE_F32, k ? 64 : 0, 0);
        for (int ci = 0, t = 0; t < T; ci++) {
            const int m = chunks[ci] < T - t ? chunks[ci] : T - t;
            const int32_t cnt[B] = {m, m, m};
            for (int b = 0; b < B; b++)
                memcpy(xc + (size_t)b * m * DM, x + ((size_t)ids[k][b] * T + t) * DM, sizeof(float) * m * DM);
            check_status("decode step", seq_call(f.layer, cache, B, m, ids[k], cnt, xc, yc), MH_OK);
            for (int b = 0; b < B; b++)
                memcpy(y1 + ((size_t)ids[k][b] * T + t) * DM, yc + (size_t)b * m * DM, sizeof(float) * m * DM);
            t += m;
        }
        char what[160];
        snprintf(what, sizeof what, "together-advancing decode: %s == the defaults, bitwise", names[k]);
        check_bitwise(what, y1, y0, n);
        mh_kv_cache_destroy(cache);
    }
    free(x), free(y0), free(y1), free(xc), free(yc);
    fixture_free(&f);
}

int main(void) {
    mh_context* ctx = test_context(2);
    test_rng r;
    rng_seed(&r, 16);
    plain_variants(ctx, &r);
    moh_variants(ctx, &r);
    together_unchanged(ctx, &r);
    mh_context_destroy(ctx);
    return test_exit_code("test_ragged_decode");
}
