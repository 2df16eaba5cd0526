/*
 * NaN propagation, every ISA (issue 14 item 17):
 *  - a NaN in one kept score of a row (through Q or K) makes that row's output and
 *    probabilities NaN; every other row is finite and matches the oracle;
 *  - a row whose scores are all NaN gives NaN (never "no key kept" zeros) at every key count
 *    1..70 and at multiples of 8 and 16, whatever the vector width;
 *  - a NaN in the V of a key that causality drops for a row adds nothing to that row: the
 *    rows before the NaN token are bitwise those of the same call with that V zeroed (so a
 *    chunk of queries gives each row what a call for that row alone would); the same for a
 *    key a sliding window drops (decode's two rows, prefill's many);
 *  - through a layer (MHA and DCMHA, whose two-pass P.V has its own key bounds), causal,
 *    a NaN input token leaves every earlier output bit-identical and its own output NaN;
 *  - split-KV decode: a NaN chunk after empty (all -inf) ones gives NaN;
 *  - a fully masked row still gives zeros.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "dcmha_fixture.h"
#include "oracle.h"
#include "problem.h"

static mh_context* ctx;

static int all_nan(const float* x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isnan(x[i])) return 0;
    return 1;
}

/* Row i (of N, H heads, D wide, token-major) of got is NaN exactly when nan_row(i, h); the
 * others match want. */
static void check_rows(const char* what, const float* got, const double* want, int N, int H, int D,
                       int (*nan_row)(int i, int h, int arg), int arg) {
    int ok = 1;
    for (int i = 0; i < N; i++)
        for (int h = 0; h < H; h++) {
            const size_t at = ((size_t)i * H + h) * D;
            if (nan_row(i, h, arg)) {
                ok &= all_nan(got + at, (size_t)D);
                continue;
            }
            const err_stats e = err_f32_f64(got + at, want + at, (size_t)D);
            ok &= isfinite(e.max_abs) && e.max_abs <= 1e-5;
        }
    char msg[160];
    snprintf(msg, sizeof msg, "%s: NaN rows exactly where expected, the others match the oracle", what);
    check_true(msg, ok);
}

static int row_is(int i, int h, int arg) { return h == 0 && i == arg; }

/* One NaN in Q (row 3, head 0), then one NaN in K (key 5, causal: rows from 5 on). */
static void one_nan_score(test_rng* r) {
    const int N = 12, M = 12, H = 2, D = 8;
    test_problem t;
    problem_make(&t, r, 1, N, M, H, H, D, D, MH_DTYPE_F32, LAYOUT_TOKEN_MAJOR, 1.0f);
    const size_t n = (size_t)N * H * D;
    double* want = malloc(n * sizeof(double));
    float* got = malloc(n * sizeof(float));
    float* probs = malloc(sizeof(float) * H * N * M);
    mh_attn_options opt = mh_attn_options_default();
    opt.probs = probs;
    t.q[(3 * H + 0) * D + 2] = NAN;
    check_status("nan q: run", run_attention(ctx, &t.p, &opt), MH_OK);
    oracle_attention(&t.p, &opt, want, NULL);
    problem_gather_o(&t, got);
    check_rows("nan in q", got, want, N, H, D, row_is, 3);
    check_true("nan in q: that row's probabilities are NaN", all_nan(probs + 3 * (size_t)M, (size_t)M));
    t.q[(3 * H + 0) * D + 2] = 0.5f;
    ((float*)t.k)[(5 * H + 1) * D + 0] = NAN; /* key 5 of head 1 */
    opt.causal = 1;
    check_status("nan k: run", run_attention(ctx, &t.p, &opt), MH_OK);
    oracle_attention(&t.p, &opt, want, NULL);
    problem_gather_o(&t, got);
    int ok = 1;
    for (int i = 0; i < N; i++) {
        const float* o1 = got + ((size_t)i * H + 1) * D;
        const err_stats e = err_f32_f64(got + (size_t)i * H * D, want + (size_t)i * H * D, (size_t)D);
        ok &= isfinite(e.max_abs) && e.max_abs <= 1e-5; /* head 0 untouched */
        ok &= i >= 5 ? all_nan(o1, (size_t)D) : err_f32_f64(o1, want + ((size_t)i * H + 1) * D, (size_t)D).max_abs <= 1e-5;
    }
    check_true("nan in k (causal): head 1 rows from key 5 on NaN, the rest match the oracle", ok);
    free(want), free(got), free(probs);
    problem_free(&t);
}

