/*
 * Bad input to ragged batches and paged caches returns a status and writes nothing:
 *  - decode: an unknown sequence id (-1, max_seqs), a repeated id, a count of 0, -1 or above
 *    n_new, more sequences than the cache holds: the status, and out, workspace, every
 *    sequence's length and the free blocks untouched;
 *  - mh_kv_cache_seq_length / seq_reset / seq_fork with unknown ids, fork into a non-empty
 *    sequence or onto itself: MH_ERR_INVALID_ARGUMENT, nothing changes;
 *  - mh_kv_cache_create_ex: NULL config, max_seqs or capacity <= 0, block_size < 0 or not a
 *    multiple of the key tile (32, 100), n_blocks < 0 or given for a contiguous cache, an
 *    unknown dtype: MH_ERR_INVALID_ARGUMENT; a paged cache for a sliding-window layer, a
 *    CollabHead or a DCMHA layer: MH_ERR_UNSUPPORTED; *out untouched;
 *  - CollabHead and DCMHA decode sequences advancing together (ids 0 .. B-1, also fewer than
 *    the cache holds) and refuse ragged calls (counts or lengths that differ, other ids) with
 *    MH_ERR_UNSUPPORTED.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "dcmha_fixture.h"
#include "layer_fixture.h"
#include "problem.h"
#include "seq_fixture.h"

enum { DM = 16, H = 4, D = 4, NS = 3, NEW = 2, POISON = 0x5a };

typedef struct env {
    const mh_layer* L;
    mh_kv_cache* c;
    float x[NS * 4 * DM], out[NS * 4 * DM];
    unsigned char* ws;
    size_t ws_bytes;
} env;

static int len_of(const mh_kv_cache* c, int seq) {
    int len = -1;
    mh_kv_cache_seq_length(c, seq, &len);
    return len;
}

/* A decode that must fail with `want` and touch nothing. */
static void expect(env* e, const char* what, int batch, const int32_t* ids, const int32_t* cnt, mh_status want) {
    int before[NS];
    for (int i = 0; i < NS; i++) before[i] = len_of(e->c, i);
    const int free_before = mh_kv_cache_free_blocks(e->c);
    memset(e->out, POISON, sizeof e->out);
    memset(e->ws, POISON, e->ws_bytes);
    const mh_decode_args a = {.batch = batch, .n_new = NEW, .x = e->x, .out = e->out, .seq_ids = ids, .n_new_seq = cnt};
    check_status(what, mh_layer_decode(e->L, e->c, &a, e->ws, e->ws_bytes), want);
    int same = mh_kv_cache_free_blocks(e->c) == free_before;
    for (int i = 0; i < NS; i++) same &= len_of(e->c, i) == before[i];
    char msg[200];
    snprintf(msg, sizeof msg, "%s: lengths, free blocks, out and workspace untouched", what);
    check_true(msg, same && all_bytes(e->out, sizeof e->out, POISON) && all_bytes(e->ws, e->ws_bytes, POISON));
}

static void bad_decodes(env* e) {
    static const int32_t two[2] = {2, 2}, ones[NS + 1] = {1, 1, 1, 1};
    expect(e, "unknown id -1", 2, (const int32_t[]){0, -1}, two, MH_ERR_INVALID_ARGUMENT);
    expect(e, "unknown id max_seqs", 2, (const int32_t[]){NS, 0}, two, MH_ERR_INVALID_ARGUMENT);
    expect(e, "repeated id", 3, (const int32_t[]){1, 0, 1}, ones, MH_ERR_INVALID_ARGUMENT);
    expect(e, "count 0", 2, (const int32_t[]){0, 1}, (const int32_t[]){1, 0}, MH_ERR_INVALID_ARGUMENT);
    expect(e, "count -1", 2, (const int32_t[]){0, 1}, (const int32_t[]){-1, 1}, MH_ERR_INVALID_ARGUMENT);
    expect(e, "count above n_new", 2, (const int32_t[]){0, 1}, (const int32_t[]){1, NEW + 1}, MH_ERR_INVALID_ARGUMENT);
    expect(e, "more sequences than the cache holds", NS + 1, NULL, NULL, MH_ERR_SHAPE_MISMATCH);
    expect(e, "more sequences than the cache holds (ids given)", NS + 1, (const int32_t[]){0, 1, 2, 0}, ones,
           MH_ERR_SHAPE_MISMATCH);
    /* the marks of a refused call do not leak into the next one */
    memset(e->ws, 0, e->ws_bytes);
    const mh_decode_args ok = {.batch = 2, .n_new = NEW, .x = e->x, .out = e->out, .seq_ids = (const int32_t[]){1, 0}, .n_new_seq = two};
    check_status("a good call after refused ones", mh_layer_decode(e->L, e->c, &ok, e->ws, e->ws_bytes), MH_OK);
    check_true("... advances only its sequences", len_of(e->c, 0) == 2 && len_of(e->c, 1) == 2 && len_of(e->c, 2) == 0);
}

