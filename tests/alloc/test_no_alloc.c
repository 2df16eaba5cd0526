/*
 * Forward, decode and mh_attention never allocate (docs/api.md): this program replaces the
 * allocator, counts every call made while a flag is set around those three entry points, and
 * requires zero. Run once per ISA (MH_ISA), each with contexts of 1 and 2 threads; f32, f16
 * and int8 caches and K/V views.
 *
 * How the allocator is replaced:
 *  - Normal builds (glibc): malloc, calloc, realloc, reallocarray, free, aligned_alloc,
 *    posix_memalign, memalign, valloc and pvalloc are defined in this executable. The dynamic
 *    linker binds every reference to them, including the library's and the OpenMP runtime's,
 *    to these definitions, which count and forward to glibc's __libc_* entry points.
 *  - Sanitizer builds (ASan/TSan own the allocator, and replacing it under them is not
 *    possible): the sanitizer's malloc/free hooks count the same calls (every allocation
 *    function of the C library ends in them).
 * A self-check first proves the counter sees the library's own allocations (the create
 * functions allocate with malloc and aligned_alloc).
 *
 * The OpenMP runtime: the first parallel region of a program creates the thread team, and
 * that allocates (thread stacks, team structures). That is a one-time cost of the runtime,
 * not of any call: one warm-up forward runs before counting starts. The library's own code
 * never allocates; any allocation counted after the warm-up (including by the OpenMP runtime
 * on a later call) is a failure. Shapes are large enough that the 2-thread context really
 * forks (the library keeps calls under ~16 MFLOP on the caller's thread), and the program
 * checks that a worker thread exists after the warm-up (except on a slow machine, e.g. under
 * qemu, where smaller shapes keep the test short).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dlfcn.h>

#include "check.h"
#include "dcmha_fixture.h"
#include "layer_fixture.h"
#include "problem.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define MH_SANITIZED_ALLOC 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define MH_SANITIZED_ALLOC 1
#endif
#endif

enum { F_MALLOC, F_CALLOC, F_REALLOC, F_FREE, F_ALIGNED, F_POSIX_MEMALIGN, F_MEMALIGN, F_OTHER, F_COUNT };
static const char* const g_names[F_COUNT] = {"malloc", "calloc", "realloc", "free", "aligned_alloc",
                                             "posix_memalign", "memalign", "valloc/pvalloc/reallocarray"};
static atomic_int g_counting;
static atomic_long g_calls[F_COUNT];
/* the callers of the first few counted allocations, to name the module that allocated */
enum { MAX_CALLERS = 8 };
static void* g_callers[MAX_CALLERS];
static atomic_int g_n_callers;

static void count_from(int f, void* caller) {
    if (atomic_load_explicit(&g_counting, memory_order_relaxed)) {
        atomic_fetch_add_explicit(&g_calls[f], 1, memory_order_relaxed);
        if (!caller) return; /* free: its caller may be a tail call's, so not recorded */
        const int i = atomic_fetch_add_explicit(&g_n_callers, 1, memory_order_relaxed);
        if (i < MAX_CALLERS) g_callers[i] = caller;
    }
}
#define count(f) count_from((f), __builtin_return_address(0))

#if defined(MH_SANITIZED_ALLOC)
/* compiler-rt's <sanitizer/allocator_interface.h> (not shipped with every gcc) */
int __sanitizer_install_malloc_and_free_hooks(void (*malloc_hook)(const volatile void*, size_t),
                                              void (*free_hook)(const volatile void*));
static void on_malloc(const volatile void* p, size_t n) { (void)p, (void)n, count_from(F_MALLOC, NULL); }
static void on_free(const volatile void* p) { (void)p, count_from(F_FREE, NULL); }
static int install_counter(void) {
    return __sanitizer_install_malloc_and_free_hooks(on_malloc, on_free) != 0;
}
#elif defined(__GLIBC__)
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void __libc_free(void*);
void* __libc_memalign(size_t, size_t);
void* __libc_valloc(size_t);
void* __libc_pvalloc(size_t);

