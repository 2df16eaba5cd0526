/*
 * The paged KV cache's pool (block_size 64, GQA layer):
 *  - fork: a 100-token prompt forked twice shares its 2 blocks (mh_kv_cache_free_blocks does
 *    not move); the three sequences then diverge (ragged calls, across a block boundary) and
 *    each equals its own forward over prompt + its tokens; exactly the copies copy on write
 *    needs are taken (the shared partial block is copied for all but its last holder), a
 *    contiguous cache's fork (a copy) gives the same bits; reset returns each sequence's
 *    blocks (shared ones when their last holder goes) and a reset id is reused; a fork at a
 *    block boundary copies nothing;
 *  - exhaustion: a call whose new or copied-on-write blocks the pool lacks (or that passes a
 *    sequence's capacity) returns MH_ERR_CACHE_FULL and changes nothing (lengths, free
 *    blocks, out, the other sequences' later results); the same call succeeds once blocks
 *    are freed (its copies counted exactly);
 *  - split-KV: a sequence of 2060 keys (decode split into key chunks) next to a short one:
 *    paged == contiguous bitwise, both equal to the forward, and 1 vs 2 threads bitwise
 *    (natively only: under an emulator the 2-thread run crawls).
 */
#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "layer_fixture.h"
#include "problem.h"
#include "seq_fixture.h"

enum { DM = 32, H = 4, D = 8, BS = 64 };

static double tolerance(int T) { return 8 * FLT_EPSILON * (DM + H * D + T + 64); }

static int seq_len(const mh_kv_cache* c, int seq) {
    int len = -1;
    mh_kv_cache_seq_length(c, seq, &len);
    return len;
}

/* Tokens [t0, t1) of sequence s into `seq` of the cache, n_new at a time, outputs into y. */
static void feed(const mh_layer* L, mh_kv_cache* c, int32_t seq, const seq_set* s, int i, int t0, int t1, float* y) {
    for (int t = t0; t < t1; t += 8) {
        const int32_t n = t1 - t < 8 ? t1 - t : 8;
        check_status("feed", seq_call(L, c, 1, 8, &seq, &n, s->x[i] + (size_t)t * DM, y + (size_t)t * DM), MH_OK);
    }
}

static void check_rows(const char* what, const float* y, const float* ref, int t0, int t1) {
    check_close_f32(what, y + (size_t)t0 * DM, ref + (size_t)t0 * DM, (size_t)(t1 - t0) * DM, tolerance(t1));
}

/* Prompt of P tokens in sequence 0, forked to 1 and 2, then all three continue to T with
 * their own tokens (ragged calls). Sequence i's inputs: s->x[i], whose first P rows are the
 * prompt's. Returns the free blocks after the divergence. */
static int fork_run(const mh_layer* L, mh_kv_cache* c, seq_set* s, int P, float** y) {
    feed(L, c, 0, s, 0, 0, P, y[0]);
    const int before = mh_kv_cache_free_blocks(c);
    check_status("fork 0 -> 1", mh_kv_cache_seq_fork(c, 0, 1), MH_OK);
    check_status("fork 0 -> 2", mh_kv_cache_seq_fork(c, 0, 2), MH_OK);
    check_true("fork shares blocks: free blocks unchanged", mh_kv_cache_free_blocks(c) == before);
    check_true("forked sequences have the prompt's length", seq_len(c, 1) == P && seq_len(c, 2) == P);
    check_status("diverging ragged decode", seq_decode(L, c, s, 5, 3, 21, y), MH_OK);
    return mh_kv_cache_free_blocks(c);
}