/* Query row 0 all NaN, row 1 valid, for M keys. */
static void all_nan_row(test_rng* r, int M) {
    const int N = 2, D = 8;
    test_problem t;
    problem_make(&t, r, 1, N, M, 1, 1, D, D, MH_DTYPE_F32, LAYOUT_TOKEN_MAJOR, 1.0f);
    for (int d = 0; d < D; d++) t.q[d] = NAN;
    double want[16];
    float* probs = malloc(sizeof(float) * N * (size_t)M);
    mh_attn_options opt = mh_attn_options_default();
    opt.probs = probs;
    check_status("all nan: run", run_attention(ctx, &t.p, &opt), MH_OK);
    oracle_attention(&t.p, &opt, want, NULL);
    char what[64];
    snprintf(what, sizeof what, "all-NaN row, M = %d", M);
    check_rows(what, t.o, want, N, 1, D, row_is, 0);
    snprintf(what, sizeof what, "all-NaN row, M = %d: probabilities NaN", M);
    check_true(what, all_nan(probs, (size_t)M));
    free(probs);
    problem_free(&t);
}

/* V of key j, head h (D values of dt, or only column col >= 0) in t: zeros (bad = 0), or NaN
 * and inf in turn (a NaN in f16/bf16). */
static void set_v_row(test_problem* t, int j, int h, int D, int col, mh_dtype dt, int bad) {
    const size_t es = dt == MH_DTYPE_F32 ? 4 : 2;
    unsigned char* row = (unsigned char*)t->v + (j * t->p.v.stride_token + h * t->p.v.stride_head) * (ptrdiff_t)es;
    for (int d = col < 0 ? 0 : col; d < (col < 0 ? D : col + 1); d++) {
        if (dt == MH_DTYPE_F32) ((float*)(void*)row)[d] = !bad ? 0.0f : d % 2 ? NAN : INFINITY;
        else ((uint16_t*)(void*)row)[d] = !bad ? 0 : dt == MH_DTYPE_F16 ? 0x7e00u : 0x7fc0u;
    }
}

/* Causal, N queries at the last N of M positions, V of the last key NaN: the rows that drop
 * that key are bitwise those with that V zeroed; the last row is NaN. */
static void nan_v_of_dropped_key(test_rng* r, int N, int M, mh_dtype dt) {
    const int H = 2, Hkv = 1, D = 20;
    test_problem t;
    problem_make(&t, r, 1, N, M, H, Hkv, D, D, dt, LAYOUT_TOKEN_MAJOR, 1.0f);
    const size_t n = (size_t)N * H * D;
    float *zeroed = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float));
    mh_attn_options opt = mh_attn_options_default();
    opt.causal = 1;
    set_v_row(&t, M - 1, 0, D, -1, dt, 0);
    check_status("nan v: run (zeroed)", run_attention(ctx, &t.p, &opt), MH_OK);
    problem_gather_o(&t, zeroed);
    set_v_row(&t, M - 1, 0, D, -1, dt, 1);
    check_status("nan v: run", run_attention(ctx, &t.p, &opt), MH_OK);
    problem_gather_o(&t, got);
    const size_t before = (size_t)(N - 1) * H * D;
    char what[96];
    snprintf(what, sizeof what, "NaN/inf V of a dropped key (N %d, M %d, dtype %d): earlier rows unchanged", N, M,
             (int)dt);
    check_bitwise(what, got, zeroed, before);
    snprintf(what, sizeof what, "NaN V (N %d, M %d): the row that keeps it is NaN", N, M);
    int last_nan = 1;
    for (size_t i = before; i < n; i++) last_nan &= !isfinite(got[i]);
    check_true(what, last_nan);
    free(zeroed), free(got);
    problem_free(&t);
}