void* malloc(size_t n) {
    count(F_MALLOC);
    return __libc_malloc(n);
}
void* calloc(size_t a, size_t b) {
    count(F_CALLOC);
    return __libc_calloc(a, b);
}
void* realloc(void* p, size_t n) {
    count(F_REALLOC);
    return __libc_realloc(p, n);
}
void* reallocarray(void* p, size_t a, size_t b) {
    count(F_OTHER);
    if (b && a > SIZE_MAX / b) {
        errno = ENOMEM;
        return NULL;
    }
    return __libc_realloc(p, a * b);
}
void free(void* p) {
    count_from(F_FREE, NULL);
    __libc_free(p);
}
void* aligned_alloc(size_t align, size_t n) {
    count(F_ALIGNED);
    return __libc_memalign(align, n);
}
void* memalign(size_t align, size_t n) {
    count(F_MEMALIGN);
    return __libc_memalign(align, n);
}
int posix_memalign(void** out, size_t align, size_t n) {
    count(F_POSIX_MEMALIGN);
    if (align < sizeof(void*) || (align & (align - 1))) return EINVAL;
    void* p = __libc_memalign(align, n);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}
void* valloc(size_t n) {
    count(F_OTHER);
    return __libc_valloc(n);
}
void* pvalloc(size_t n) {
    count(F_OTHER);
    return __libc_pvalloc(n);
}
static int install_counter(void) { return 1; }
#else
static int install_counter(void) { return 0; }
#endif

static void start_counting(void) {
    for (int f = 0; f < F_COUNT; f++) atomic_store(&g_calls[f], 0);
    atomic_store(&g_n_callers, 0);
    atomic_store(&g_counting, 1);
}

/* Stops counting and returns the number of calls; prints them per function for `what`. */
static long stop_counting(const char* what) {
    atomic_store(&g_counting, 0);
    long total = 0;
    for (int f = 0; f < F_COUNT; f++) total += atomic_load(&g_calls[f]);
    if (total && what) {
        fprintf(stderr, "  %s: %ld allocator calls:", what, total);
        for (int f = 0; f < F_COUNT; f++)
            if (atomic_load(&g_calls[f])) fprintf(stderr, " %s %ld", g_names[f], atomic_load(&g_calls[f]));
        fprintf(stderr, "; allocations called from");
        const int nc = atomic_load(&g_n_callers) < MAX_CALLERS ? atomic_load(&g_n_callers) : MAX_CALLERS;
        for (int i = 0; i < nc; i++) {
            Dl_info info;
            if (g_callers[i] && dladdr(g_callers[i], &info) && info.dli_fname) {
                const char* base = strrchr(info.dli_fname, '/');
                fprintf(stderr, " %s", base ? base + 1 : info.dli_fname);
            } else {
                fprintf(stderr, " ?");
            }
        }
        fprintf(stderr, "\n");
    }
    return total;
}

/* Slow-machine limit (tests/support/problem.h): sanitizer builds keep the full shapes. */
#if defined(MH_SANITIZED_ALLOC)
#define SLOW_MS 200.0
#else
#define SLOW_MS 10.0
#endif

static void* ws_alloc(size_t bytes) { return aligned_alloc(64, (bytes + 63) / 64 * 64 + 64); }

/* Threads of this process, from /proc/self/status (0 if unknown). */
static int process_threads(void) {
    FILE* f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    int n = 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "Threads:", 8) == 0) n = atoi(line + 8);
    fclose(f);
    return n;
}

enum { B = 2, H = 8, HKV = 2, D = 32 };
/* shapes where a 2-thread context forks (projections and attention above ~16 MFLOP), or
 * small ones on a slow machine */
static int N = 128, D_MODEL = 256, CAP = 160, SLOW = 0, SCALAR = 0; /* SCALAR: MH_ISA is the scalar kernels */

/* Workspaces of a forward over [B, N], a decode of N tokens and one of a single token. */
static void layer_workspaces(const mh_layer* L, size_t* fw_bytes, void** fw, size_t* dec_bytes, void** dec,
                             size_t* dec1_bytes, void** dec1) {
    check_status("forward ws", mh_layer_forward_workspace_size(L, B, N, N, fw_bytes), MH_OK);
    check_status("decode ws", mh_layer_decode_workspace_size(L, B, N, dec_bytes), MH_OK);
    check_status("decode1 ws", mh_layer_decode_workspace_size(L, B, 1, dec1_bytes), MH_OK);
    *fw = ws_alloc(*fw_bytes), *dec = ws_alloc(*dec_bytes), *dec1 = ws_alloc(*dec1_bytes);
}

/* MoH (both routers, on the fixture's GQA weights): forward with a routing record, decode
 * with one, allocate nothing. */
