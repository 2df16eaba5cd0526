/*
 * Held-out bits per byte of a model trained by bench/accuracy/train.py, through the library's
 * layers, checked against PyTorch's own evaluation of the same model (issue 19).
 *
 *   mh_accuracy_eval --model FILE.safetensors --heldout heldout.bin [--slice W]
 *                    [--expect BPB --expect-slice BPB [--tol T]] [--keys 4096 --prefill 1024]
 *                    [--converted-from MHA.safetensors]
 *
 * heldout.bin holds windows of context + 1 bytes (the context is the model's position table,
 * pos_ctx): each window's first `context` bytes are the input, each byte is scored on the
 * logits of the position before it. Two passes:
 *   prefill  every window through td_model_forward (mh_layer_forward, causal), 8 at a time;
 *   decode   the first W windows (--slice, default 4) token by token through td_model_step
 *            (mh_layer_decode over an f32 KV cache, emptied between windows).
 * --expect / --expect-slice are PyTorch's bits per byte over all windows / the slice (train.py's
 * <name>.json): both passes must agree with them to T relative (default ACC_TOL, the issue's
 * bound; the smoke test's untrained models agree far closer and ask for 1e-6), and the decode pass with
 * the prefill pass over the same windows. Then the attention layers are timed
 * (accuracy_timing.c; --keys 0 skips it). --converted-from: the model is a conversion of that MHA
 * model, untrained since; its weights must be the library's conversion of it
 * (accuracy_convert.c). Prints a check line per property and one line
 * "json: {...}" with the numbers; exit status 0 when every check holds.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accuracy.h"
#include "example_util.h"

#define ACC_TOL 1e-4        /* relative: the bound between C and PyTorch (default --tol) */
#define ACC_PASSES_TOL 1e-5 /* relative: decode against prefill over the same windows */
enum { FORWARD_WINDOWS = 8 };

/* -log2 softmax(logits)[target] over [vocab], accumulated in double. */
static double bits(const float* logits, int vocab, int target) {
    double mx = logits[0], sum = 0;
    for (int v = 1; v < vocab; v++)
        if (logits[v] > mx) mx = logits[v];
    for (int v = 0; v < vocab; v++) sum += exp((double)logits[v] - mx);
    return (log(sum) + mx - logits[target]) / log(2.0);
}

/* Mean bits per byte of windows [n, ctx + 1] by causal forwards, FORWARD_WINDOWS at a time. */
static double prefill_bpb(td_model* m, const int32_t* win, int n, int ctx, float* logits, mh_status* st) {
    double total = 0;
    int32_t* tokens = malloc(sizeof(int32_t) * (size_t)FORWARD_WINDOWS * (size_t)ctx);
    *st = tokens ? MH_OK : MH_ERR_OUT_OF_MEMORY;
    for (int w0 = 0; w0 < n && *st == MH_OK; w0 += FORWARD_WINDOWS) {
        const int b = n - w0 < FORWARD_WINDOWS ? n - w0 : FORWARD_WINDOWS;
        for (int i = 0; i < b; i++)
            memcpy(tokens + (size_t)i * ctx, win + (size_t)(w0 + i) * (ctx + 1), sizeof(int32_t) * (size_t)ctx);
        *st = td_model_forward(m, b, ctx, tokens, logits);
        for (int i = 0; i < b && *st == MH_OK; i++)
            for (int t = 0; t < ctx; t++)
                total += bits(logits + ((size_t)i * ctx + t) * m->cfg.vocab, m->cfg.vocab,
                              win[(size_t)(w0 + i) * (ctx + 1) + t + 1]);
    }
    free(tokens);
    return total / ((double)n * ctx);
}

/* The same over windows [n, ctx + 1], one token per decode step on the model's caches. */
static double decode_bpb(td_model* m, const int32_t* win, int n, int ctx, float* logits, mh_status* st) {
    double total = 0;
    const mh_decode_args one = {.batch = 1, .n_new = 1};
    const int row = 0;
    *st = MH_OK;
    for (int i = 0; i < n && *st == MH_OK; i++) {
        for (int l = 0; l < m->cfg.layers; l++) mh_kv_cache_reset(m->layer[l].cache);
        for (int t = 0; t < ctx && *st == MH_OK; t++) {
            const int32_t* w = win + (size_t)i * (ctx + 1);
            *st = td_model_step(m, &one, w + t, 1, &row, 1, logits);
            if (*st == MH_OK) total += bits(logits, m->cfg.vocab, w[t + 1]);
        }
    }
    return total / ((double)n * ctx);
}

/* The held-out windows: bytes as int32 tokens [*n, ctx + 1]; NULL with a message on error. */
static int32_t* read_windows(const char* path, int ctx, int* n) {
    FILE* f = fopen(path, "rb");
    if (!f) return printf("FAIL: cannot open %s\n", path), NULL;
    fseek(f, 0, SEEK_END);
    const long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    *n = size > 0 ? (int)(size / (ctx + 1)) : 0;
    unsigned char* bytes = malloc(size > 0 ? (size_t)size : 1);
    int32_t* win = malloc(sizeof(int32_t) * (size > 0 ? (size_t)size : 1));
    const int ok = bytes && win && *n > 0 && size % (ctx + 1) == 0 && fread(bytes, 1, (size_t)size, f) == (size_t)size;
    fclose(f);
    for (long i = 0; ok && i < size; i++) win[i] = bytes[i];
    free(bytes);
    if (!ok) printf("FAIL: %s is not whole windows of %d bytes\n", path, ctx + 1), free(win), win = NULL;
    return win;
}