static void bad_seq_calls(env* e) {
    mh_kv_cache* c = e->c;
    int len = 7;
    check_status("seq_length -1", mh_kv_cache_seq_length(c, -1, &len), MH_ERR_INVALID_ARGUMENT);
    check_status("seq_length max_seqs", mh_kv_cache_seq_length(c, NS, &len), MH_ERR_INVALID_ARGUMENT);
    check_status("seq_length NULL", mh_kv_cache_seq_length(c, 0, NULL), MH_ERR_INVALID_ARGUMENT);
    check_status("seq_length NULL cache", mh_kv_cache_seq_length(NULL, 0, &len), MH_ERR_INVALID_ARGUMENT);
    check_true("... len untouched", len == 7);
    const int free_before = mh_kv_cache_free_blocks(c), l0 = len_of(c, 0), l1 = len_of(c, 1);
    check_status("seq_reset -1", mh_kv_cache_seq_reset(c, -1), MH_ERR_INVALID_ARGUMENT);
    check_status("seq_reset max_seqs", mh_kv_cache_seq_reset(c, NS), MH_ERR_INVALID_ARGUMENT);
    check_status("seq_reset NULL", mh_kv_cache_seq_reset(NULL, 0), MH_ERR_INVALID_ARGUMENT);
    check_status("fork into a non-empty sequence", mh_kv_cache_seq_fork(c, 0, 1), MH_ERR_INVALID_ARGUMENT);
    check_status("fork onto itself", mh_kv_cache_seq_fork(c, 2, 2), MH_ERR_INVALID_ARGUMENT);
    check_status("fork from an unknown id", mh_kv_cache_seq_fork(c, NS, 2), MH_ERR_INVALID_ARGUMENT);
    check_status("fork to an unknown id", mh_kv_cache_seq_fork(c, 0, -1), MH_ERR_INVALID_ARGUMENT);
    check_status("fork NULL cache", mh_kv_cache_seq_fork(NULL, 0, 2), MH_ERR_INVALID_ARGUMENT);
    check_true("nothing changed", mh_kv_cache_free_blocks(c) == free_before && len_of(c, 0) == l0 && len_of(c, 1) == l1 &&
                                      len_of(c, 2) == 0);
    check_true("free_blocks of NULL is 0", mh_kv_cache_free_blocks(NULL) == 0);
}

static void expect_create(const char* what, const mh_layer* L, const mh_kv_cache_config* cfg, mh_status want) {
    mh_kv_cache* c = (mh_kv_cache*)&c; /* a sentinel: must stay as it is */
    mh_kv_cache* const before = c;
    check_status(what, mh_kv_cache_create_ex(L, cfg, &c), want);
    check_true(what, c == before);
}

static void bad_configs(const mh_layer* L, const mh_layer* windowed, const mh_layer* collab, const mh_layer* dcmha) {
    mh_kv_cache_config ok = mh_kv_cache_config_default();
    check_true("default: max_seqs 1, contiguous", ok.max_seqs == 1 && ok.block_size == 0 && ok.n_blocks == 0);
    ok.capacity = 128, ok.block_size = 64;
    expect_create("NULL config", L, NULL, MH_ERR_INVALID_ARGUMENT);
    check_status("NULL out", mh_kv_cache_create_ex(L, &ok, NULL), MH_ERR_INVALID_ARGUMENT);
    static const struct {
        const char* what;
        int max_seqs, capacity, block_size, n_blocks, dtype;
        mh_status want;
    } cases[] = {{"max_seqs 0", 0, 128, 64, 0, MH_DTYPE_F32, MH_ERR_INVALID_ARGUMENT},
                 {"capacity 0", 2, 0, 64, 0, MH_DTYPE_F32, MH_ERR_INVALID_ARGUMENT},
                 {"block_size -1", 2, 128, -1, 0, MH_DTYPE_F32, MH_ERR_INVALID_ARGUMENT},
                 {"block_size 32 (not a multiple of the key tile)", 2, 128, 32, 0, MH_DTYPE_F32, MH_ERR_INVALID_ARGUMENT},
                 {"block_size 100 (not a multiple of the key tile)", 2, 128, 100, 0, MH_DTYPE_F32, MH_ERR_INVALID_ARGUMENT},
                 {"n_blocks -1", 2, 128, 64, -1, MH_DTYPE_F32, MH_ERR_INVALID_ARGUMENT},
                 {"n_blocks for a contiguous cache", 2, 128, 0, 4, MH_DTYPE_F32, MH_ERR_INVALID_ARGUMENT},
                 {"unknown dtype", 2, 128, 64, 0, 99, MH_ERR_INVALID_ARGUMENT}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mh_kv_cache_config c = {cases[i].max_seqs, cases[i].capacity, (mh_dtype)cases[i].dtype, cases[i].block_size,
                                cases[i].n_blocks};
        expect_create(cases[i].what, L, &c, cases[i].want);
    }
    expect_create("paged cache of a sliding-window layer", windowed, &ok, MH_ERR_UNSUPPORTED);
    expect_create("paged cache of a CollabHead layer", collab, &ok, MH_ERR_UNSUPPORTED);
    expect_create("paged cache of a DCMHA layer", dcmha, &ok, MH_ERR_UNSUPPORTED);
    mh_kv_cache* c = NULL;
    check_status("a good paged config", mh_kv_cache_create_ex(L, &ok, &c), MH_OK);
    check_true("default n_blocks = max_seqs * ceil(capacity / block_size)", mh_kv_cache_free_blocks(c) == 2);
    mh_kv_cache_destroy(c);
}