static void run_moh_calls(int threads, const mh_context* ctx, const layer_fixture* f, const float* x, float* y) {
    char what[160];
    float* router = calloc((size_t)(H + 2) * D_MODEL, sizeof(float)); /* W_r, W_s, W_h rows */
    for (size_t i = 0; i < (size_t)(H + 2) * D_MODEL; i++) router[i] = 0.01f * (float)(i % 13);
    int32_t* heads = malloc(sizeof(int32_t) * B * N * H);
    float* gates = malloc(sizeof(float) * B * N * H);
    int64_t load[H];
    mh_routing_record rec = {heads, gates, load};
    float qkn[D];
    for (int i = 0; i < D; i++) qkn[i] = 1.0f + 0.01f * (float)i;
    for (int norm = 0; norm < 2; norm++) {
        mh_layer_config c = f->cfg;
        const mh_moh_config moh = norm ? (mh_moh_config){MH_VARIANT_MOH, MH_MOH_ROUTER_NORM, 4, 2}
                                       : (mh_moh_config){MH_VARIANT_MOH, MH_MOH_ROUTER_LEARNED, 2, 3};
        c.variant = MH_VARIANT_MOH, c.variant_config = &moh;
        c.rotary.layout = MH_ROTARY_HALF, c.qk_norm = 1; /* positions on both routers' paths */
        mh_layer_weights w = f->w;
        w.q_norm = w.k_norm = qkn;
        const mh_moh_weights rw = {MH_VARIANT_MOH, router, router, router};
        if (!norm) w.variant_weights = &rw;
        mh_layer* L = NULL;
        if (!check_status("create MoH", mh_layer_create(ctx, &c, &w, &L), MH_OK)) continue;
        size_t fw_bytes, dec_bytes;
        mh_layer_forward_workspace_size(L, B, N, N, &fw_bytes);
        mh_layer_decode_workspace_size(L, B, N, &dec_bytes);
        void *ws_fw = ws_alloc(fw_bytes), *ws_dec = ws_alloc(dec_bytes);
        mh_kv_cache* cache = NULL; /* f16 for the learned router, int8 for the other */
        check_status("MoH cache", mh_kv_cache_create(L, B, CAP, norm ? MH_DTYPE_I8 : MH_DTYPE_F16, &cache), MH_OK);
        mh_attn_options causal = mh_attn_options_default();
        causal.causal = 1;
        mh_forward_args a = {.batch = B, .n_q = N, .query = x, .out = y, .opt = &causal, .routing = &rec};
        snprintf(what, sizeof what, "%d thread(s): MoH (%s router, rotary + QK-norm) forward and decode allocate nothing",
                 threads, norm ? "norm" : "learned");
        start_counting();
        mh_status st = mh_layer_forward(L, &a, ws_fw, fw_bytes);
        if (st == MH_OK) st = mh_layer_decode(L, cache, &(mh_decode_args){.batch = B, .n_new = N, .x = x, .out = y, .routing = &rec}, ws_dec, dec_bytes);
        if (st == MH_OK) st = mh_layer_decode(L, cache, &(mh_decode_args){.batch = B, .n_new = 1, .x = x, .out = y, .routing = &rec}, ws_dec, dec_bytes);
        const long calls = stop_counting(what);
        check_status("MoH calls", st, MH_OK), check_true(what, calls == 0);
        free(ws_fw), free(ws_dec);
        mh_kv_cache_destroy(cache);
        mh_layer_destroy(L);
    }
    free(router), free(heads), free(gates);
}