/* Causal with a sliding window of W keys, N queries at the last N of M positions, H heads of
 * D dims on their own K/V (layout: head-major runs decode's direct kernels with P.V one tile
 * late for N <= 2, core/driver.c attend_pipelined; token-major N > 2 the GEMMs): V of key j
 * NaN/inf (in column col only when col >= 0: with D past a GEMM panel, in a later panel than
 * the first, which the check of a packed tile must still see). The rows that keep key j
 * (j <= p < j + W) are NaN there; every other row, whose causal bound or window drops it, is
 * bitwise that of the call with that V zeroed. */
static void nan_v_window(test_rng* r, int N, int M, int W, int j, int D, int col, mh_dtype dt, test_layout layout) {
    const int H = 2;
    test_problem t;
    problem_make(&t, r, 1, N, M, H, H, D, D, dt, layout, 1.0f);
    const size_t n = (size_t)N * H * D;
    float *zeroed = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float));
    mh_attn_options opt = mh_attn_options_default();
    opt.causal = 1;
    opt.window = W;
    for (int pass = 0; pass < 2; pass++) {
        for (int h = 0; h < H; h++) set_v_row(&t, j, h, D, col, dt, pass);
        check_status("window nan v: run", run_attention(ctx, &t.p, &opt), MH_OK);
        problem_gather_o(&t, pass == 0 ? zeroed : got);
    }
    int ok = 1;
    for (int i = 0; i < N; i++) {
        const int p = M - N + i, keeps = j <= p && p - j < W;
        const float *g = got + (size_t)i * H * D, *z = zeroed + (size_t)i * H * D;
        for (size_t e = 0; e < (size_t)H * D; e++)
            ok &= !keeps                          ? memcmp(&g[e], &z[e], sizeof(float)) == 0
                  : col < 0 || (int)(e % (size_t)D) == col ? !isfinite(g[e])
                                                           : 1;
    }
    char what[192];
    snprintf(what, sizeof what,
             "NaN/inf V of key %d col %d, window %d (N %d, M %d, D %d, dtype %d, layout %d): NaN exactly in the rows keeping it",
             j, col, W, N, M, D, (int)dt, (int)layout);
    check_true(what, ok);
    free(zeroed), free(got);
    problem_free(&t);
}

/* One long decode row (split-KV over the keys): the first half masked to -inf (empty chunks),
 * the second half's K NaN: the merge must keep the NaN; without NaN the row matches the
 * oracle (an empty chunk poisons nothing). */
static void split_kv_nan(test_rng* r) {
    const int M = 16384, D = 8;
    test_problem t;
    problem_make(&t, r, 1, 1, M, 1, 1, D, D, MH_DTYPE_F32, LAYOUT_TOKEN_MAJOR, 1.0f);
    float* mask = calloc((size_t)M, sizeof(float));
    for (int j = 0; j < M / 2; j++) mask[j] = -INFINITY;
    mh_attn_options opt = mh_attn_options_default();
    opt.mask = mask, opt.mask_stride_row = M;
    double want[8];
    check_status("split: run", run_attention(ctx, &t.p, &opt), MH_OK);
    oracle_attention(&t.p, &opt, want, NULL);
    check_close("split: empty chunks poison nothing", t.o, want, (size_t)D, 1e-5, 1e-5);
    for (int j = M / 2; j < M; j++) ((float*)t.k)[(size_t)j * D] = NAN;
    check_status("split: run (NaN keys)", run_attention(ctx, &t.p, &opt), MH_OK);
    check_true("split: a NaN chunk after empty ones gives NaN", all_nan(t.o, (size_t)D));
    free(mask);
    problem_free(&t);
}

static void fully_masked_still_zero(test_rng* r) {
    const int N = 3, M = 17, D = 8;
    test_problem t;
    problem_make(&t, r, 1, N, M, 1, 1, D, D, MH_DTYPE_F32, LAYOUT_TOKEN_MAJOR, 1.0f);
    int32_t kv_len = 0;
    mh_attn_options opt = mh_attn_options_default();
    opt.kv_len = &kv_len;
    check_status("kv_len 0: run", run_attention(ctx, &t.p, &opt), MH_OK);
    check_true("kv_len 0: zeros, not NaN", all_bytes(t.o, (size_t)N * D * sizeof(float), 0));
    problem_free(&t);
}