static void fork_and_cow(const mh_layer* L, test_rng* r) {
    enum { P = 100, T = 160, NB = 16 };
    const int lens[3] = {T, T, T};
    seq_set s;
    seq_set_make(&s, 3, lens, DM, r);
    for (int i = 1; i < 3; i++) memcpy(s.x[i], s.x[0], sizeof(float) * P * DM); /* the shared prompt */
    float *ref[3], *yp[3], *yc[3];
    seq_outputs(&s, ref), seq_outputs(&s, yp), seq_outputs(&s, yc);
    seq_forward(L, &s, ref);
    mh_kv_cache* c = seq_cache(L, 4, 256, MH_DTYPE_F32, BS, NB);
    check_true("a fresh pool is all free", mh_kv_cache_free_blocks(c) == NB);
    const int free_after = fork_run(L, c, &s, P, yp);
    check_rows("prompt == forward", yp[0], ref[0], 0, P);
    for (int i = 0; i < 3; i++) {
        char what[96];
        snprintf(what, sizeof what, "forked sequence %d after the fork == its own forward", i);
        check_rows(what, yp[i], ref[i], P, T);
    }
    /* blocks: [0, 64) shared by all three; [64, 128) was shared and partial: two copies; each
     * sequence's own [128, 160) */
    check_true("copy on write took exactly 2 copies + 3 new blocks", free_after == NB - 7);

    mh_kv_cache* cc = seq_cache(L, 4, 256, MH_DTYPE_F32, 0, 0);
    fork_run(L, cc, &s, P, yc);
    check_true("contiguous cache: free blocks 0", mh_kv_cache_free_blocks(cc) == 0);
    int same = 1;
    for (int i = 0; i < 3; i++) same &= memcmp(yp[i] + P * DM, yc[i] + P * DM, sizeof(float) * (T - P) * DM) == 0;
    check_true("paged fork == contiguous fork (a copy), bitwise", same);
    mh_kv_cache_destroy(cc);

    check_status("reset 1", mh_kv_cache_seq_reset(c, 1), MH_OK);
    check_true("reset 1 returns its own 2 blocks", mh_kv_cache_free_blocks(c) == NB - 5 && seq_len(c, 1) == 0);
    check_status("reset 0", mh_kv_cache_seq_reset(c, 0), MH_OK);
    check_true("reset 0 returns its own 2 blocks (block 0 still held by 2)", mh_kv_cache_free_blocks(c) == NB - 3);
    /* reuse id 1 for a new sequence: its result is its own forward */
    seq_set fresh;
    const int flen[1] = {90};
    seq_set_make(&fresh, 1, flen, DM, r);
    float *fref[1], *fy[1];
    seq_outputs(&fresh, fref), seq_outputs(&fresh, fy);
    seq_forward(L, &fresh, fref);
    feed(L, c, 1, &fresh, 0, 0, 90, fy[0]);
    check_rows("a reset id reused for a new sequence == its forward", fy[0], fref[0], 0, 90);
    mh_kv_cache_reset(c);
    check_true("reset of the cache returns every block", mh_kv_cache_free_blocks(c) == NB);
    check_true("... and empties every sequence", mh_kv_cache_length(c) == 0 && seq_len(c, 2) == 0);

    /* a fork at a block boundary shares full blocks only: appends take new blocks, no copy */
    feed(L, c, 0, &s, 0, 0, 128, yp[0]);
    check_status("fork at 128", mh_kv_cache_seq_fork(c, 0, 3), MH_OK);
    const int32_t ids[2] = {0, 3}, one[2] = {1, 1};
    float xo[2 * DM], yo[2 * DM];
    memcpy(xo, s.x[0] + 128 * DM, sizeof(float) * DM), memcpy(xo + DM, s.x[0] + 128 * DM, sizeof(float) * DM);
    check_status("append to both", seq_call(L, c, 2, 1, ids, one, xo, yo), MH_OK);
    check_true("appending past a shared full block takes one new block each", mh_kv_cache_free_blocks(c) == NB - 4);
    check_true("same tokens, same output", memcmp(yo, yo + DM, sizeof(float) * DM) == 0);
    check_close_f32("... == the forward at token 128", yo, ref[0] + 128 * DM, DM, tolerance(129));
    mh_kv_cache_destroy(c);
    seq_outputs_free(&fresh, fref), seq_outputs_free(&fresh, fy), seq_set_free(&fresh);
    seq_outputs_free(&s, ref), seq_outputs_free(&s, yp), seq_outputs_free(&s, yc);
    seq_set_free(&s);
}

/* A call that must fail with MH_ERR_CACHE_FULL and change nothing. */
static void expect_full(const char* what, const mh_layer* L, mh_kv_cache* c, int batch, const int32_t* ids,
                        const int32_t* cnt, const float* x) {
    int before[4];
    for (int i = 0; i < 4; i++) before[i] = seq_len(c, i);
    const int free_before = mh_kv_cache_free_blocks(c);
    float out[4 * 4 * DM];
    memset(out, 0x5a, sizeof out);
    check_status(what, seq_call(L, c, batch, 4, ids, cnt, x, out), MH_ERR_CACHE_FULL);
    int same = mh_kv_cache_free_blocks(c) == free_before && all_bytes(out, sizeof out, 0x5a);
    for (int i = 0; i < 4; i++) same &= seq_len(c, i) == before[i];
    check_true(what, same);
}