/* variant: MH_VARIANT_GQA (Hkv = HKV) or MH_VARIANT_OVERLAP (o = D/4 + 3, D + 2o = 54) */
static void run_layer_calls(int threads, mh_variant variant) {
    char what[160];
    mh_context* ctx = test_context(threads);
    test_rng r;
    rng_seed(&r, 77 + (uint64_t)threads);
    mh_layer_config c = mh_layer_config_default();
    c.variant = variant, c.d_model = D_MODEL, c.n_heads = H;
    c.n_kv_heads = variant == MH_VARIANT_GQA ? HKV : 0;
    const mh_overlap_config oc = {MH_VARIANT_OVERLAP, D / 4 + 3};
    if (variant == MH_VARIANT_OVERLAP) c.variant_config = &oc;
    c.head_dim = D, c.bias = 1;
    layer_fixture f;
    if (!check_status("create", fixture_make(&f, ctx, &c, &r, 0.1f), MH_OK)) exit(1);
    mh_layer_config cw = c; /* the same layer with model-level options (window, cap, ALiBi, sinks) */
    float slopes[8], sinks[8];
    for (int h = 0; h < H; h++) slopes[h] = 0.05f * (float)(h + 1), sinks[h] = 0.1f * (float)h;
    cw.window = 40, cw.softcap = 20.0f, cw.alibi_slopes = slopes, cw.sinks = sinks;
    if (variant == MH_VARIANT_GQA) /* and partial interleaved rotary (its workspace is the larger) */
        cw.rotary = (mh_rotary_config){MH_ROTARY_INTERLEAVED, D / 2, 500000.0f, NULL};
    mh_layer* Lw = NULL;
    check_status("create (options)", fixture_recreate(&f, ctx, &cw, &Lw), MH_OK);

    const size_t n = (size_t)B * N * D_MODEL;
    float *x = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n);
    rng_fill(&r, x, n, -1, 1);
    size_t fw_bytes, dec_bytes, dec1_bytes;
    void *ws_fw, *ws_dec, *ws_dec1;
    layer_workspaces(Lw, &fw_bytes, &ws_fw, &dec_bytes, &ws_dec, &dec1_bytes, &ws_dec1);
    mh_kv_cache *cache = NULL, *cache16 = NULL, *cache8 = NULL;
    check_status("cache", mh_kv_cache_create(f.layer, B, CAP, MH_DTYPE_F32, &cache), MH_OK);
    check_status("cache f16", mh_kv_cache_create(f.layer, B, CAP, MH_DTYPE_F16, &cache16), MH_OK);
    check_status("cache int8", mh_kv_cache_create(f.layer, B, CAP, MH_DTYPE_I8, &cache8), MH_OK);
    float* mask = malloc(sizeof(float) * (size_t)N * N);
    for (size_t i = 0; i < (size_t)N * N; i++) mask[i] = (i % 7 == 0) ? -1.0f : 0.25f;
    float* probs = malloc(sizeof(float) * (size_t)B * H * N * N);
    int32_t kv_len[2] = {N, N - 9};

    /* warm-up: the program's first parallel region (OpenMP creates its team here) */
    mh_attn_options causal = mh_attn_options_default();
    causal.causal = 1;
    mh_forward_args a = {.batch = B, .n_q = N, .query = x, .out = y, .opt = &causal};
    check_status("warm-up forward", mh_layer_forward(f.layer, &a, ws_fw, fw_bytes), MH_OK);
    if (threads > 1 && !SLOW) {
        snprintf(what, sizeof what, "a %d-thread context started a worker thread (process has %d)",
                 threads, process_threads());
        check_true(what, process_threads() >= 2);
    }

    snprintf(what, sizeof what, "%d thread(s): layer forward (causal) allocates nothing", threads);
    start_counting();
    mh_status st = mh_layer_forward(f.layer, &a, ws_fw, fw_bytes);
    long calls = stop_counting(what);
    check_status("forward", st, MH_OK), check_true(what, calls == 0);

    mh_attn_options rich = mh_attn_options_default();
    rich.mask = mask, rich.mask_stride_row = N, rich.kv_len = kv_len, rich.probs = probs;
    a.opt = &rich;
    snprintf(what, sizeof what, "%d thread(s): forward (window, softcap, ALiBi, sinks, rotary, mask, kv_len, probs) allocates nothing", threads);
    start_counting();
    st = mh_layer_forward(Lw, &a, ws_fw, fw_bytes);
    calls = stop_counting(what);
    check_status("forward (options)", st, MH_OK), check_true(what, calls == 0);

    mh_kv_cache* caches[3] = {cache, cache16, cache8};
    static const char* const cache_names[3] = {"f32", "f16", "int8"};
    for (int ci = 0; ci < 3; ci++) {
        snprintf(what, sizeof what, "%d thread(s): decode (%s cache, prefill %d + 30 tokens) allocates nothing",
                 threads, cache_names[ci], N);
        start_counting();
        st = mh_layer_decode(f.layer, caches[ci], &(mh_decode_args){.batch = B, .n_new = N, .x = x, .out = y}, ws_dec, dec_bytes);
        for (int t = 0; t < 30 && st == MH_OK; t++)
            st = mh_layer_decode(ci ? Lw : f.layer, caches[ci], &(mh_decode_args){.batch = B, .n_new = 1, .x = x + (size_t)t * D_MODEL, .out = y}, ws_dec1, dec1_bytes);
        calls = stop_counting(what);
        check_status("decode", st, MH_OK), check_true(what, calls == 0);
    }
    /* a paged cache: ragged calls (packed rows, sequence 1 not advanced), fork, a copy on
     * write, reset */
    mh_kv_cache_config pc = mh_kv_cache_config_default();
    pc.max_seqs = 3, pc.capacity = CAP, pc.block_size = 64;
    mh_kv_cache* paged = NULL;
    check_status("paged cache", mh_kv_cache_create_ex(f.layer, &pc, &paged), MH_OK);
    const int32_t ids[2] = {2, 0}, cnt[2] = {N, 3}, one[2] = {1, 1}, fork_ids[2] = {0, 1};
    snprintf(what, sizeof what, "%d thread(s): ragged decode on a paged cache, fork, copy on write, reset allocate nothing", threads);
    start_counting();
    st = mh_layer_decode(f.layer, paged, &(mh_decode_args){.batch = 2, .n_new = N, .x = x, .out = y, .seq_ids = ids, .n_new_seq = cnt}, ws_dec, dec_bytes);
    if (st == MH_OK) st = mh_kv_cache_seq_fork(paged, 0, 1);
    if (st == MH_OK) st = mh_layer_decode(f.layer, paged, &(mh_decode_args){.batch = 2, .n_new = 1, .x = x, .out = y, .seq_ids = fork_ids, .n_new_seq = one}, ws_dec1, dec1_bytes);
    if (st == MH_OK) st = mh_kv_cache_seq_reset(paged, 1);
    calls = stop_counting(what);
    check_status("paged calls", st, MH_OK), check_true(what, calls == 0);
    mh_kv_cache_destroy(paged);
    if (variant == MH_VARIANT_GQA) run_moh_calls(threads, ctx, &f, x, y);

    /* error returns allocate nothing either */
    snprintf(what, sizeof what, "%d thread(s): failing calls allocate nothing", threads);
    start_counting();
    mh_status e1 = mh_layer_decode(f.layer, cache, &(mh_decode_args){.batch = B, .n_new = CAP, .x = x, .out = y}, ws_dec, dec_bytes); /* cache full */
    mh_status e2 = mh_layer_forward(f.layer, &a, ws_fw, 64);                       /* too small */
    calls = stop_counting(what);
    check_status("cache full", e1, MH_ERR_CACHE_FULL);
    check_status("workspace too small", e2, MH_ERR_WORKSPACE_TOO_SMALL);
    check_true(what, calls == 0);

    free(x), free(y), free(mask), free(probs), free(ws_fw), free(ws_dec), free(ws_dec1);
    mh_kv_cache_destroy(cache);
    mh_kv_cache_destroy(cache16);
    mh_kv_cache_destroy(cache8);
    mh_layer_destroy(Lw);
    fixture_free(&f);
    mh_context_destroy(ctx);
}

