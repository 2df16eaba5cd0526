/*
 * A tiny decoder-only transformer end to end in C, checked against PyTorch.
 *
 * gen_tiny_decoder.py (PyTorch) writes a seeded byte-level model (d_model 256, 3 layers,
 * pre-RMSNorm, attention with rotate-half rotary, SwiGLU MLP, final RMSNorm, LM head tied to
 * the embedding) as safetensors, and PyTorch's greedy generations from it. This program loads
 * the weights, builds one mh_layer per layer (the attention variant from the file: GQA, MoH
 * with the norm router, or DCMHA; rotary in the layer, applied before k enters the cache) and
 * generates:
 *
 *   default   prompt 0 alone on a contiguous cache: the prompt prefilled as one chunk
 *             (one mh_layer_decode call per layer), then one token per step, 32 steps;
 *   --serve   continuous batching on a paged cache (tiny_decoder_serve.c): 6 prompts of
 *             different lengths through 4 sequence slots; prompts join as slots free up
 *             (gqa and moh: DCMHA layers have no ragged or paged caches).
 *
 * Checks: at every step the logits equal PyTorch's to TD_TOL (1e-4) times the largest
 * reference logit, and the greedy tokens are PyTorch's. Exit status 0 when every check holds.
 *
 *   tiny_decoder --variant gqa|moh|dcmha [--no-rotary] [--serve] [--dir DIR]
 *
 * reads DIR/tiny_decoder_<variant>[_norope].safetensors and its _ref.safetensors (DIR
 * defaults to the current directory; --no-rotary takes the files gen_tiny_decoder.py
 * --no-rotary writes).
 */
#include "tiny_decoder.h"
#include "example_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_PROMPTS = 16, SERVE_SLOTS = 4 };

int td_check_step(const float* logits, const float* ref, int vocab, double* worst) {
    float diff, mag;
    compare(logits, ref, (size_t)vocab, &diff, &mag);
    int best = 0;
    for (int v = 1; v < vocab; v++)
        if (logits[v] > logits[best]) best = v;
    const double rel = mag > 0 ? (double)diff / mag : INFINITY;
    if (!(rel <= *worst)) *worst = rel;
    return best;
}

/* Prompt 0 alone: prefill as one chunk, then one token per step. */
static void run_single(const char* model_path, const td_reference* r) {
    td_model m;
    const int capacity = r->n + r->gen;
    if (td_model_load(&m, model_path, 1, r->n, r->n) || m.cfg.vocab != r->vocab ||
        td_model_contiguous_caches(&m, 1, capacity)) {
        if (m.layer && m.cfg.vocab != r->vocab) puts("FAIL: the model and the reference differ in vocabulary");
        td_model_destroy(&m);
        check(0, "model and cache");
        return;
    }
    const int vocab = m.cfg.vocab;
    float* logits = malloc(sizeof(float) * (size_t)vocab);
    double worst = 0;
    int steps = 0, same_tokens = logits != NULL;
    mh_status st = logits ? MH_OK : MH_ERR_OUT_OF_MEMORY;
    int32_t next = 0;
    char text[256];
    for (int s = 0; s < r->gen && st == MH_OK && same_tokens; s++) {
        /* step 0 feeds the whole prompt, the others the previous token */
        const int rows = s == 0 ? r->n : 1;
        const mh_decode_args call = {.batch = 1, .n_new = rows};
        const int last = rows - 1;
        st = td_model_step(&m, &call, s == 0 ? r->prompt : &next, rows, &last, 1, logits);
        if (st != MH_OK) break;
        next = td_check_step(logits, r->logits + (size_t)s * vocab, vocab, &worst);
        same_tokens = next == r->tokens[s];
        if (!same_tokens) printf("      step %d: token %d, PyTorch's %d\n", s, (int)next, (int)r->tokens[s]);
        if (s < (int)sizeof text - 1) text[s] = next >= 32 && next < 127 ? (char)next : '.';
        steps++;
    }
    text[steps < (int)sizeof text ? steps : (int)sizeof text - 1] = 0;
    if (st != MH_OK) printf("      decode: %s\n", mh_status_string(st));
    const int length = mh_kv_cache_length(m.layer[0].cache);
    printf("      prompt of %d bytes, %d steps, generated \"%s\" (bytes outside ASCII as '.')\n",
           r->n, steps, text);
    printf("      worst max |logit - PyTorch| / max |PyTorch logit| over the steps: %.3g (tolerance %g)\n",
           worst, TD_TOL);
    char what[160];
    snprintf(what, sizeof what, "%d steps (prefill chunk of %d, then 1 token each) ran; the cache holds %d tokens",
             r->gen, r->n, capacity - 1);
    check(st == MH_OK && steps == r->gen && length == capacity - 1, what);
    check(st == MH_OK && worst <= TD_TOL, "logits equal PyTorch's to 1e-4 x max |logit| at every step");
    check(st == MH_OK && same_tokens && steps == r->gen, "the greedy tokens equal PyTorch's");
    free(logits);
    td_model_destroy(&m);
}