/* Causal forward of N tokens of layer L, then again with the last token NaN. */
static void layer_nan_token(const mh_layer* L, const char* name, int d_model, int N, test_rng* r) {
    const size_t n = (size_t)N * d_model;
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float)), *y2 = malloc(n * sizeof(float));
    rng_fill(r, x, n, -1, 1);
    mh_attn_options opt = mh_attn_options_default();
    opt.causal = 1;
    mh_forward_args a = {.batch = 1, .n_q = N, .query = x, .out = y, .opt = &opt};
    check_status("layer: forward", run_forward(L, &a), MH_OK);
    for (int i = 0; i < d_model; i++) x[n - d_model + i] = NAN;
    a.out = y2;
    check_status("layer: forward (NaN token)", run_forward(L, &a), MH_OK);
    char what[96];
    snprintf(what, sizeof what, "%s N %d: a NaN last token leaves earlier outputs bit-identical", name, N);
    check_bitwise(what, y2, y, n - d_model);
    snprintf(what, sizeof what, "%s N %d: the NaN token's output is NaN", name, N);
    check_true(what, all_nan(y2 + n - d_model, (size_t)d_model));
    free(x), free(y), free(y2);
}

static void layers(test_rng* r) {
    mh_layer_config c = mh_layer_config_default();
    mh_dcmha_config dc = mh_dcmha_config_default();
    c.variant = MH_VARIANT_DCMHA, c.d_model = 20, c.n_heads = 4, c.head_dim = 6, c.variant_config = &dc;
    dcmha_fixture f;
    if (!check_status("dcmha: create", dcmha_fixture_make(&f, ctx, &c, r, 0.5f, 0.8f, 0), MH_OK)) return;
    const int ns[] = {2, 5, 9, 40, 300};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        layer_nan_token(f.layer, "DCMHA", c.d_model, ns[i], r);
        layer_nan_token(f.base.layer, "MHA", c.d_model, ns[i], r);
    }
    dcmha_fixture_free(&f);
}

int main(void) {
    ctx = test_context(2);
    test_rng r;
    rng_seed(&r, 17);
    one_nan_score(&r);
    for (int M = 1; M <= 70; M++) all_nan_row(&r, M);
    for (int M = 72; M <= 256; M += 8) all_nan_row(&r, M);
    const int ns[] = {2, 3, 5, 7, 8, 9, 16, 40, 70};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        nan_v_of_dropped_key(&r, ns[i], ns[i], MH_DTYPE_F32);
        nan_v_of_dropped_key(&r, ns[i], ns[i] + 5, MH_DTYPE_F32);
        nan_v_of_dropped_key(&r, ns[i], ns[i] + 5, MH_DTYPE_F16);
        nan_v_of_dropped_key(&r, ns[i], ns[i] + 300, MH_DTYPE_BF16);
    }
    /* decode's two rows: the key the second row's window just drops, inside a tile and at a
     * tile's start (64-key tiles), in a tile before the last; prefill's rows through the GEMMs */
    for (int dt = MH_DTYPE_F32; dt <= MH_DTYPE_F16; dt++) {
        nan_v_window(&r, 2, 300, 100, 199, 20, -1, (mh_dtype)dt, LAYOUT_HEAD_MAJOR);
        nan_v_window(&r, 2, 300, 107, 192, 20, -1, (mh_dtype)dt, LAYOUT_HEAD_MAJOR);
        nan_v_window(&r, 70, 300, 20, 250, 20, -1, (mh_dtype)dt, LAYOUT_TOKEN_MAJOR);
        nan_v_window(&r, 200, 200, 37, 101, 20, -1, (mh_dtype)dt, LAYOUT_TOKEN_MAJOR);
        /* past x86's first 512-key prefill tile, and at the third's first key */
        nan_v_window(&r, 300, 1100, 64, 820, 20, -1, (mh_dtype)dt, LAYOUT_TOKEN_MAJOR);
        nan_v_window(&r, 300, 1100, 40, 1024, 20, -1, (mh_dtype)dt, LAYOUT_TOKEN_MAJOR);
        /* the bad value in the last of 259 columns only: a later panel of the packed V tile */
        nan_v_window(&r, 200, 200, 37, 101, 259, 258, (mh_dtype)dt, LAYOUT_TOKEN_MAJOR);
    }
    layers(&r);
    split_kv_nan(&r);
    fully_masked_still_zero(&r);
    mh_context_destroy(ctx);
    return test_exit_code("test_nan");
}