static void run_core_calls(int threads) {
    char what[160];
    mh_context* ctx = test_context(threads);
    test_rng r;
    rng_seed(&r, 99 + (uint64_t)threads);
    /* prefill-shaped (prepacked K/V, several query tiles), decode-shaped (split-KV), a
     * padded-layout bf16 call with every option, and int8 K/V decode- and prefill-shaped */
    enum { NP = 5 };
    test_problem pre, dec, pad, dec8, pre8;
    problem_make(&pre, &r, 2, SLOW ? 40 : 64, SLOW ? 80 : 256, 4, 2, 64, 64, MH_DTYPE_F32, LAYOUT_TOKEN_MAJOR, 1.0f);
    problem_make(&dec, &r, 1, 1, SLOW ? 2100 : 8192, 8, 1, 64, 64, MH_DTYPE_F16, LAYOUT_HEAD_MAJOR, 1.0f);
    problem_make(&pad, &r, 2, 33, 130, 6, 3, 24, 20, MH_DTYPE_BF16, LAYOUT_PADDED, 1.0f);
    problem_make(&dec8, &r, 1, 1, SLOW ? 2100 : 8192, 8, 2, 64, 64, MH_DTYPE_I8, LAYOUT_HEAD_MAJOR, 1.0f);
    problem_make(&pre8, &r, 2, SLOW ? 40 : 64, SLOW ? 80 : 256, 4, 2, 64, 64, MH_DTYPE_I8, LAYOUT_TOKEN_MAJOR, 1.0f);
    test_problem* ps[NP] = {&pre, &dec, &pad, &dec8, &pre8};
    static const char* const names[NP] = {"prefill-shaped", "decode-shaped (split-KV)", "padded bf16 with options",
                                          "int8 decode-shaped (split-KV)", "int8 prefill-shaped"};
    size_t bytes[NP];
    void* ws[NP];
    float slopes[6], sinks[6];
    for (int h = 0; h < 6; h++) slopes[h] = 0.1f * (float)(h + 1), sinks[h] = 0.2f * (float)h;
    float* mask = malloc(sizeof(float) * 33 * 130);
    for (int i = 0; i < 33 * 130; i++) mask[i] = (i % 5 == 0) ? -INFINITY : 0.5f;
    float* probs = malloc(sizeof(float) * 2 * 6 * 33 * 130);
    int32_t kv_len[2] = {130, 77};
    float lse1[8], lse2[2 * 6 * 33]; /* partial attention: [B, H, N] */
    mh_attn_options opts[NP];
    opts[0] = mh_attn_options_default(), opts[0].causal = 1;
    opts[3] = mh_attn_options_default();
    opts[4] = opts[0];
    opts[1] = mh_attn_options_default();
    opts[2] = mh_attn_options_default();
    opts[2].causal = 1, opts[2].window = 50, opts[2].softcap = 15.0f, opts[2].alibi_slopes = slopes;
    opts[2].sinks = sinks, opts[2].mask = mask, opts[2].mask_stride_row = 130, opts[2].kv_len = kv_len;
    opts[2].probs = probs;
    opts[1].lse = lse1, opts[1].kv_offset = 5000, opts[1].q_offset = 5000 + opts[1].kv_offset; /* a key shard */
    opts[2].lse = lse2, opts[2].kv_offset = 3;
    for (int i = 0; i < NP; i++) {
        check_status("core ws", mh_attention_workspace_size(ctx, &ps[i]->p, &opts[i], &bytes[i]), MH_OK);
        ws[i] = ws_alloc(bytes[i]);
    }
    /* warm-up (a no-op when run_layer_calls already ran in this process) */
    check_status("warm-up core", mh_attention(ctx, &pre.p, &opts[0], ws[0], bytes[0]), MH_OK);
    /* every call in f32, then in bf16 compute where the ISA has it */
    const int modes = mh_compute_supported(mh_context_isa(ctx), MH_COMPUTE_BF16) ? 2 : 1;
    for (int i = 0; i < NP * modes; i++) {
        mh_attn_options o = opts[i % NP];
        o.compute = i < NP ? MH_COMPUTE_F32 : MH_COMPUTE_BF16;
        snprintf(what, sizeof what, "%d thread(s): mh_attention %s (%s) allocates nothing", threads, names[i % NP],
                 mh_compute_name(o.compute));
        start_counting();
        mh_status st = mh_attention(ctx, &ps[i % NP]->p, &o, ws[i % NP], bytes[i % NP]);
        long calls = stop_counting(what);
        check_status(names[i % NP], st, MH_OK), check_true(what, calls == 0);
    }
    /* the merge of partials (decode-shaped: B 1, N 1, H 8, Dv 64) */
    float merged[8 * 64];
    const float* outs[2] = {dec.o, dec.o};
    const float* lses[2] = {lse1, lse1};
    snprintf(what, sizeof what, "%d thread(s): mh_attention_merge allocates nothing", threads);
    start_counting();
    mh_status st = mh_attention_merge(2, outs, lses, 1, 1, 8, 64, merged, NULL);
    long calls = stop_counting(what);
    check_status("merge", st, MH_OK), check_true(what, calls == 0);
    for (int i = 0; i < NP; i++) free(ws[i]), problem_free(ps[i]);
    free(mask), free(probs);
    mh_context_destroy(ctx);
}