/* The reference file's prompts (prompt.i, tokens.i, logits.i for i = 0, 1, ...). */
static int load_references(const st_file* f, int vocab, td_reference* refs, int cap) {
    int n = 0;
    for (; n < cap; n++) {
        char name[32];
        snprintf(name, sizeof name, "prompt.%d", n);
        if (st_numel(f, name) < 0) break;
        td_reference* r = &refs[n];
        r->n = (int)st_numel(f, name), r->vocab = vocab;
        r->prompt = st_get(f, name, ST_I32, 1, NULL);
        snprintf(name, sizeof name, "tokens.%d", n);
        r->gen = (int)st_numel(f, name);
        r->tokens = st_get(f, name, ST_I32, 1, NULL);
        snprintf(name, sizeof name, "logits.%d", n);
        r->logits = st_get(f, name, ST_F32, 2, (int64_t[]){r->gen, vocab});
        if (!r->prompt || !r->tokens || !r->logits || r->n < 1 || r->gen < 1) return -1;
    }
    return n;
}

static int usage(void) {
    puts("usage: tiny_decoder --variant gqa|moh|dcmha [--no-rotary] [--serve (gqa, moh)] [--dir DIR]");
    return 2;
}

int main(int argc, char** argv) {
    const char *variant = NULL, *dir = ".";
    int rotary = 1, serve = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--variant") && i + 1 < argc) variant = argv[++i];
        else if (!strcmp(argv[i], "--dir") && i + 1 < argc) dir = argv[++i];
        else if (!strcmp(argv[i], "--no-rotary")) rotary = 0;
        else if (!strcmp(argv[i], "--serve")) serve = 1;
        else return usage();
    }
    if (!variant || (strcmp(variant, "gqa") && strcmp(variant, "moh") && strcmp(variant, "dcmha"))) return usage();
    if (serve && !strcmp(variant, "dcmha")) {
        puts("tiny_decoder: --serve needs ragged, paged caches, which DCMHA layers do not have (gqa or moh)");
        return 2;
    }
    char model_path[4096], ref_path[4096];
    snprintf(model_path, sizeof model_path, "%s/tiny_decoder_%s%s.safetensors", dir, variant, rotary ? "" : "_norope");
    snprintf(ref_path, sizeof ref_path, "%s/tiny_decoder_%s%s_ref.safetensors", dir, variant, rotary ? "" : "_norope");

    st_file ref;
    if (st_open(ref_path, &ref)) return 1;
    td_reference refs[MAX_PROMPTS];
    const char* ref_rotary = st_meta_str(&ref, "rotary");
    const int vocab = (int)st_numel(&ref, "logits.0") / (int)(st_numel(&ref, "tokens.0") > 0 ? st_numel(&ref, "tokens.0") : 1);
    const int n = load_references(&ref, vocab, refs, MAX_PROMPTS);
    if (n < 1 || !ref_rotary || strcmp(ref_rotary, rotary ? "half" : "none")) {
        check(0, "the reference file has prompts, with the rotary setting asked for");
    } else if (serve) {
        printf("tiny_decoder --serve, %s: %d prompts through %d sequence slots\n", model_path, n, SERVE_SLOTS);
        failures += td_serve(model_path, refs, n, SERVE_SLOTS);
    } else {
        printf("tiny_decoder, %s: one sequence\n", model_path);
        run_single(model_path, &refs[0]);
    }
    st_close(&ref);
    return failures ? 1 : 0;
}
