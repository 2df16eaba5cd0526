/*
 * Layers in the bf16 compute mode (mh_layer_config.compute = MH_COMPUTE_BF16), every variant:
 * MHA, GQA, MoH (norm router), overlapping heads and CollabHead (the driver's one-pass stage)
 * and DCMHA (its two-pass stage: the same checks, below). Skipped (exit 77) where the ISA has
 * no bf16 compute.
 *
 * Per variant:
 *  - the projections take x and W rounded to bf16 (their GEMM is checked against the oracle
 *    in test_gemm.c): a layer made from rounded weights, run on rounded inputs, gives the
 *    same bits (biases, CollabHead's mixing and the rest stay f32 in both); it holds its
 *    weights in half the f32 layer's bytes (at most 10% more: the f32 biases and mixing);
 *  - against the f32 layer of those rounded weights on those inputs, whose projections then
 *    take the same operands (exact products; f32 sums in another order), what is left is the
 *    attention's rounding of Q, K, V and P (2^-9 relative each) and of its output before W_O:
 *    about 3e-3 relative, so 1e-4 < rel-L2 < 1e-2 (the lower bound shows that the bf16
 *    kernels ran). The distance from the f32 layer on the unrounded weights is printed: it
 *    adds the projections' rounding (and, for MoH, the heads its router picks differently);
 *  - 1 and 2 threads bitwise equal; cross-attention (GQA) as the first two, its K and V
 *    projections on the key and value inputs;
 *  - every variant decodes token by token through a bf16 cache and an f32 cache (below);
 *    where the f32 cache's tiles are packed (more than two rows per K/V head;
 *    core/driver_bf16.h) their outputs differ only where an exp falls across a bf16
 *    rounding boundary in one order of addition and not the other, which moves that p by
 *    one bf16 ulp (with fewer rows both run the direct kernels: the same bits): a few tokens'
 *    rows (a flip at an early token, whose row has few keys, can move it by 1e-3). So at most
 *    a tenth of the tokens may be more than 1e-5 apart, and rel-L2 <= 1e-3 overall; an
 *    operand left unrounded moves nearly every token (a q or P not rounded: 138 of 140);
 *  - for the GQA family, decode token by token through a cache against the causal forward:
 *    where both round P on the same key-tile grid (the forward's key tile,
 *    mh_core_attention_kv_tile, is the decode's attn_kv_tile) they round the same operands
 *    and agree to rel-L2 <= 1e-5; a forward that packs K/V once on the wider prefill grid
 *    (GQA here: three query tiles) rounds each key's p relative to another running max, which
 *    moves a p by at most 2^-9 and o by about 2^-9 / sqrt(3): rel-L2 <= 2e-3 (as split-KV,
 *    test_bf16_attention.c). A bf16 cache holds the values the packs round the f32 ones to,
 *    and its decode runs them through the f32 direct kernels (exact products, f32 sums in
 *    another order than the bf16 GEMMs'); a paged cache gives the contiguous one's bits.
 *
 * DCMHA (dcmha_fixture, dynamic and static weights in +-0.25): its generator's GEMMs take x
 * and their weights rounded too (W1 | Wd, W2: the same bits from rounded ones), the
 * composition stays f32 and the composed probabilities P' are rounded where P is elsewhere.
 * The composition mixes heads with gains that grow with its weights, and the roundings with
 * them (against the f32 layer on rounded weights and inputs: 4.1e-3 with none, 5.5e-3 at
 * +-0.25, 9.5e-3 at +-0.5, measured on AVX-512; docs/api.md). The same checks as above: the
 * bounds against the f32 layer on rounded weights and inputs, 1 and 2 threads bitwise, half
 * the weight bytes, decode token by token through a bf16 cache (the direct kernels) and an
 * f32 cache (packed, or rounded rows) with the same token count, and decode against the forward, whose
 * two-pass and materialised stages may round P' from exponentials taken relative to other
 * running maxima (key tiles of up to 1024 keys against 64): rel-L2 <= 2e-3, as above.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bf16_gemm_choice.h"
#include "check.h"
#include "core/attention.h"
#include "dcmha_fixture.h"
#include "dispatch/dispatch.h"
#include "layer_fixture.h"
#include "oracle.h"
#include "problem.h"


enum { B = 2, N = 70, D_MODEL = 96 };

/* 1 if the causal forward's attention rounds P on the decode's key-tile grid. */
static int forward_on_decode_grid(const mh_context* ctx, const mh_layer_config* cfg) {
    const mh_kernels* k = mh_dispatch_table(mh_context_isa(ctx));
    const int hkv = cfg->n_kv_heads ? cfg->n_kv_heads : cfg->n_heads;
    const mh_attn_problem p = {.batch = B, .n_q = N, .n_kv = N, .n_heads = cfg->n_heads, .n_kv_heads = hkv,
                               .head_dim_qk = cfg->head_dim, .head_dim_v = cfg->head_dim};
    return mh_core_attention_kv_tile(k, &p, 1) == k->attn_kv_tile;
}