/* CollabHead: forward with every option and probabilities, then a bf16-cache decode long
 * enough for the split over the keys (1100 + 2 tokens). */
static void run_collab_calls(int threads) {
    char what[160];
    enum { CH = 8, CM = 1102 };
    mh_context* ctx = test_context(threads);
    test_rng r;
    rng_seed(&r, 606 + (uint64_t)threads);
    float slopes[CH], sinks[CH];
    for (int h = 0; h < CH; h++) slopes[h] = 0.01f * (float)(h + 1), sinks[h] = 0.1f * (float)h;
    mh_layer_config c = mh_layer_config_default();
    const mh_collab_config cc = {MH_VARIANT_COLLAB, 32};
    c.variant = MH_VARIANT_COLLAB, c.d_model = 64, c.n_heads = CH, c.head_dim = 16, c.variant_config = &cc;
    c.bias = 1, c.window = 40, c.softcap = 20.0f, c.alibi_slopes = slopes, c.sinks = sinks;
    layer_fixture f;
    if (!check_status("collab create", fixture_make(&f, ctx, &c, &r, 0.1f), MH_OK)) exit(1);
    const int n = 48;
    float *x = malloc(sizeof(float) * CM * 64), *y = malloc(sizeof(float) * CM * 64);
    float* probs = malloc(sizeof(float) * CH * n * n);
    rng_fill(&r, x, (size_t)CM * 64, -1, 1);
    size_t fw_bytes, dec_bytes, dec1_bytes;
    check_status("forward ws", mh_layer_forward_workspace_size(f.layer, 1, n, n, &fw_bytes), MH_OK);
    check_status("decode ws", mh_layer_decode_workspace_size(f.layer, 1, CM - 2, &dec_bytes), MH_OK);
    check_status("decode1 ws", mh_layer_decode_workspace_size(f.layer, 1, 1, &dec1_bytes), MH_OK);
    void *ws_fw = ws_alloc(fw_bytes), *ws_dec = ws_alloc(dec_bytes), *ws_dec1 = ws_alloc(dec1_bytes);
    mh_kv_cache* cache = NULL;
    check_status("cache", mh_kv_cache_create(f.layer, 1, CM, MH_DTYPE_BF16, &cache), MH_OK);
    mh_attn_options opt = mh_attn_options_default();
    opt.causal = 1, opt.probs = probs;
    mh_forward_args a = {.batch = 1, .n_q = n, .query = x, .out = y, .opt = &opt};
    /* warm-up: the same calls once, so the OpenMP team exists (on a slow machine the other
     * warm-ups' reduced shapes may not have needed a second worker) */
    check_status("warm-up", mh_layer_forward(f.layer, &a, ws_fw, fw_bytes), MH_OK);
    check_status("warm-up decode", mh_layer_decode(f.layer, cache, &(mh_decode_args){.batch = 1, .n_new = CM - 2, .x = x, .out = y}, ws_dec, dec_bytes), MH_OK);
    mh_kv_cache_reset(cache);
    snprintf(what, sizeof what, "%d thread(s): CollabHead forward and decode allocate nothing", threads);
    start_counting();
    mh_status st = mh_layer_forward(f.layer, &a, ws_fw, fw_bytes);
    if (st == MH_OK) st = mh_layer_decode(f.layer, cache, &(mh_decode_args){.batch = 1, .n_new = CM - 2, .x = x, .out = y}, ws_dec, dec_bytes);
    for (int t = 0; t < 2 && st == MH_OK; t++)
        st = mh_layer_decode(f.layer, cache, &(mh_decode_args){.batch = 1, .n_new = 1, .x = x + (size_t)t * 64, .out = y}, ws_dec1, dec1_bytes);
    long calls = stop_counting(what);
    check_status("collab calls", st, MH_OK), check_true(what, calls == 0);
    free(x), free(y), free(probs), free(ws_fw), free(ws_dec), free(ws_dec1);
    mh_kv_cache_destroy(cache);
    fixture_free(&f);
    mh_context_destroy(ctx);
}