static int usage(void) {
    puts("usage: mh_accuracy_eval --model FILE --heldout FILE [--slice W] [--expect BPB --expect-slice BPB [--tol T]] "
         "[--keys N --prefill N] [--converted-from FILE]");
    return 2;
}

static double rel(double a, double b) { return fabs(a - b) / fabs(b); }

int main(int argc, char** argv) {
    const char *model = NULL, *heldout = NULL, *converted_from = NULL;
    int slice = 4, keys = 4096, prefill = 1024;
    double expect = NAN, expect_slice = NAN, tol = ACC_TOL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--model")) model = argv[i + 1];
        else if (!strcmp(argv[i], "--heldout")) heldout = argv[i + 1];
        else if (!strcmp(argv[i], "--slice")) slice = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--expect")) expect = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--expect-slice")) expect_slice = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--tol")) tol = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--converted-from")) converted_from = argv[i + 1];
        else if (!strcmp(argv[i], "--keys")) keys = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--prefill")) prefill = atoi(argv[i + 1]);
        else return usage();
    }
    if (!model || !heldout || argc % 2 == 0 || slice < 1 || keys < 0 || prefill < 1 || !(tol > 0)) return usage();

    /* the context from the model's metadata, then the model sized for FORWARD_WINDOWS of it */
    st_file probe;
    if (st_open(model, &probe)) return 1;
    int ok = 1;
    const int ctx = st_meta_int(&probe, "pos_ctx", &ok);
    st_close(&probe);
    int n = 0;
    int32_t* win = ok && ctx > 0 ? read_windows(heldout, ctx, &n) : NULL;
    td_model m;
    memset(&m, 0, sizeof m);
    float* logits = NULL;
    if (!win || td_model_load(&m, model, 1, 1, FORWARD_WINDOWS * ctx) ||
        td_model_reserve_forward(&m, FORWARD_WINDOWS, ctx) || td_model_contiguous_caches(&m, 1, ctx) ||
        !(logits = malloc(sizeof(float) * (size_t)FORWARD_WINDOWS * ctx * m.cfg.vocab))) {
        check(0, "model, caches and held-out windows loaded");
        td_model_destroy(&m), free(win);
        return 1;
    }
    if (slice > n) slice = n;
    mh_status st_p, st_s, st_d;
    const double bpb = prefill_bpb(&m, win, n, ctx, logits, &st_p);
    const double bpb_prefill_slice = prefill_bpb(&m, win, slice, ctx, logits, &st_s);
    const double bpb_decode = decode_bpb(&m, win, slice, ctx, logits, &st_d);
    size_t kv_bytes = 0;
    for (int l = 0; l < m.cfg.layers; l++) kv_bytes += mh_kv_cache_bytes_per_token(m.layer[l].cache);
    printf("      %d windows of %d bytes: prefill %.6f bits per byte; first %d windows: prefill %.6f, decode %.6f\n",
           n, ctx, bpb, slice, bpb_prefill_slice, bpb_decode);
    check(st_p == MH_OK && st_s == MH_OK && st_d == MH_OK && isfinite(bpb) && isfinite(bpb_decode),
          "prefill and decode passes ran");
    check(rel(bpb_decode, bpb_prefill_slice) <= ACC_PASSES_TOL,
          "token-by-token decode equals the causal prefill over the same windows to 1e-5 relative");
    if (!isnan(expect) || !isnan(expect_slice)) {
        printf("      PyTorch: %.6f (all), %.6f (slice); relative differences %.2e, %.2e\n", expect, expect_slice,
               rel(bpb, expect), rel(bpb_decode, expect_slice));
        char what[128];
        snprintf(what, sizeof what, "prefill bits per byte equal PyTorch's to %g relative", tol);
        check(rel(bpb, expect) <= tol, what);
        snprintf(what, sizeof what, "decode bits per byte over the slice equal PyTorch's to %g relative", tol);
        check(rel(bpb_decode, expect_slice) <= tol, what);
    }
    if (converted_from)
        check(acc_check_conversion(&m, converted_from),
              "the weights are the library's conversion of the source MHA model (mh_convert_mha_to_gqa / _collab)");
    acc_timing t = {NAN, NAN};
    mh_isa isa = MH_ISA_AUTO;
    mh_isa_default(&isa);
    if (keys > 0) check(!acc_time_layers(&m, keys, prefill, &t), "attention layers timed");
    printf("json: {\"bpb\": %.9g, \"bpb_prefill_slice\": %.9g, \"bpb_decode_slice\": %.9g, \"windows\": %d, "
           "\"slice_windows\": %d, \"kv_bytes_per_token\": %zu, \"decode_keys\": %d, \"decode_us\": %.6g, "
           "\"prefill_tokens\": %d, \"prefill_ms\": %.6g, \"isa\": \"%s\"}\n",
           bpb, bpb_prefill_slice, bpb_decode, n, slice, kv_bytes, keys, keys > 0 ? t.decode_us : 0, prefill,
           keys > 0 ? t.prefill_ms : 0, mh_isa_name(isa));
    free(logits), free(win);
    td_model_destroy(&m);
    return failures ? 1 : 0;
}