/* Rows of a and b [rows][w] whose relative L2 distance exceeds tol. */
static size_t rows_apart(const float* a, const float* b, size_t rows, size_t w, double tol) {
    size_t n = 0;
    for (size_t r = 0; r < rows; r++) n += err_f32_f32(a + r * w, b + r * w, w).rel_l2 > tol;
    return n;
}

static void forward(const mh_layer* L, const float* x, float* out, const char* what) {
    mh_attn_options opt = mh_attn_options_default();
    opt.causal = 1;
    mh_forward_args a = {.batch = B, .n_q = N, .n_kv = N, .query = x, .out = out, .opt = &opt};
    check_status(what, run_forward(L, &a), MH_OK);
}

/* Decodes x token by token through a cache of dtype (block > 0: paged) into y. */
static void decode_on(const mh_layer* L, mh_dtype dtype, int block, const float* x, float* y, const char* what) {
    mh_kv_cache_config cc = mh_kv_cache_config_default();
    cc.max_seqs = B, cc.capacity = N, cc.dtype = dtype, cc.block_size = block;
    mh_kv_cache* cache = NULL;
    check_status(what, mh_kv_cache_create_ex(L, &cc, &cache), MH_OK);
    decode_in_chunks(L, cache, B, N, D_MODEL, x, y, NULL);
    mh_kv_cache_destroy(cache);
}

/* One variant's inputs x [B][N][d_model] (xr: rounded to bf16) and outputs. */
typedef struct io {
    float *x, *xr, *o16, *other, *o32, *dec;
} io;

static io io_make(test_rng* r) {
    const size_t n = (size_t)B * N * D_MODEL;
    io b = {malloc(n * sizeof(float)), malloc(n * sizeof(float)), malloc(n * sizeof(float)),
            malloc(n * sizeof(float)), malloc(n * sizeof(float)), malloc(n * sizeof(float))};
    rng_fill(r, b.x, n, -1, 1);
    memcpy(b.xr, b.x, n * sizeof(float));
    oracle_round_bf16_all(b.xr, n);
    return b;
}

static void io_free(io* b) { free(b->x), free(b->xr), free(b->o16), free(b->other), free(b->o32), free(b->dec); }

