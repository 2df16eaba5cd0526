/*
 * tiny_decoder --serve: continuous batching on a paged KV cache.
 *
 * Every layer gets a paged cache of `slots` sequences (blocks of 64 tokens taken from a pool
 * of 7 as sequences grow). Prompts take free slots in order; each step is ONE ragged decode call
 * per layer (mh_decode_args.seq_ids / n_new_seq) that advances every live sequence: a prompt
 * that just joined brings its whole prompt as a chunk (prefill), the others one token each
 * (their previous greedy choice). A sequence that has generated its prompt's number of tokens
 * is reset (its blocks go back to the pool) and the next prompt joins in its slot, in the same
 * calls as the others' single tokens. Each prompt's logits are checked against PyTorch's
 * single-sequence run of that prompt, so batching must not change any sequence's result.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tiny_decoder.h"
#include "example_util.h"

/* Blocks of 64 tokens (a block must hold whole key tiles of the driver: 64 on every ISA up to
 * 512-bit SVE); a pool of 7 blocks: fewer than the 8 that 4 sequences of the longest prompt +
 * generation (93 tokens) would reserve, more than this schedule's peak (6), as sequences finish
 * and return their blocks. */
enum { BLOCK_SIZE = 64, POOL_BLOCKS = 7 };

/* One prompt's progress through the server. */
typedef struct served {
    int slot;          /* its sequence id while it runs, else -1 */
    int done;          /* tokens generated so far */
    int32_t last;      /* the last generated token (the next step's input) */
    int same_tokens;   /* every generated token so far equals PyTorch's */
    int length_ok;     /* its cache length was prompt + generated - 1 when it finished */
    double worst;      /* worst step error relative to max |ref logit| */
} served;

/* Paged caches for every layer; returns the pool size in blocks, or -1. */
static int paged_caches(td_model* m, int slots, int capacity) {
    mh_kv_cache_config kc = mh_kv_cache_config_default();
    kc.max_seqs = slots, kc.capacity = capacity, kc.dtype = MH_DTYPE_F32;
    kc.block_size = BLOCK_SIZE, kc.n_blocks = POOL_BLOCKS;
    for (int l = 0; l < m->cfg.layers; l++) {
        const mh_status st = mh_kv_cache_create_ex(m->layer[l].attn, &kc, &m->layer[l].cache);
        if (st != MH_OK) return printf("FAIL: paged KV cache: %s\n", mh_status_string(st)), -1;
    }
    return mh_kv_cache_free_blocks(m->layer[0].cache);
}

/* Frees slot `s` in every layer's cache; 0 on success. */
static int reset_slot(td_model* m, int s) {
    int bad = 0;
    for (int l = 0; l < m->cfg.layers; l++) bad |= mh_kv_cache_seq_reset(m->layer[l].cache, s) != MH_OK;
    return bad;
}