static void exhaustion(const mh_layer* L, test_rng* r) {
    const int lens[4] = {140, 80, 40, 40};
    seq_set s;
    seq_set_make(&s, 4, lens, DM, r);
    memcpy(s.x[3], s.x[2], sizeof(float) * 30 * DM); /* 3 is a fork of 2 at 30 tokens */
    float *ref[4], *y[4];
    seq_outputs(&s, ref), seq_outputs(&s, y);
    seq_forward(L, &s, ref);
    mh_kv_cache* c = seq_cache(L, 4, 192, MH_DTYPE_F32, BS, 4);
    feed(L, c, 0, &s, 0, 0, 128, y[0]); /* 2 blocks */
    feed(L, c, 1, &s, 1, 0, 64, y[1]);  /* 1 block */
    feed(L, c, 2, &s, 2, 0, 30, y[2]);  /* 1 block */
    check_status("fork 2 -> 3", mh_kv_cache_seq_fork(c, 2, 3), MH_OK);
    check_true("pool empty", mh_kv_cache_free_blocks(c) == 0);
    float x[4 * 4 * DM];
    int32_t ids[2] = {0, 1}, cnt[2] = {1, 1};
    memcpy(x, s.x[0] + 128 * DM, sizeof(float) * DM), memcpy(x + DM, s.x[1] + 64 * DM, sizeof(float) * DM);
    expect_full("two sequences needing new blocks, pool empty: MH_ERR_CACHE_FULL, nothing changes", L, c, 2, ids, cnt, x);
    ids[0] = 2, ids[1] = 3;
    memcpy(x, s.x[2] + 30 * DM, sizeof(float) * DM), memcpy(x + DM, s.x[3] + 30 * DM, sizeof(float) * DM);
    expect_full("both holders of a shared block append (one copy), pool empty: MH_ERR_CACHE_FULL", L, c, 2, ids, cnt, x);
    ids[0] = 0, ids[1] = 2, cnt[0] = 1, cnt[1] = 1;
    memcpy(x, s.x[0] + 128 * DM, sizeof(float) * DM), memcpy(x + DM, s.x[2] + 30 * DM, sizeof(float) * DM);
    expect_full("a sequence that fits next to one that does not: nothing changes", L, c, 2, ids, cnt, x);
    /* free one block: the shared block's two appenders need exactly one copy */
    check_status("reset 1", mh_kv_cache_seq_reset(c, 1), MH_OK);
    check_true("one block free", mh_kv_cache_free_blocks(c) == 1);
    ids[0] = 2, ids[1] = 3;
    memcpy(x, s.x[2] + 30 * DM, sizeof(float) * DM), memcpy(x + DM, s.x[3] + 30 * DM, sizeof(float) * DM);
    float out[2 * DM];
    check_status("the copy-on-write call with one free block", seq_call(L, c, 2, 1, ids, cnt, x, out), MH_OK);
    memcpy(y[2] + 30 * DM, out, sizeof(float) * DM), memcpy(y[3] + 30 * DM, out + DM, sizeof(float) * DM);
    check_true("it took the one block", mh_kv_cache_free_blocks(c) == 0);
    /* the rest: sequence 1 again from the start (needs blocks: free sequence 0's) */
    check_status("reset 0", mh_kv_cache_seq_reset(c, 0), MH_OK);
    seq_set rest = s;
    rest.len[0] = 0, rest.len[1] = 80;
    rest.len[2] = rest.len[3] = 40;
    check_status("the other sequences continue", seq_decode(L, c, &rest, 4, 3, 5, y), MH_OK);
    check_rows("sequence 1 (reused) == its forward", y[1], ref[1], 0, 80);
    check_rows("sequence 2 == its forward", y[2], ref[2], 0, 40);
    check_rows("sequence 3 (forked) == its forward", y[3], ref[3], 30, 40);
    /* capacity: a contiguous cache's sequence cannot pass it */
    mh_kv_cache* cc = seq_cache(L, 2, 130, MH_DTYPE_F32, 0, 0);
    feed(L, cc, 0, &s, 0, 0, 128, y[0]);
    ids[0] = 1, ids[1] = 0, cnt[0] = 1, cnt[1] = 3;
    expect_full("a sequence passing capacity next to one that fits: nothing changes", L, cc, 2, ids, cnt, x);
    mh_kv_cache_destroy(cc);
    mh_kv_cache_destroy(c);
    seq_outputs_free(&s, ref), seq_outputs_free(&s, y);
    seq_set_free(&s);
}