static void run_variant(const mh_context* c1, const mh_context* c2, test_rng* r, mh_layer_config cfg,
                        const char* name, int decode) {
    const size_t n = (size_t)B * N * D_MODEL;
    io b = io_make(r);
    float *x = b.x, *xr = b.xr, *o16 = b.o16, *other = b.other, *o32 = b.o32, *dec = b.dec;
    cfg.compute = MH_COMPUTE_BF16;
    layer_fixture f;
    if (!check_status(name, fixture_make(&f, c1, &cfg, r, 0.5f), MH_OK)) {
        io_free(&b);
        return;
    }
    mh_layer *L2 = NULL, *L32 = NULL, *R16 = NULL, *R32 = NULL;
    mh_layer_config got;
    check_status(name, mh_layer_get_config(f.layer, &got), MH_OK);
    check_true(name, got.compute == MH_COMPUTE_BF16);
    check_status(name, fixture_recreate(&f, c2, &cfg, &L2), MH_OK);
    forward(f.layer, x, o16, name);
    forward(L2, x, other, name);
    check_bitwise(name, other, o16, n);
    cfg.compute = MH_COMPUTE_F32;
    check_status(name, fixture_recreate(&f, c1, &cfg, &L32), MH_OK);
    forward(L32, x, o32, name);
    printf("%-10s bf16 vs f32 layer: rel-L2 %.2e\n", name, err_f32_f32(o16, o32, n).rel_l2);
    /* bf16 panels: half the f32 ones' bytes; biases and mixing stay f32 */
    const size_t w16 = mh_layer_weights_bytes(f.layer), w32 = mh_layer_weights_bytes(L32);
    printf("%-10s weights: %zu bytes in bf16, %zu in f32\n", name, w16, w32);
    check_true(name, 2 * w16 >= w32 && 20 * w16 <= 11 * w32);
    fixture_round_bf16(&f);
    check_status(name, fixture_recreate(&f, c1, &cfg, &R32), MH_OK);
    cfg.compute = MH_COMPUTE_BF16;
    check_status(name, fixture_recreate(&f, c1, &cfg, &R16), MH_OK);
    forward(R16, xr, other, name);
    check_bitwise(name, other, o16, n);
    forward(R32, xr, o32, name);
    const err_stats e = err_f32_f32(o16, o32, n);
    printf("%-10s bf16 vs f32 layer, both on bf16 x and W: rel-L2 %.2e\n", name, e.rel_l2);
    check_true(name, e.rel_l2 > 1e-4 && e.rel_l2 < 1e-2);
    /* every variant: a bf16 cache holds the rounded K/V the packs make of the f32 one: the same
     * operands, summed in another order by the direct kernels where the f32 cache's are packed */
    decode_on(f.layer, MH_DTYPE_F32, 0, x, dec, name);
    decode_on(f.layer, MH_DTYPE_BF16, 0, x, other, name);
    const err_stats bc = err_f32_f32(other, dec, n);
    const size_t moved = rows_apart(other, dec, (size_t)B * N, D_MODEL, 1e-5);
    printf("%-10s bf16 decode, bf16 cache vs f32 cache: rel-L2 %.2e, %zu of %d tokens apart\n", name, bc.rel_l2,
           moved, B * N);
    check_true(name, bc.rel_l2 <= 1e-3 && 10 * moved <= (size_t)B * N);
    if (decode) { /* the GQA family: decode against the forward; paged == contiguous */
        const err_stats d = err_f32_f32(dec, o16, n);
        const int same_grid = forward_on_decode_grid(c1, &cfg);
        printf("%-10s bf16 decode vs forward (%s grid): rel-L2 %.2e\n", name, same_grid ? "same" : "prefill", d.rel_l2);
        check_true(name, d.rel_l2 <= (same_grid ? 1e-5 : 2e-3));
        decode_on(f.layer, MH_DTYPE_F32, 64, x, other, name);
        check_bitwise(name, other, dec, n);
    }
    mh_layer_destroy(L2), mh_layer_destroy(L32), mh_layer_destroy(R16), mh_layer_destroy(R32);
    fixture_free(&f);
    io_free(&b);
}

/* Cross-attention (GQA, kdim and vdim apart from d_model): the K and V projections take the
 * rounded key and value inputs too: same bits from rounded weights and inputs, and within the
 * attention's rounding of the f32 layer on them. */