/* DCMHA: its forward (materialised scores), chunked and token decode (two passes), and with 2
 * threads on vector kernels a decode over a cache long enough to split its keys (2048 + 2
 * tokens); in f32 on an f16 cache, or in bf16 compute on a bf16 cache (whose decode runs the
 * direct kernels). The split is decided by the shapes alone and is the same driver code on 1
 * thread and on every ISA; filling the cache on the scalar kernels took most of this program's
 * time there (22 s of the 1-thread and 2-thread runs, 53 s under ASan). */
static void run_dcmha_calls(int threads, mh_compute compute) {
    char what[160];
    mh_context* ctx = test_context(threads);
    test_rng r;
    rng_seed(&r, 55 + (uint64_t)threads);
    mh_layer_config c = mh_layer_config_default();
    c.variant = MH_VARIANT_DCMHA, c.d_model = D_MODEL, c.n_heads = H, c.head_dim = D, c.bias = 1;
    mh_dcmha_config dc = mh_dcmha_config_default();
    dc.groups = 2, dc.static_weights = 1, c.variant_config = &dc;
    c.rotary = (mh_rotary_config){MH_ROTARY_HALF, D / 4, 0.0f, NULL};
    c.compute = compute;
    dcmha_fixture f;
    if (!check_status("create dcmha", dcmha_fixture_make(&f, ctx, &c, &r, 0.1f, 0.1f, 0), MH_OK)) exit(1);
    const int cap = SLOW || SCALAR || threads == 1 ? CAP : 2100 + 40;
    const size_t n = (size_t)B * N * D_MODEL;
    float *x = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n);
    rng_fill(&r, x, n, -1, 1);
    size_t fw_bytes, dec_bytes, dec1_bytes;
    void *ws_fw, *ws_dec, *ws_dec1;
    layer_workspaces(f.layer, &fw_bytes, &ws_fw, &dec_bytes, &ws_dec, &dec1_bytes, &ws_dec1);
    mh_kv_cache* cache = NULL;
    const mh_dtype dt = compute == MH_COMPUTE_BF16 ? MH_DTYPE_BF16 : MH_DTYPE_F16;
    check_status("cache", mh_kv_cache_create(f.layer, B, cap, dt, &cache), MH_OK);
    mh_attn_options causal = mh_attn_options_default();
    causal.causal = 1;
    mh_forward_args a = {.batch = B, .n_q = N, .query = x, .out = y, .opt = &causal};
    check_status("warm-up forward", mh_layer_forward(f.layer, &a, ws_fw, fw_bytes), MH_OK);
    snprintf(what, sizeof what, "%d thread(s): DCMHA (partial rotary, %s) forward and decode allocate nothing",
             threads, mh_compute_name(compute));
    start_counting();
    mh_status st = mh_layer_forward(f.layer, &a, ws_fw, fw_bytes);
    while (st == MH_OK && mh_kv_cache_length(cache) + N + 2 <= cap) /* chunks, then single tokens */
        st = mh_layer_decode(f.layer, cache, &(mh_decode_args){.batch = B, .n_new = N, .x = x, .out = y}, ws_dec, dec_bytes);
    for (int t = 0; t < 2 && st == MH_OK; t++) st = mh_layer_decode(f.layer, cache, &(mh_decode_args){.batch = B, .n_new = 1, .x = x, .out = y}, ws_dec1, dec1_bytes);
    long calls = stop_counting(what);
    check_status("dcmha calls", st, MH_OK), check_true(what, calls == 0);
    free(x), free(y), free(ws_fw), free(ws_dec), free(ws_dec1);
    mh_kv_cache_destroy(cache);
    dcmha_fixture_free(&f);
    mh_context_destroy(ctx);
}