/* CollabHead / DCMHA: together-advancing calls work, ragged ones are refused. */
static void together_only(const char* name, const mh_layer* L) {
    char what[160];
    env e = {.L = L};
    mh_layer_decode_workspace_size(L, NS, NEW, &e.ws_bytes);
    e.ws = aligned_alloc(64, (e.ws_bytes + 63) / 64 * 64);
    for (size_t i = 0; i < sizeof e.x / sizeof e.x[0]; i++) e.x[i] = 0.01f * (float)(i % 17);
    check_status("contiguous cache", mh_kv_cache_create(L, NS, 16, MH_DTYPE_F32, &e.c), MH_OK);
    static const int32_t two[NS] = {2, 2, 2}, mixed[NS] = {2, 1, 2};
    snprintf(what, sizeof what, "%s: counts that differ", name);
    expect(&e, what, NS, NULL, mixed, MH_ERR_UNSUPPORTED);
    snprintf(what, sizeof what, "%s: ids not 0 .. B-1", name);
    expect(&e, what, 2, (const int32_t[]){1, 0}, two, MH_ERR_UNSUPPORTED);
    const mh_decode_args one = {.batch = 1, .n_new = NEW, .x = e.x, .out = e.out};
    snprintf(what, sizeof what, "%s: sequence 0 alone (advancing together with itself)", name);
    check_status(what, mh_layer_decode(L, e.c, &one, e.ws, e.ws_bytes), MH_OK);
    snprintf(what, sizeof what, "%s: sequences of different lengths", name);
    expect(&e, what, 2, NULL, NULL, MH_ERR_UNSUPPORTED);
    mh_kv_cache_reset(e.c);
    const mh_decode_args all = {.batch = NS, .n_new = NEW, .x = e.x, .out = e.out, .seq_ids = (const int32_t[]){0, 1, 2}, .n_new_seq = two};
    snprintf(what, sizeof what, "%s: explicit ids 0 .. B-1 and equal counts", name);
    check_status(what, mh_layer_decode(L, e.c, &all, e.ws, e.ws_bytes), MH_OK);
    mh_kv_cache_destroy(e.c);
    free(e.ws);
}

int main(void) {
    mh_context* ctx = test_context(1);
    test_rng r;
    rng_seed(&r, 5);
    mh_layer_config c = mh_layer_config_default();
    c.variant = MH_VARIANT_GQA, c.d_model = DM, c.n_heads = H, c.n_kv_heads = 2, c.head_dim = D, c.bias = 1;
    layer_fixture f, fw, fc;
    dcmha_fixture fd;
    check_status("gqa", fixture_make(&f, ctx, &c, &r, 0.5f), MH_OK);
    c.window = 4;
    check_status("windowed", fixture_make(&fw, ctx, &c, &r, 0.5f), MH_OK);
    static const mh_collab_config cc = {MH_VARIANT_COLLAB, 8};
    mh_layer_config ccfg = mh_layer_config_default();
    ccfg.variant = MH_VARIANT_COLLAB, ccfg.d_model = DM, ccfg.n_heads = H, ccfg.head_dim = D, ccfg.variant_config = &cc;
    check_status("collab", fixture_make(&fc, ctx, &ccfg, &r, 0.5f), MH_OK);
    mh_layer_config dcfg = mh_layer_config_default();
    dcfg.variant = MH_VARIANT_DCMHA, dcfg.d_model = DM, dcfg.n_heads = H, dcfg.head_dim = D;
    check_status("dcmha", dcmha_fixture_make(&fd, ctx, &dcfg, &r, 0.5f, 0.5f, 0), MH_OK);

    env e = {.L = f.layer};
    e.c = seq_cache(f.layer, NS, 128, MH_DTYPE_F32, 64, 4);
    mh_layer_decode_workspace_size(f.layer, NS + 1, NEW, &e.ws_bytes);
    e.ws = aligned_alloc(64, (e.ws_bytes + 63) / 64 * 64);
    for (size_t i = 0; i < sizeof e.x / sizeof e.x[0]; i++) e.x[i] = 0.01f * (float)(i % 17);
    bad_decodes(&e);
    bad_seq_calls(&e);
    mh_kv_cache_destroy(e.c);
    free(e.ws);
    bad_configs(f.layer, fw.layer, fc.layer, fd.layer);
    together_only("CollabHead", fc.layer);
    together_only("DCMHA", fd.layer);
    fixture_free(&f), fixture_free(&fw), fixture_free(&fc);
    dcmha_fixture_free(&fd);
    mh_context_destroy(ctx);
    return test_exit_code("test_seq_bad_input");
}