static void run_cross(const mh_context* ctx, test_rng* r) {
    enum { M = 45, KDIM = 40, VDIM = 56 };
    mh_layer_config cfg = mh_layer_config_default();
    cfg.variant = MH_VARIANT_GQA, cfg.d_model = D_MODEL, cfg.n_heads = 6, cfg.n_kv_heads = 2, cfg.head_dim = 32;
    cfg.kdim = KDIM, cfg.vdim = VDIM, cfg.bias = 1, cfg.compute = MH_COMPUTE_BF16;
    const size_t nq = (size_t)B * N * D_MODEL, nk = (size_t)B * M * KDIM, nv = (size_t)B * M * VDIM;
    float *xq = malloc(nq * sizeof(float)), *xk = malloc(nk * sizeof(float)), *xv = malloc(nv * sizeof(float));
    float *o16 = malloc(nq * sizeof(float)), *other = malloc(nq * sizeof(float)), *o32 = malloc(nq * sizeof(float));
    rng_fill(r, xq, nq, -1, 1), rng_fill(r, xk, nk, -1, 1), rng_fill(r, xv, nv, -1, 1);
    layer_fixture f;
    mh_layer *R16 = NULL, *R32 = NULL;
    if (!check_status("cross", fixture_make(&f, ctx, &cfg, r, 0.5f), MH_OK)) return;
    mh_forward_args a = {.batch = B, .n_q = N, .n_kv = M, .query = xq, .key = xk, .value = xv, .out = o16};
    check_status("cross", run_forward(f.layer, &a), MH_OK);
    fixture_round_bf16(&f);
    oracle_round_bf16_all(xq, nq), oracle_round_bf16_all(xk, nk), oracle_round_bf16_all(xv, nv);
    check_status("cross", fixture_recreate(&f, ctx, &cfg, &R16), MH_OK);
    cfg.compute = MH_COMPUTE_F32;
    check_status("cross", fixture_recreate(&f, ctx, &cfg, &R32), MH_OK);
    a.out = other;
    check_status("cross", run_forward(R16, &a), MH_OK);
    check_bitwise("cross: bf16 layer on rounded weights and inputs", other, o16, nq);
    a.out = o32;
    check_status("cross", run_forward(R32, &a), MH_OK);
    const err_stats e = err_f32_f32(o16, o32, nq);
    printf("%-10s bf16 vs f32 layer, both on bf16 x and W: rel-L2 %.2e\n", "cross", e.rel_l2);
    check_true("cross: within the attention's rounding", e.rel_l2 > 1e-4 && e.rel_l2 < 1e-2);
    mh_layer_destroy(R16), mh_layer_destroy(R32);
    fixture_free(&f);
    free(xq), free(xk), free(xv), free(o16), free(other), free(o32);
}

/* Every GEMM weight of a DCMHA fixture rounded to bf16: the projections and the generator's
 * W1, W2 and Wd (the static W_b composes in f32). */
static void dcmha_round_bf16(dcmha_fixture* f) {
    fixture_round_bf16(&f->base);
    oracle_round_bf16_all(f->w1, f->n_w1), oracle_round_bf16_all(f->w2, f->n_w2), oracle_round_bf16_all(f->wd, f->n_wd);
}

/* f's DCMHA layer in `compute` on ctx. */
static mh_layer* dcmha_layer(dcmha_fixture* f, const mh_context* ctx, mh_compute compute) {
    f->cfg.compute = compute;
    mh_layer* L = f->layer;
    f->layer = NULL;
    if (!check_status("DCMHA create", dcmha_fixture_rebuild(f, ctx), MH_OK)) return L;
    mh_layer* made = f->layer;
    f->layer = L;
    return made;
}