int main(void) {
    if (!install_counter()) {
        fprintf(stderr, "skipped: no way to count allocator calls on this platform\n");
        return 77;
    }
    /* self-check: the counter sees the library's allocations (malloc and aligned_alloc) */
    mh_context* probe = test_context(1);
    mh_context_destroy(probe);
    start_counting();
    mh_context* ctx = test_context(1);
    long ctx_calls = stop_counting(NULL);
    check_true("the counter sees mh_context_create's malloc", ctx_calls > 0);
    mh_layer_config c = mh_layer_config_default();
    c.d_model = 8, c.n_heads = 2, c.head_dim = 4;
    test_rng r;
    rng_seed(&r, 5);
    layer_fixture f;
    check_status("small layer", fixture_make(&f, ctx, &c, &r, 0.5f), MH_OK);
    mh_kv_cache* cache = NULL;
    start_counting();
    check_status("small cache", mh_kv_cache_create(f.layer, 1, 4, MH_DTYPE_F16, &cache), MH_OK);
    long cache_calls = stop_counting(NULL);
    check_true("the counter sees mh_kv_cache_create's allocations", cache_calls > 0);
    mh_kv_cache_destroy(cache);
    fixture_free(&f);
    SLOW = slow_machine(ctx, SLOW_MS);
    SCALAR = mh_context_isa(ctx) == MH_ISA_SCALAR;
    const int bf16 = mh_compute_supported(mh_context_isa(ctx), MH_COMPUTE_BF16);
    if (SLOW) N = 40, D_MODEL = 64, CAP = 72;
    mh_context_destroy(ctx);

    run_layer_calls(1, MH_VARIANT_GQA);
    run_layer_calls(1, MH_VARIANT_OVERLAP);
    run_collab_calls(1);
    run_dcmha_calls(1, MH_COMPUTE_F32);
    if (bf16) run_dcmha_calls(1, MH_COMPUTE_BF16);
    run_core_calls(1);
    run_layer_calls(2, MH_VARIANT_GQA);
    run_layer_calls(2, MH_VARIANT_OVERLAP);
    run_collab_calls(2);
    run_dcmha_calls(2, MH_COMPUTE_F32);
    if (bf16) run_dcmha_calls(2, MH_COMPUTE_BF16);
    run_core_calls(2);
    return test_exit_code("test_no_alloc");
}