int td_serve(const char* model_path, const td_reference* refs, int n, int slots) {
    int max_prompt = 0, capacity = 0;
    for (int i = 0; i < n; i++) {
        if (refs[i].n > max_prompt) max_prompt = refs[i].n;
        if (refs[i].n + refs[i].gen > capacity) capacity = refs[i].n + refs[i].gen;
    }
    td_model m;
    const int max_rows = slots * max_prompt;
    if (td_model_load(&m, model_path, slots, max_prompt, max_rows) || m.cfg.vocab != refs[0].vocab) {
        td_model_destroy(&m);
        check(0, "model loaded");
        return failures;
    }
    const int pool = paged_caches(&m, slots, capacity), vocab = m.cfg.vocab;
    served* p = calloc((size_t)n, sizeof *p);
    int* who = malloc(sizeof(int) * (size_t)slots);        /* [slots] prompt in the slot, or -1 */
    int32_t* tokens = malloc(sizeof(int32_t) * (size_t)max_rows);
    int32_t* ids = malloc(sizeof(int32_t) * (size_t)slots), *counts = malloc(sizeof(int32_t) * (size_t)slots);
    int* out_rows = malloc(sizeof(int) * (size_t)slots);
    float* logits = malloc(sizeof(float) * (size_t)slots * (size_t)vocab);
    if (pool < 0 || !p || !who || !tokens || !ids || !counts || !out_rows || !logits) {
        check(0, "paged caches and buffers");
        goto done;
    }
    for (int s = 0; s < slots; s++) who[s] = -1;
    int next = 0, joins = 0, mixed_calls = 0, calls = 0, min_free = pool, finished = 0, reset_bad = 0;
    mh_status st = MH_OK;
    for (;;) {
        /* free slots take the next prompts: the first `slots` start together, later ones join */
        for (int s = 0; s < slots && next < n; s++)
            if (who[s] < 0) {
                joins += next >= slots;
                p[next] = (served){.slot = s, .same_tokens = 1};
                who[s] = next++;
            }
        /* one ragged call: every live sequence, in slot order, its rows packed */
        int b = 0, rows = 0, n_new = 1, prefills = 0;
        for (int s = 0; s < slots; s++) {
            if (who[s] < 0) continue;
            const served* q = &p[who[s]];
            const td_reference* r = &refs[who[s]];
            const int count = q->done == 0 ? r->n : 1;
            memcpy(tokens + rows, q->done == 0 ? r->prompt : &q->last, sizeof(int32_t) * (size_t)count);
            ids[b] = s, counts[b] = count;
            rows += count, out_rows[b++] = rows - 1;
            if (count > n_new) n_new = count;
            prefills += q->done == 0;
        }
        if (b == 0) break;
        const mh_decode_args call = {.batch = b, .n_new = n_new, .seq_ids = ids, .n_new_seq = counts};
        st = td_model_step(&m, &call, tokens, rows, out_rows, b, logits);
        if (st != MH_OK) break;
        calls++;
        mixed_calls += prefills > 0 && prefills < b;
        const int free_blocks = mh_kv_cache_free_blocks(m.layer[0].cache);
        if (free_blocks < min_free) min_free = free_blocks;
        for (int k = 0; k < b; k++) {
            const int s = ids[k], i = who[s];
            served* q = &p[i];
            const td_reference* r = &refs[i];
            q->last = td_check_step(logits + (size_t)k * vocab, r->logits + (size_t)q->done * vocab, vocab, &q->worst);
            q->same_tokens &= q->last == r->tokens[q->done];
            if (++q->done < r->gen) continue;
            int length = -1;
            mh_kv_cache_seq_length(m.layer[0].cache, s, &length);
            q->length_ok = length == r->n + r->gen - 1;
            reset_bad |= reset_slot(&m, s);
            q->slot = -1, who[s] = -1, finished++;
        }
    }
    if (st != MH_OK) printf("      decode: %s\n", mh_status_string(st));

    double worst = 0;
    int same = 1, lengths = 1;
    for (int i = 0; i < n; i++) {
        printf("      prompt %d: %2d bytes, %2d tokens generated, worst error %.3g of max |logit|, tokens %s\n",
               i, refs[i].n, p[i].done, p[i].worst, p[i].same_tokens ? "equal" : "DIFFER");
        if (p[i].worst > worst) worst = p[i].worst;
        same &= p[i].same_tokens && p[i].done == refs[i].gen;
        lengths &= p[i].length_ok;
    }
    printf("      %d ragged decode calls per layer, %d of them mixing a prompt chunk with single tokens; "
           "peak %d of %d blocks of %d tokens in use\n", calls, mixed_calls, pool - min_free, pool, BLOCK_SIZE);
    char what[160];
    snprintf(what, sizeof what, "all %d prompts served to the end, %d of them joining in a freed slot", n, joins);
    check(st == MH_OK && finished == n && joins == (n > slots ? n - slots : 0), what);
    check(st == MH_OK && worst <= TD_TOL,
                       "every prompt's logits equal its single-sequence PyTorch run to 1e-4 x max |logit| at every step");
    check(st == MH_OK && same, "every prompt's greedy tokens equal PyTorch's");
    check(st == MH_OK && (n <= slots || mixed_calls > 0),
                       "continuous batching: a joining prompt's prefill chunk ran in the same call as other sequences' tokens");
    check(st == MH_OK && lengths && !reset_bad && mh_kv_cache_free_blocks(m.layer[0].cache) == pool,
                       "each sequence held prompt + generated - 1 tokens; after the resets the pool is whole again");
done:
    free(p), free(who), free(tokens), free(ids), free(counts), free(out_rows), free(logits);
    td_model_destroy(&m);
    return failures;
}