static void run_dcmha(const mh_context* c1, const mh_context* c2, test_rng* r) {
    const char* name = "DCMHA";
    mh_layer_config cfg = mh_layer_config_default();
    mh_dcmha_config dc = mh_dcmha_config_default();
    dc.rank = 2, dc.static_weights = 1;
    cfg.variant = MH_VARIANT_DCMHA, cfg.variant_config = &dc, cfg.d_model = D_MODEL, cfg.n_heads = 4;
    cfg.head_dim = 24, cfg.bias = 1, cfg.compute = MH_COMPUTE_BF16;
    const size_t n = (size_t)B * N * D_MODEL;
    io b = io_make(r);
    float *x = b.x, *xr = b.xr, *o16 = b.o16, *other = b.other, *o32 = b.o32, *dec = b.dec;
    dcmha_fixture f;
    if (!check_status(name, dcmha_fixture_make(&f, c1, &cfg, r, 0.5f, 0.25f, 0), MH_OK)) {
        io_free(&b);
        return;
    }
    mh_layer *L2 = dcmha_layer(&f, c2, MH_COMPUTE_BF16), *L32 = dcmha_layer(&f, c1, MH_COMPUTE_F32);
    forward(f.layer, x, o16, name);
    forward(L2, x, other, name);
    check_bitwise("DCMHA forward, 1 and 2 threads", other, o16, n);
    forward(L32, x, o32, name);
    printf("%-10s bf16 vs f32 layer: rel-L2 %.2e\n", name, err_f32_f32(o16, o32, n).rel_l2);
    const size_t w16 = mh_layer_weights_bytes(f.layer), w32 = mh_layer_weights_bytes(L32);
    printf("%-10s weights: %zu bytes in bf16, %zu in f32\n", name, w16, w32);
    check_true("DCMHA weights in half the bytes", 2 * w16 >= w32 && 20 * w16 <= 11 * w32);
    /* decode: a bf16 cache (direct kernels) against an f32 one (packed), and the forward */
    decode_on(f.layer, MH_DTYPE_F32, 0, x, dec, name);
    decode_on(f.layer, MH_DTYPE_BF16, 0, x, other, name);
    const err_stats bc = err_f32_f32(other, dec, n), d = err_f32_f32(dec, o16, n);
    const size_t moved = rows_apart(other, dec, (size_t)B * N, D_MODEL, 1e-5);
    printf("%-10s bf16 decode, bf16 cache vs f32 cache: rel-L2 %.2e, %zu of %d tokens apart; vs forward %.2e\n", name,
           bc.rel_l2, moved, B * N, d.rel_l2);
    check_true("DCMHA decode, bf16 cache vs f32 cache", bc.rel_l2 <= 1e-3 && 10 * moved <= (size_t)B * N);
    check_true("DCMHA decode vs forward", d.rel_l2 <= 2e-3);
    mh_layer_destroy(L2), mh_layer_destroy(L32);
    /* rounded weights and inputs: the same bits in bf16; the attention's rounding against f32 */
    dcmha_round_bf16(&f);
    mh_layer *R16 = dcmha_layer(&f, c1, MH_COMPUTE_BF16), *R32 = dcmha_layer(&f, c1, MH_COMPUTE_F32);
    forward(R16, xr, other, name);
    check_bitwise("DCMHA bf16 layer on rounded weights and inputs", other, o16, n);
    forward(R32, xr, o32, name);
    const err_stats e = err_f32_f32(o16, o32, n);
    printf("%-10s bf16 vs f32 layer, both on bf16 x and W: rel-L2 %.2e\n", name, e.rel_l2);
    check_true("DCMHA within the attention's rounding", e.rel_l2 > 1e-4 && e.rel_l2 < 1e-2);
    mh_layer_destroy(R16), mh_layer_destroy(R32);
    dcmha_fixture_free(&f);
    io_free(&b);
}

int main(void) {
    if (mh_test_bf16_gemm_skip()) return 77;
    mh_context* c1 = test_context(1);
    mh_context* c2 = test_context(2);
    if (!mh_compute_supported(mh_context_isa(c1), MH_COMPUTE_BF16)) {
        printf("skipped: %s has no bf16 compute on this CPU\n", mh_isa_name(mh_context_isa(c1)));
        mh_context_destroy(c1);
        mh_context_destroy(c2);
        return 77;
    }
    test_rng r;
    rng_seed(&r, 23);
    mh_layer_config c = mh_layer_config_default();
    c.d_model = D_MODEL, c.n_heads = 4, c.head_dim = 24, c.bias = 1;
    run_variant(c1, c2, &r, c, "MHA", 1);
    c.variant = MH_VARIANT_GQA, c.n_heads = 6, c.n_kv_heads = 2, c.head_dim = 32;
    run_variant(c1, c2, &r, c, "GQA", 1);
    run_cross(c1, &r);
    mh_layer_config m = c;
    mh_moh_config moh = mh_moh_config_default();
    moh.router = MH_MOH_ROUTER_NORM, moh.shared_heads = 1, moh.top_k = 3;
    m.variant = MH_VARIANT_MOH, m.variant_config = &moh;
    run_variant(c1, c2, &r, m, "MoH", 0);
    mh_layer_config o = mh_layer_config_default();
    mh_overlap_config ov = mh_overlap_config_default();
    ov.overlap = 4;
    o.variant = MH_VARIANT_OVERLAP, o.variant_config = &ov, o.d_model = D_MODEL, o.n_heads = 4, o.head_dim = 24;
    run_variant(c1, c2, &r, o, "overlap", 0);
    mh_layer_config k = mh_layer_config_default();
    mh_collab_config cc = mh_collab_config_default();
    cc.collab_dim = 48;
    k.variant = MH_VARIANT_COLLAB, k.variant_config = &cc, k.d_model = D_MODEL, k.n_heads = 4, k.head_dim = 24;
    run_variant(c1, c2, &r, k, "CollabHead", 0);
    run_dcmha(c1, c2, &r);
    mh_context_destroy(c1);
    mh_context_destroy(c2);
    return test_exit_code("test_bf16_layers");
}