/* Decodes s to `upto` tokens per sequence in chunks, then to the end one token at a time. */
static void long_run(const mh_layer* L, mh_kv_cache* c, seq_set* s, const int* upto, float** y) {
    int full[2] = {s->len[0], s->len[1]};
    s->len[0] = upto[0], s->len[1] = upto[1];
    check_status("chunked prefill", seq_decode(L, c, s, 64, 2, 8, y), MH_OK);
    s->len[0] = full[0], s->len[1] = full[1];
    check_status("single tokens", seq_decode(L, c, s, 1, 2, 9, y), MH_OK);
}

static void split_kv(const mh_context* ctx2, const layer_fixture* f, test_rng* r) {
    const int lens[2] = {2060, 45}, upto[2] = {2050, 40};
    seq_set s;
    seq_set_make(&s, 2, lens, DM, r);
    float *ref[2], *yc[2], *yp[2], *y2[2];
    seq_outputs(&s, ref), seq_outputs(&s, yc), seq_outputs(&s, yp), seq_outputs(&s, y2);
    seq_forward(f->layer, &s, ref);
    mh_layer* L2 = NULL;
    check_status("2-thread layer", fixture_recreate(f, ctx2, &f->cfg, &L2), MH_OK);
    const mh_layer* L1 = f->layer;
    mh_kv_cache* cc = seq_cache(L1, 2, 2100, MH_DTYPE_F32, 0, 0);
    mh_kv_cache* cp = seq_cache(L1, 2, 2100, MH_DTYPE_F32, 128, 0);
    mh_kv_cache* c2 = seq_cache(L2, 2, 2100, MH_DTYPE_F32, 128, 0);
    const int threads2 = !test_emulated();
    if (!threads2) printf("emulator: the 1 vs 2 threads comparison runs natively only\n");
    long_run(L1, cc, &s, upto, yc);
    long_run(L1, cp, &s, upto, yp);
    if (threads2) long_run(L2, c2, &s, upto, y2);
    for (int i = 0; i < 2; i++) {
        check_rows(i ? "short sequence == its forward" : "2060-key sequence (split-KV) == its forward", yc[i], ref[i], 0, lens[i]);
        check_bitwise(i ? "short sequence: paged == contiguous" : "2060-key sequence: paged == contiguous", yp[i], yc[i],
                      (size_t)lens[i] * DM);
        if (threads2)
            check_bitwise(i ? "short sequence: 2 threads == 1" : "2060-key sequence: 2 threads == 1", y2[i], yp[i],
                          (size_t)lens[i] * DM);
    }
    mh_kv_cache_destroy(cc), mh_kv_cache_destroy(cp), mh_kv_cache_destroy(c2);
    mh_layer_destroy(L2);
    seq_outputs_free(&s, ref), seq_outputs_free(&s, yc), seq_outputs_free(&s, yp), seq_outputs_free(&s, y2);
    seq_set_free(&s);
}

int main(void) {
    mh_context* ctx1 = test_context(1);
    mh_context* ctx2 = test_context(2);
    test_rng r;
    rng_seed(&r, 61);
    mh_layer_config c = mh_layer_config_default();
    c.variant = MH_VARIANT_GQA, c.d_model = DM, c.n_heads = H, c.n_kv_heads = 2, c.head_dim = D, c.bias = 1;
    layer_fixture f;
    if (check_status("create", fixture_make(&f, ctx1, &c, &r, 0.5f), MH_OK)) {
        fork_and_cow(f.layer, &r);
        exhaustion(f.layer, &r);
        split_kv(ctx2, &f, &r);
    }
    fixture_free(&f);
    mh_context_destroy(ctx1), mh_context_destroy(ctx2);
    return test_exit_code("test_paged_cache");
}
