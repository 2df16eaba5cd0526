/*
 * libFuzzer target for the public API (tests/fuzz/run.sh builds and runs it; replay_main.c
 * replays the committed corpus in the normal test suite).
 *
 * The input bytes are read front to back as choices (every byte string is a valid input;
 * past the end every choice reads 0, which always means "the simplest option"):
 *   byte 0: mode (even: the attention core; odd: a layer with a sequence of calls)
 *   then the tested context (ISA among those this CPU supports, 1..3 threads), shapes,
 *   strides, dtypes, options, masks, and sometimes one deliberate error.
 *
 * Properties checked (a violation prints what and aborts, which libFuzzer reports):
 *  - a valid request returns MH_OK, its outputs are finite, match the same request on a
 *    scalar 1-thread context within a rounding tolerance (and, for the attention core, the
 *    scalar result matches the double-precision oracle of tests/support within the same
 *    bound), and it writes nothing outside the output views (the padding of strided outputs
 *    keeps its poison) and never writes its inputs;
 *  - a request with one deliberate error returns exactly the documented status and writes
 *    nothing at all: outputs, probabilities, workspace, *out pointers and the KV cache
 *    (length, and contents as seen by later decodes) keep their previous state;
 *  - the tested context and the scalar reference agree on every status;
 *  - nothing reads or writes out of bounds (ASan: every buffer is allocated at exactly the
 *    size its view or size query says), no undefined behaviour (UBSan), no leak.
 * Sizes are bounded so that one input runs in milliseconds.
 *
 * Tolerances. Two f32 implementations differ by rounding only: in the scores about
 * eps * S with S = scale * Dqk * |q|max * |k|max plus the ALiBi and mask terms, which moves
 * each probability by ~2 eps S relative; and in the softmax and P.V sums about
 * eps * (M + Dv). So |o - o_ref| <= 8 eps |v|max (4 (S + A) + M + Dv + 32), the form
 * tests/core/test_attention_oracle.c uses, with the input amplitudes made explicit. In the
 * layer mode K and V are exact in every cache dtype (weights and inputs are small dyadic
 * rationals; see layer_inputs), so f16/bf16 caches hold the same values on every ISA, and the
 * output projection adds (d_model + H*Dv) eps terms.
 */
#define _POSIX_C_SOURCE 200809L
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "multihead.h"
#include "oracle.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
int LLVMFuzzerInitialize(int* argc, char*** argv);

#define FAIL(...)                                                                              \
    do {                                                                                       \
        fprintf(stderr, "fuzz_api: FAILED: " __VA_ARGS__);                                     \
        fputc('\n', stderr);                                                                   \
        abort();                                                                               \
    } while (0)

/* ------------------------------------------------------------------ input and values */

typedef struct input {
    const uint8_t* p;
    size_t n;
} input;

static unsigned byte(input* in) {
    if (!in->n) return 0;
    in->n--;
    return *in->p++;
}

/* An integer in [lo, hi]; lo when the input is exhausted. */
static int range(input* in, int lo, int hi) {
    const unsigned span = (unsigned)(hi - lo) + 1u;
    unsigned v = byte(in);
    if (span > 256) v |= byte(in) << 8;
    return lo + (int)(v % span);
}

/* True one time in `n` (never when the input is exhausted). */
static int one_in(input* in, int n) { return (int)(byte(in) % (unsigned)n) == n - 1; }

typedef struct rng {
    uint64_t s;
} rng;

static uint64_t next(rng* r) {
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static float uniform(rng* r, float amp) {
    return amp * (2.0f * (float)(next(r) >> 40) / (float)(1u << 24) - 1.0f);
}

static int rint_in(rng* r, int lo, int hi) { return lo + (int)(next(r) % (uint64_t)(hi - lo + 1)); }

static uint16_t to_f16(float f) { /* round to nearest even; tiny values flush to zero */
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    const uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a < 0x38800000u) return (uint16_t)sign;
    uint32_t x = a - 0x38000000u;
    x += 0xfffu + ((x >> 13) & 1u);
    return (uint16_t)(sign | (x >> 13));
}

static uint16_t to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static size_t dtype_size(mh_dtype t) { return t == MH_DTYPE_F32 ? 4 : 2; }

/* ------------------------------------------------------------------ contexts */

static mh_context* g_ctx[MH_ISA_COUNT][4]; /* [isa][threads] */
static mh_isa g_isas[MH_ISA_COUNT];
static int g_n_isas;
static mh_context* g_ref; /* scalar, 1 thread */

static void init_contexts(void) {
    if (g_ref) return;
    for (int i = MH_ISA_SCALAR; i < MH_ISA_COUNT; i++) {
        if (!mh_isa_supported((mh_isa)i)) continue;
        g_isas[g_n_isas++] = (mh_isa)i;
        for (int t = 1; t <= 3; t++) {
            mh_context_config c = mh_context_config_default();
            c.isa = (mh_isa)i, c.num_threads = t;
            if (mh_context_create(&c, &g_ctx[i][t]) != MH_OK) FAIL("context %s/%d", mh_isa_name((mh_isa)i), t);
        }
    }
    g_ref = g_ctx[MH_ISA_SCALAR][1];
}

int LLVMFuzzerInitialize(int* argc, char*** argv) {
    (void)argc, (void)argv;
    init_contexts();
    return 0;
}

static const mh_context* pick_context(input* in, char* name, size_t name_len) {
    const mh_isa isa = g_isas[range(in, 0, g_n_isas - 1)];
    const int t = range(in, 1, 3);
    snprintf(name, name_len, "%s/%d thread%s", mh_isa_name(isa), t, t > 1 ? "s" : "");
    return g_ctx[isa][t];
}

/* ------------------------------------------------------------------ buffers */

#define POISON 0xA5

static void* xalloc(size_t bytes) {
    void* p = malloc(bytes ? bytes : 1);
    if (!p) FAIL("out of memory (%zu bytes)", bytes);
    return p;
}

/* A workspace of exactly `bytes` (ASan sees any access past it), 64-byte aligned, poisoned. */
static void* ws_alloc(size_t bytes) {
    void* p = NULL;
    if (posix_memalign(&p, 64, bytes ? bytes : 1) != 0) FAIL("out of memory (workspace %zu bytes)", bytes);
    memset(p, POISON, bytes ? bytes : 1);
    return p;
}

static int all_poison(const void* buf, size_t bytes) {
    const unsigned char* b = buf;
    for (size_t i = 0; i < bytes; i++)
        if (b[i] != POISON) return 0;
    return 1;
}

static void* dup(const void* p, size_t bytes) {
    void* d = xalloc(bytes);
    if (bytes) memcpy(d, p, bytes);
    return d;
}

static int same_bytes(const void* a, const void* b, size_t bytes) { return bytes == 0 || memcmp(a, b, bytes) == 0; }

/* ------------------------------------------------------------------ strided views */

typedef struct view {
    ptrdiff_t sb, st, sh; /* batch, token, head strides */
    size_t elems;         /* elements the buffer needs: largest index + 1 */
} view;

/* Outer-to-inner orders of (batch, token, head). */
static const int k_orders[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};

static void make_view(input* in, int B, int T, int Hh, int D, int may_broadcast, view* v) {
    const int* order = k_orders[range(in, 0, 5)];
    const int extent[3] = {B, T, Hh};
    ptrdiff_t stride[3], s = D + range(in, 0, 3); /* padding after each row */
    for (int k = 2; k >= 0; k--) {
        stride[order[k]] = s;
        s = s * extent[order[k]] + range(in, 0, 2); /* padding after each block */
    }
    if (may_broadcast && one_in(in, 8)) stride[range(in, 0, 2)] = 0; /* read the same rows */
    v->sb = stride[0], v->st = stride[1], v->sh = stride[2];
    v->elems = (size_t)((B - 1) * v->sb + (T - 1) * v->st + (Hh - 1) * v->sh + D);
}

static void fill_f32(rng* r, float* x, size_t n, float amp) {
    for (size_t i = 0; i < n; i++) x[i] = uniform(r, amp);
}

static void* fill_kv(rng* r, size_t n, mh_dtype dt, float amp) {
    void* buf = xalloc(n * dtype_size(dt));
    for (size_t i = 0; i < n; i++) {
        const float x = uniform(r, amp);
        if (dt == MH_DTYPE_F32) ((float*)buf)[i] = x;
        else if (dt == MH_DTYPE_F16) ((uint16_t*)buf)[i] = to_f16(x);
        else ((uint16_t*)buf)[i] = to_bf16(x);
    }
    return buf;
}

/* ------------------------------------------------------------------ the attention core */

enum {
    AM_NONE, AM_BATCH, AM_NKV, AM_HEADS, AM_DTYPE, AM_NEG_STRIDE, AM_O_OVERLAP, AM_CAUSAL,
    AM_WINDOW, AM_QOFF, AM_SOFTCAP, AM_KVLEN, AM_SCALE, AM_NULL_Q, AM_NULL_O, AM_MASK_STRIDE,
    AM_HUGE_STRIDE, AM_WS_SMALL, AM_WS_MISALIGNED, AM_WS_NULL, AM_NULL_CTX, AM_COUNT
};

typedef struct attn_case {
    mh_attn_problem p;
    mh_attn_options opt;
    view vq, vk, vv, vo;
    float* q;
    void *k, *v;
    float* o;
    float* mask;
    size_t mask_elems;
    int32_t kv_len[3];
    float slopes[12], sinks[12];
    float* probs;
    size_t probs_elems;
} attn_case;

/* 1 for every O element inside the view. */
static unsigned char* o_coverage(const attn_case* c) {
    unsigned char* in_view = calloc(c->vo.elems, 1);
    const mh_attn_problem* p = &c->p;
    for (int b = 0; b < p->batch; b++)
        for (int i = 0; i < p->n_q; i++)
            for (int h = 0; h < p->n_heads; h++)
                memset(in_view + b * c->vo.sb + i * c->vo.st + h * c->vo.sh, 1, (size_t)p->head_dim_v);
    return in_view;
}

static void check_attention_outputs(const attn_case* c, const float* o, const float* probs,
                                    const float* o_ref, const float* probs_ref, double tol,
                                    double tol_p, const char* where) {
    unsigned char* in_view = o_coverage(c);
    for (size_t i = 0; i < c->vo.elems; i++) {
        if (!in_view[i]) {
            if (!all_poison(o + i, sizeof(float))) FAIL("%s: wrote O padding at element %zu", where, i);
            continue;
        }
        if (!isfinite(o[i])) FAIL("%s: O[%zu] = %g is not finite", where, i, (double)o[i]);
        if (!(fabs((double)o[i] - (double)o_ref[i]) <= tol))
            FAIL("%s: O[%zu] = %.9g, scalar reference %.9g (tolerance %.3g)", where, i, (double)o[i],
                 (double)o_ref[i], tol);
    }
    free(in_view);
    for (size_t i = 0; probs && i < c->probs_elems; i++) {
        if (!(probs[i] >= 0.0f && probs[i] <= 1.0f + 1e-6f)) FAIL("%s: probs[%zu] = %g", where, i, (double)probs[i]);
        if (!(fabs((double)probs[i] - (double)probs_ref[i]) <= tol_p))
            FAIL("%s: probs[%zu] = %.9g, scalar reference %.9g (tolerance %.3g)", where, i,
                 (double)probs[i], (double)probs_ref[i], tol_p);
    }
}

static void fuzz_attention(input* in) {
    char ctx_name[48], where[400];
    const mh_context* ctx = pick_context(in, ctx_name, sizeof ctx_name);
    rng r = {byte(in)};
    r.s |= (uint64_t)byte(in) << 8;
    attn_case c;
    memset(&c, 0, sizeof c);
    mh_attn_problem* p = &c.p;
    /* shape class: small; decode-shaped with key ranges long enough to be split (>= 2048);
     * prefill-shaped with several query tiles per task group (K/V packed once per call) */
    const int shape = range(in, 0, 7), long_kv = shape == 6, prefill = shape == 7;
    const int Hkv = range(in, 1, 3), g = range(in, 1, 4), H = Hkv * g;
    const int B = range(in, 1, 3);
    const int N = long_kv ? range(in, 1, 2) : prefill ? range(in, 25, 130) : range(in, 1, 24);
    const int M = long_kv ? range(in, 2048, 2300) : prefill ? range(in, 1, 160) : range(in, 1, 96);
    const int dmax = long_kv || prefill ? 16 : 72;
    const int Dqk = range(in, 1, dmax);
    const int Dv = one_in(in, 2) ? Dqk : range(in, 1, dmax);
    p->batch = B, p->n_q = N, p->n_kv = M, p->n_heads = H, p->n_kv_heads = Hkv;
    p->head_dim_qk = Dqk, p->head_dim_v = Dv;
    p->k_dtype = (mh_dtype)range(in, 0, 2), p->v_dtype = (mh_dtype)range(in, 0, 2);
    static const float scales[4] = {0.0f, 0.02f, 0.2f, 1.0f};
    static const float amps[3] = {1.0f, 0.25f, 4.0f};
    p->scale = scales[range(in, 0, 3)];
    const float amp_q = amps[range(in, 0, 2)], amp_k = amps[range(in, 0, 2)], amp_v = amps[range(in, 0, 2)];
    make_view(in, B, N, H, Dqk, 1, &c.vq);
    make_view(in, B, M, Hkv, Dqk, 1, &c.vk);
    make_view(in, B, M, Hkv, Dv, 1, &c.vv);
    make_view(in, B, N, H, Dv, 0, &c.vo);
    c.q = xalloc(c.vq.elems * sizeof(float));
    fill_f32(&r, c.q, c.vq.elems, amp_q);
    c.k = fill_kv(&r, c.vk.elems, p->k_dtype, amp_k);
    c.v = fill_kv(&r, c.vv.elems, p->v_dtype, amp_v);
    c.o = xalloc(c.vo.elems * sizeof(float));
    p->q = (mh_tensor){.data = c.q, .stride_batch = c.vq.sb, .stride_token = c.vq.st, .stride_head = c.vq.sh};
    p->k = (mh_tensor){.data = c.k, .stride_batch = c.vk.sb, .stride_token = c.vk.st, .stride_head = c.vk.sh};
    p->v = (mh_tensor){.data = c.v, .stride_batch = c.vv.sb, .stride_token = c.vv.st, .stride_head = c.vv.sh};
    p->o.data = c.o, p->o.stride_batch = c.vo.sb, p->o.stride_token = c.vo.st, p->o.stride_head = c.vo.sh;

    /* options */
    mh_attn_options* o = &c.opt;
    *o = mh_attn_options_default();
    o->causal = one_in(in, 2);
    if (one_in(in, 4)) o->q_offset = range(in, 0, M + 4);
    if (one_in(in, 4)) o->window = range(in, 1, M + 2);
    for (int b = 0; b < B; b++) c.kv_len[b] = M;
    if (one_in(in, 3)) {
        for (int b = 0; b < B; b++) c.kv_len[b] = range(in, 0, M);
        o->kv_len = c.kv_len;
    }
    if (one_in(in, 3)) {
        const int per_head = one_in(in, 2), per_batch = one_in(in, 2);
        o->mask_stride_row = M + range(in, 0, 3);
        o->mask_stride_head = per_head ? (ptrdiff_t)N * o->mask_stride_row : 0;
        o->mask_stride_batch = per_batch ? (ptrdiff_t)(per_head ? H : 1) * N * o->mask_stride_row : 0;
        c.mask_elems = (size_t)((B - 1) * o->mask_stride_batch + (H - 1) * o->mask_stride_head +
                                (N - 1) * o->mask_stride_row + M);
        c.mask = xalloc(c.mask_elems * sizeof(float));
        const int inf_one_in = range(in, 2, 10);
        for (size_t i = 0; i < c.mask_elems; i++)
            c.mask[i] = rint_in(&r, 1, inf_one_in) == 1 ? -INFINITY : uniform(&r, 4.0f);
        o->mask = c.mask;
    }
    static const float caps[3] = {0.5f, 5.0f, 30.0f};
    if (one_in(in, 4)) o->softcap = caps[range(in, 0, 2)];
    float alibi_max = 0.0f;
    if (one_in(in, 4)) {
        for (int h = 0; h < H; h++) c.slopes[h] = (float)(next(&r) >> 40) / (float)(1u << 24);
        o->alibi_slopes = c.slopes, alibi_max = 1.0f;
    }
    if (one_in(in, 4)) {
        for (int h = 0; h < H; h++) c.sinks[h] = uniform(&r, 3.0f);
        o->sinks = c.sinks;
    }
    if (one_in(in, 4)) {
        c.probs_elems = (size_t)B * H * N * M;
        c.probs = xalloc(c.probs_elems * sizeof(float));
        o->probs = c.probs;
    }

    /* the valid request's workspace */
    size_t need = 0;
    mh_status st = mh_attention_workspace_size(ctx, p, o, &need);
    if (st != MH_OK) FAIL("attention workspace size of a valid problem: %s", mh_status_string(st));

    /* at most one deliberate error */
    int mut = one_in(in, 5) ? range(in, 1, AM_COUNT - 1) : AM_NONE;
    mh_attn_problem pm = *p;
    mh_attn_options om = *o;
    mh_status expect = MH_ERR_INVALID_ARGUMENT;
    const mh_context* cm = ctx;
    switch (mut) {
    case AM_BATCH: pm.batch = range(in, -2, 0); break;
    case AM_NKV: pm.n_kv = range(in, -2, 0); break;
    case AM_HEADS:
        if (H == 1) mut = AM_NONE;
        else pm.n_kv_heads = H + 1;
        break;
    case AM_DTYPE: pm.k_dtype = (mh_dtype)range(in, 3, 9); break;
    case AM_NEG_STRIDE: pm.v.stride_token = -1; break;
    case AM_O_OVERLAP: /* a dimension of extent > 1 stepping inside the rows before it */
        if (H > 1) pm.o.stride_head = Dv - 1;
        else if (N > 1) pm.o.stride_token = Dv - 1;
        else if (B > 1) pm.o.stride_batch = 0;
        else mut = AM_NONE;
        break;
    case AM_CAUSAL: om.causal = range(in, 2, 5); break;
    case AM_WINDOW: om.window = -range(in, 1, 5); break;
    case AM_QOFF: om.q_offset = -range(in, 1, 5); break;
    case AM_SOFTCAP: {
        static const float bad[3] = {-1.0f, INFINITY, NAN};
        om.softcap = bad[range(in, 0, 2)];
        break;
    }
    case AM_KVLEN: {
        static int32_t bad_len[3];
        for (int b = 0; b < B; b++) bad_len[b] = c.kv_len[b];
        const int which = range(in, 0, B - 1);
        bad_len[which] = one_in(in, 2) ? -1 : M + 1;
        om.kv_len = bad_len;
        break;
    }
    case AM_SCALE: pm.scale = one_in(in, 2) ? NAN : INFINITY; break;
    case AM_NULL_Q: pm.q.data = NULL; break;
    case AM_NULL_O: pm.o.data = NULL; break;
    case AM_MASK_STRIDE: om.mask_stride_row = -1; break;
    case AM_HUGE_STRIDE: /* the largest index does not fit */
        if (M > 1) pm.k.stride_token = PTRDIFF_MAX / 2;
        else if (B > 1) pm.k.stride_batch = PTRDIFF_MAX / 2;
        else mut = AM_NONE;
        expect = MH_ERR_SIZE_OVERFLOW;
        break;
    case AM_WS_SMALL: expect = MH_ERR_WORKSPACE_TOO_SMALL; break;
    case AM_WS_MISALIGNED: case AM_WS_NULL: case AM_NULL_CTX: cm = mut == AM_NULL_CTX ? NULL : ctx; break;
    default: break;
    }
    if (mut == AM_NONE) expect = MH_OK;

    /* request-level errors are already seen by the size query */
    if (mut != AM_NONE && mut != AM_WS_SMALL && mut != AM_WS_MISALIGNED && mut != AM_WS_NULL) {
        size_t bytes = 4242;
        st = mh_attention_workspace_size(cm, &pm, &om, &bytes);
        if (st != expect || bytes != 4242)
            FAIL("attention workspace size with error %d: %s (expected %s), *bytes %zu", mut,
                 mh_status_string(st), mh_status_string(expect), bytes);
    }

    /* the call: everything poisoned, inputs snapshotted */
    size_t ws_bytes = need + (mut == AM_WS_MISALIGNED ? 64 : 0);
    unsigned char* ws = ws_alloc(ws_bytes);
    void* ws_arg = mut == AM_WS_MISALIGNED ? ws + 16 : mut == AM_WS_NULL ? NULL : ws;
    size_t ws_len = mut == AM_WS_SMALL ? (need ? need - 1 : 0) : need;
    memset(c.o, POISON, c.vo.elems * sizeof(float));
    if (c.probs) memset(c.probs, POISON, c.probs_elems * sizeof(float));
    const size_t bq = c.vq.elems * 4, bk = c.vk.elems * dtype_size(p->k_dtype), bv = c.vv.elems * dtype_size(p->v_dtype);
    void *q0 = dup(c.q, bq), *k0 = dup(c.k, bk), *v0 = dup(c.v, bv);
    void* m0 = c.mask ? dup(c.mask, c.mask_elems * 4) : NULL;
    snprintf(where, sizeof where,
             "attention on %s: B%d N%d M%d H%d Hkv%d Dqk%d Dv%d k%d v%d causal%d win%d kvlen%d "
             "mask%d cap%g alibi%d sinks%d probs%d error%d",
             ctx_name, B, N, M, H, Hkv, Dqk, Dv, (int)p->k_dtype, (int)p->v_dtype, o->causal,
             o->window, o->kv_len != NULL, o->mask != NULL, (double)o->softcap,
             o->alibi_slopes != NULL, o->sinks != NULL, o->probs != NULL, mut);
    st = mh_attention(cm, &pm, &om, ws_arg, ws_len);
    if (st != expect) FAIL("%s: status %s, expected %s", where, mh_status_string(st), mh_status_string(expect));
    if (!same_bytes(q0, c.q, bq) || !same_bytes(k0, c.k, bk) || !same_bytes(v0, c.v, bv) ||
        (m0 && !same_bytes(m0, c.mask, c.mask_elems * 4)))
        FAIL("%s: an input was modified", where);
    if (st != MH_OK) {
        if (!all_poison(c.o, c.vo.elems * sizeof(float))) FAIL("%s: failed call wrote O", where);
        if (c.probs && !all_poison(c.probs, c.probs_elems * sizeof(float))) FAIL("%s: failed call wrote probs", where);
        if (!all_poison(ws, ws_bytes)) FAIL("%s: failed call wrote its workspace", where);
    } else {
        /* the reference: the scalar ISA on one thread */
        size_t need_ref = 0;
        if (mh_attention_workspace_size(g_ref, p, o, &need_ref) != MH_OK) FAIL("%s: reference size", where);
        unsigned char* ws_ref = ws_alloc(need_ref);
        float* o_ref = xalloc(c.vo.elems * sizeof(float));
        float* probs_ref = c.probs ? xalloc(c.probs_elems * sizeof(float)) : NULL;
        mh_attn_problem pr = *p;
        mh_attn_options orf = *o;
        pr.o.data = o_ref, orf.probs = probs_ref;
        st = mh_attention(g_ref, &pr, &orf, ws_ref, need_ref);
        if (st != MH_OK) FAIL("%s: reference: %s", where, mh_status_string(st));
        const double scale = p->scale != 0.0f ? p->scale : 1.0 / sqrt((double)Dqk);
        const double S = scale * Dqk * amp_q * amp_k + alibi_max * (2.0 * M + N + 8) + (c.mask ? 4.0 : 0.0) + 3.0;
        const double tol = 8.0 * FLT_EPSILON * amp_v * (4.0 * S + M + Dv + 32);
        const double tol_p = 8.0 * FLT_EPSILON * (4.0 * S + M + 32);
        check_attention_outputs(&c, c.o, c.probs, o_ref, probs_ref, tol, tol_p, where);
        /* and the scalar result against the double-precision oracle (tests/support/oracle.c),
         * within the same bound: catches what all ISAs would share */
        const size_t n_o = (size_t)B * N * H * Dv;
        double* want = xalloc(n_o * sizeof(double));
        double* want_p = c.probs ? xalloc(c.probs_elems * sizeof(double)) : NULL;
        oracle_attention(&pr, &orf, want, want_p);
        for (int b = 0; b < B; b++)
            for (int i = 0; i < N; i++)
                for (int h = 0; h < H; h++)
                    for (int e = 0; e < Dv; e++) {
                        const double got = o_ref[b * c.vo.sb + i * c.vo.st + h * c.vo.sh + e];
                        const double exact = want[(((size_t)b * N + i) * H + h) * Dv + e];
                        if (!(fabs(got - exact) <= tol))
                            FAIL("%s: scalar O[b%d i%d h%d d%d] = %.9g, oracle %.9g (tolerance %.3g)", where, b,
                                 i, h, e, got, exact, tol);
                    }
        for (size_t i = 0; want_p && i < c.probs_elems; i++)
            if (!(fabs((double)probs_ref[i] - want_p[i]) <= tol_p))
                FAIL("%s: scalar probs[%zu] = %.9g, oracle %.9g (tolerance %.3g)", where, i,
                     (double)probs_ref[i], want_p[i], tol_p);
        free(want), free(want_p);
        free(ws_ref), free(o_ref), free(probs_ref);
    }
    free(ws), free(q0), free(k0), free(v0), free(m0);
    free(c.q), free(c.k), free(c.v), free(c.o), free(c.mask), free(c.probs);
}

/* ------------------------------------------------------------------ layers */

enum {
    CM_NONE, CM_D_MODEL, CM_HEADS, CM_VARIANT, CM_BIAS_FLAG, CM_BIAS_PTRS, CM_SCALE, CM_SOFTCAP,
    CM_WINDOW, CM_NULL_W, CM_HEAD_DIM, CM_COUNT
};
enum {
    FM_NONE, FM_OPT_WINDOW, FM_OPT_SOFTCAP, FM_OPT_ALIBI, FM_HALF_KV, FM_NQ, FM_KVLEN, FM_WS_SMALL,
    FM_WS_NULL, FM_NULL_OUT, FM_CAUSAL, FM_COUNT
};

typedef struct layer_case {
    mh_layer_config cfg; /* as given */
    int H, Hkv, D, Dv, kdim, vdim; /* resolved */
    float *wq, *wk, *wv, *wo, *bq, *bk, *bv, *bo;
    float slopes[12], sinks[12];
} layer_case;

/* K/V weights: multiples of 1/16 with at most |1| per row, biases multiples of 1/64 below 1/2;
 * inputs are multiples of 1/4 in [-1, 1]. Every K/V value is then a multiple of 2^-6 below
 * 1.5: exact in f32, f16 and bf16, whatever the summation order. */
static void kv_weights(rng* r, float* w, int rows, int cols) {
    for (int i = 0; i < rows; i++) {
        float sum = 0.0f;
        for (int j = 0; j < cols; j++) {
            float x = rint_in(r, 0, 1) ? 0.0f : (float)rint_in(r, -2, 2) / 16.0f;
            if (sum + fabsf(x) > 1.0f) x = 0.0f;
            sum += fabsf(x);
            w[(size_t)i * cols + j] = x;
        }
    }
}

static void dyadic_bias(rng* r, float* b, int n) {
    for (int i = 0; i < n; i++) b[i] = (float)rint_in(r, -32, 32) / 64.0f;
}

static void layer_inputs(rng* r, float* x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = (float)rint_in(r, -4, 4) / 4.0f;
}

static float* new_floats(size_t n) { return xalloc(n * sizeof(float)); }

/* Score magnitude bound: |q| <= 2.5, |k| <= 1.5 per element (see the weights), ALiBi slopes
 * < 1 over distances < 2M + 40, masks and sinks within 3. */
static double layer_S(const layer_case* L, int M) {
    const double scale = L->cfg.scale != 0.0f ? L->cfg.scale : 1.0 / sqrt((double)L->D);
    return scale * L->D * 2.5 * 1.5 + (L->cfg.alibi_slopes ? 2.0 * M + 40 : 0) + 3.0;
}

/* Outputs: |v| <= 1.5 and |out| <= 0.5 + 2 * 1.5 < 4; the Q and output projections add
 * d_model and H*Dv rounding terms. */
static double layer_tol(const layer_case* L, int M) {
    return 16.0 * FLT_EPSILON * 4.0 * (4.0 * layer_S(L, M) + L->cfg.d_model + L->H * (L->Dv + L->D) + M + 64);
}

static void compare_rows(const float* got, const float* want, size_t n, double tol, const char* what) {
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i])) FAIL("%s: out[%zu] = %g is not finite", what, i, (double)got[i]);
        if (!(fabs((double)got[i] - (double)want[i]) <= tol))
            FAIL("%s: out[%zu] = %.9g, scalar reference %.9g (tolerance %.3g)", what, i, (double)got[i],
                 (double)want[i], tol);
    }
}

static void layer_forward_op(input* in, rng* r, const layer_case* L, const mh_layer* lt,
                             const mh_layer* lr, int can_self, const char* ctx_name) {
    char where[400];
    const int self = can_self && !one_in(in, 3);
    const int big = one_in(in, 6); /* several query tiles */
    const int B = range(in, 1, 3), N = big ? range(in, 13, 40) : range(in, 1, 12);
    const int M = self ? N : big ? range(in, 1, 70) : range(in, 1, 16);
    const int d = L->cfg.d_model;
    float* xq = new_floats((size_t)B * N * d);
    float* xk = self ? NULL : new_floats((size_t)B * M * L->kdim);
    float* xv = self ? NULL : new_floats((size_t)B * M * L->vdim);
    layer_inputs(r, xq, (size_t)B * N * d);
    if (!self) layer_inputs(r, xk, (size_t)B * M * L->kdim), layer_inputs(r, xv, (size_t)B * M * L->vdim);
    mh_attn_options opt = mh_attn_options_default();
    int32_t kv_len[3] = {M, M, M};
    float* mask = NULL;
    size_t probs_n = (size_t)B * L->H * N * M;
    float* probs = NULL;
    opt.causal = one_in(in, 2);
    if (one_in(in, 4)) opt.q_offset = range(in, 0, M + 3);
    if (one_in(in, 3)) {
        for (int b = 0; b < B; b++) kv_len[b] = range(in, 0, M);
        opt.kv_len = kv_len;
    }
    if (one_in(in, 4)) {
        mask = new_floats((size_t)N * M);
        for (int i = 0; i < N * M; i++) mask[i] = rint_in(r, 0, 5) == 0 ? -INFINITY : uniform(r, 2.0f);
        opt.mask = mask, opt.mask_stride_row = M;
    }
    if (one_in(in, 4)) probs = new_floats(probs_n), opt.probs = probs;
    const int use_opt = !one_in(in, 6); /* else opt = NULL: the defaults, no probabilities */
    if (!use_opt) free(probs), probs = NULL, opt.probs = NULL;
    int mut = one_in(in, 5) ? range(in, 1, FM_COUNT - 1) : FM_NONE;
    mh_forward_args a = {.batch = B, .n_q = N, .n_kv = M, .query = xq, .key = xk, .value = xv,
                         .out = new_floats((size_t)B * N * d), .opt = use_opt ? &opt : NULL};
    mh_attn_options om = opt;
    mh_forward_args am = a;
    mh_status expect = MH_ERR_INVALID_ARGUMENT;
    size_t need = 0;
    mh_status st = mh_layer_forward_workspace_size(lt, B, N, M, &need);
    if (st != MH_OK) FAIL("layer forward workspace size: %s", mh_status_string(st));
    switch (mut) {
    case FM_OPT_WINDOW: om.window = 1, am.opt = &om; break;
    case FM_OPT_SOFTCAP: om.softcap = 2.0f, am.opt = &om; break;
    case FM_OPT_ALIBI: om.alibi_slopes = L->slopes, am.opt = &om; break;
    case FM_HALF_KV: /* key without value, or a self call on a cross-attention layer */
        if (self) am.key = xq;
        else if (!can_self) am.key = am.value = NULL;
        else am.value = NULL;
        break;
    case FM_NQ: am.n_q = range(in, -1, 0); break;
    case FM_KVLEN: {
        static int32_t bad[3];
        for (int b = 0; b < B; b++) bad[b] = M;
        bad[range(in, 0, B - 1)] = M + 1;
        om.kv_len = bad, am.opt = &om;
        break;
    }
    case FM_WS_SMALL: expect = MH_ERR_WORKSPACE_TOO_SMALL; break;
    case FM_NULL_OUT: am.out = NULL; break;
    case FM_CAUSAL: om.causal = -1, am.opt = &om; break;
    default: break;
    }
    if (mut == FM_NONE) expect = MH_OK;
    unsigned char* ws = ws_alloc(need);
    float* out = a.out;
    memset(out, POISON, (size_t)B * N * d * sizeof(float));
    if (probs) memset(probs, POISON, probs_n * sizeof(float));
    snprintf(where, sizeof where, "layer forward on %s: %s B%d N%d M%d causal%d kvlen%d mask%d probs%d error%d",
             ctx_name, self ? "self" : "cross", B, N, M, opt.causal, opt.kv_len != NULL, mask != NULL,
             probs != NULL, mut);
    st = mh_layer_forward(lt, &am, mut == FM_WS_NULL ? NULL : ws, mut == FM_WS_SMALL ? (need ? need - 1 : 0) : need);
    if (mut == FM_WS_SMALL && need == 0) expect = MH_OK; /* cannot be too small */
    if (st != expect) FAIL("%s: status %s, expected %s", where, mh_status_string(st), mh_status_string(expect));
    if (st != MH_OK) {
        if (!all_poison(out, (size_t)B * N * d * sizeof(float))) FAIL("%s: failed call wrote out", where);
        if (probs && !all_poison(probs, probs_n * sizeof(float))) FAIL("%s: failed call wrote probs", where);
        if (!all_poison(ws, need)) FAIL("%s: failed call wrote its workspace", where);
        /* the reference agrees on the status */
        if (mut != FM_WS_SMALL && mut != FM_WS_NULL) {
            const mh_status sr = mh_layer_forward(lr, &am, ws, need);
            if (sr != st) FAIL("%s: reference status %s", where, mh_status_string(sr));
        }
    } else if (mut == FM_NONE || mut == FM_WS_SMALL) {
        size_t need_ref = 0;
        if (mh_layer_forward_workspace_size(lr, B, N, M, &need_ref) != MH_OK) FAIL("%s: reference size", where);
        unsigned char* ws_ref = ws_alloc(need_ref);
        float* out_ref = new_floats((size_t)B * N * d);
        float* probs_ref = probs ? new_floats(probs_n) : NULL;
        mh_attn_options orf = opt;
        orf.probs = probs_ref;
        mh_forward_args ar = a;
        ar.out = out_ref, ar.opt = use_opt ? &orf : NULL;
        st = mh_layer_forward(lr, &ar, ws_ref, need_ref);
        if (st != MH_OK) FAIL("%s: reference: %s", where, mh_status_string(st));
        compare_rows(out, out_ref, (size_t)B * N * d, layer_tol(L, M), where);
        if (probs) { /* the scores also carry the Q projection's rounding: d_model terms */
            const double tol_p = 16.0 * FLT_EPSILON * (4.0 * layer_S(L, M) + d + M + 32);
            for (size_t i = 0; i < probs_n; i++)
                if (!(fabs((double)probs[i] - (double)probs_ref[i]) <= tol_p) || !(probs[i] >= 0.0f && probs[i] <= 1.0f + 1e-6f))
                    FAIL("%s: probs[%zu] = %.9g, reference %.9g (tolerance %.3g)", where, i, (double)probs[i],
                         (double)probs_ref[i], tol_p);
        }
        free(ws_ref), free(out_ref), free(probs_ref);
    }
    free(ws), free(out), free(xq), free(xk), free(xv), free(mask), free(probs);
}

/* One decode step on both layers with their own caches; statuses and outputs must agree. */
static void layer_decode_op(input* in, rng* r, const layer_case* L, const mh_layer* lt, const mh_layer* lr,
                            mh_kv_cache* ct, mh_kv_cache* cr, int cache_batch, const char* ctx_name) {
    char where[400];
    const int d = L->cfg.d_model;
    int B = cache_batch;
    const int wrong_batch = one_in(in, 12);
    if (wrong_batch) B = cache_batch + 1 + cache_batch % 2; /* more sequences than the cache holds (fewer are legal) */
    const int n = range(in, 1, 6);
    const int len = mh_kv_cache_length(ct), cap = mh_kv_cache_capacity(ct);
    mh_status expect = wrong_batch ? MH_ERR_SHAPE_MISMATCH : len + n > cap ? MH_ERR_CACHE_FULL : MH_OK;
    int ws_small = expect == MH_OK && one_in(in, 10);
    if (ws_small) expect = MH_ERR_WORKSPACE_TOO_SMALL;
    float* x = new_floats((size_t)B * n * d);
    layer_inputs(r, x, (size_t)B * n * d);
    float* out = new_floats((size_t)B * n * d);
    float* out_ref = new_floats((size_t)B * n * d);
    size_t need = 0, need_ref = 0;
    if (mh_layer_decode_workspace_size(lt, B, n, &need) != MH_OK ||
        mh_layer_decode_workspace_size(lr, B, n, &need_ref) != MH_OK)
        FAIL("decode workspace size");
    if (ws_small && (need == 0 || need_ref == 0)) ws_small = 0, expect = MH_OK;
    unsigned char* ws = ws_alloc(need);
    unsigned char* ws_ref = ws_alloc(need_ref);
    memset(out, POISON, (size_t)B * n * d * sizeof(float));
    snprintf(where, sizeof where, "layer decode on %s: cache batch %d, length %d of %d, call batch %d n_new %d, expected %s",
             ctx_name, cache_batch, len, cap, B, n, mh_status_string(expect));
    mh_status st = mh_layer_decode(lt, ct, &(mh_decode_args){.batch = B, .n_new = n, .x = x, .out = out}, ws, ws_small ? need - 1 : need);
    if (st != expect) FAIL("%s: status %s", where, mh_status_string(st));
    mh_status sr = mh_layer_decode(lr, cr, &(mh_decode_args){.batch = B, .n_new = n, .x = x, .out = out_ref}, ws_ref, ws_small ? need_ref - 1 : need_ref);
    if (sr != st) FAIL("%s: reference status %s", where, mh_status_string(sr));
    if (st != MH_OK) {
        if (!all_poison(out, (size_t)B * n * d * sizeof(float))) FAIL("%s: failed decode wrote out", where);
        if (!all_poison(ws, need)) FAIL("%s: failed decode wrote its workspace", where);
        if (mh_kv_cache_length(ct) != len) FAIL("%s: failed decode changed the cache length", where);
    } else {
        if (mh_kv_cache_length(ct) != len + n || mh_kv_cache_length(cr) != len + n)
            FAIL("%s: cache length %d / %d after decode", where, mh_kv_cache_length(ct), mh_kv_cache_length(cr));
        compare_rows(out, out_ref, (size_t)B * n * d, layer_tol(L, cap), where);
    }
    free(x), free(out), free(out_ref), free(ws), free(ws_ref);
}

static void fuzz_layer(input* in) {
    char ctx_name[48], where[400];
    const mh_context* ctx = pick_context(in, ctx_name, sizeof ctx_name);
    rng r = {byte(in) | 0x10000u};
    r.s |= (uint64_t)byte(in) << 8;
    layer_case L;
    memset(&L, 0, sizeof L);
    mh_layer_config* c = &L.cfg;
    *c = mh_layer_config_default();
    c->variant = (mh_variant)range(in, 0, 2);
    c->d_model = one_in(in, 8) ? range(in, 41, 300) : range(in, 1, 40); /* > 256: k-blocked GEMM */
    const int Hkv = range(in, 1, 3), g = range(in, 1, 3);
    if (c->variant == MH_VARIANT_MHA) {
        L.H = L.Hkv = Hkv * g;
        c->n_kv_heads = one_in(in, 2) ? L.H : 0;
    } else if (c->variant == MH_VARIANT_GQA) {
        L.H = Hkv * g, L.Hkv = Hkv;
        c->n_kv_heads = Hkv;
    } else {
        L.H = Hkv * g, L.Hkv = 1;
        c->n_kv_heads = one_in(in, 2) ? 1 : 0;
    }
    c->n_heads = L.H;
    c->head_dim = L.D = range(in, 1, 24);
    c->head_dim_v = one_in(in, 3) ? range(in, 1, 24) : 0;
    L.Dv = c->head_dim_v ? c->head_dim_v : L.D;
    if (one_in(in, 4)) c->kdim = range(in, 1, 30), c->vdim = range(in, 1, 30);
    L.kdim = c->kdim ? c->kdim : c->d_model, L.vdim = c->vdim ? c->vdim : c->d_model;
    c->bias = one_in(in, 2);
    static const float scales[3] = {0.0f, 0.1f, 0.35f};
    c->scale = scales[range(in, 0, 2)];
    if (one_in(in, 3)) c->window = range(in, 1, 12);
    static const float caps[3] = {1.0f, 5.0f, 30.0f};
    if (one_in(in, 4)) c->softcap = caps[range(in, 0, 2)];
    if (one_in(in, 4)) {
        for (int h = 0; h < L.H; h++) L.slopes[h] = (float)(next(&r) >> 40) / (float)(1u << 24);
        c->alibi_slopes = L.slopes;
    }
    if (one_in(in, 4)) {
        for (int h = 0; h < L.H; h++) L.sinks[h] = uniform(&r, 3.0f);
        c->sinks = L.sinks;
    }
    const int hd = L.H * L.D, kvd = L.Hkv * L.D, kvdv = L.Hkv * L.Dv, hdv = L.H * L.Dv;
    L.wq = new_floats((size_t)hd * c->d_model), L.wk = new_floats((size_t)kvd * L.kdim);
    L.wv = new_floats((size_t)kvdv * L.vdim), L.wo = new_floats((size_t)c->d_model * hdv);
    fill_f32(&r, L.wq, (size_t)hd * c->d_model, 2.0f / (float)c->d_model);
    kv_weights(&r, L.wk, kvd, L.kdim);
    kv_weights(&r, L.wv, kvdv, L.vdim);
    fill_f32(&r, L.wo, (size_t)c->d_model * hdv, 2.0f / (float)hdv);
    if (c->bias) {
        L.bq = new_floats((size_t)hd), L.bk = new_floats((size_t)kvd), L.bv = new_floats((size_t)kvdv);
        L.bo = new_floats((size_t)c->d_model);
        fill_f32(&r, L.bq, (size_t)hd, 0.5f), fill_f32(&r, L.bo, (size_t)c->d_model, 0.5f);
        dyadic_bias(&r, L.bk, kvd), dyadic_bias(&r, L.bv, kvdv);
    }
    mh_layer_weights w = {.w_q = L.wq, .w_k = L.wk, .w_v = L.wv, .w_o = L.wo, .b_q = L.bq,
                          .b_k = L.bk, .b_v = L.bv, .b_o = L.bo};

    /* at most one deliberate error in the config */
    int mut = one_in(in, 8) ? range(in, 1, CM_COUNT - 1) : CM_NONE;
    mh_layer_config cm = *c;
    mh_layer_weights wm = w;
    switch (mut) {
    case CM_D_MODEL: cm.d_model = range(in, -3, 0); break;
    case CM_HEADS: cm.n_kv_heads = L.H + 1, cm.variant = MH_VARIANT_GQA; break;
    case CM_VARIANT: cm.variant = (mh_variant)range(in, 100, 200); break; /* far from any variant */
    case CM_BIAS_FLAG: cm.bias = range(in, 2, 9); break;
    case CM_BIAS_PTRS: cm.bias = !c->bias; break;
    case CM_SCALE: cm.scale = one_in(in, 2) ? NAN : -INFINITY; break;
    case CM_SOFTCAP: cm.softcap = one_in(in, 2) ? -1.0f : INFINITY; break;
    case CM_WINDOW: cm.window = -range(in, 1, 4); break;
    case CM_NULL_W: wm.w_o = NULL; break;
    case CM_HEAD_DIM: cm.head_dim = range(in, -2, 0); break;
    default: break;
    }
    mh_layer* lt = (mh_layer*)&L; /* sentinels: a failing create must leave them */
    mh_layer* lr = (mh_layer*)&L;
    const mh_status st = mh_layer_create(ctx, &cm, &wm, &lt);
    const mh_status sr = mh_layer_create(g_ref, &cm, &wm, &lr);
    snprintf(where, sizeof where, "layer create on %s: variant %d d_model %d H %d Hkv %d D %d Dv %d kdim %d vdim %d bias %d error %d",
             ctx_name, (int)cm.variant, cm.d_model, cm.n_heads, cm.n_kv_heads, cm.head_dim,
             cm.head_dim_v, cm.kdim, cm.vdim, cm.bias, mut);
    if (st != sr) FAIL("%s: status %s, reference %s", where, mh_status_string(st), mh_status_string(sr));
    if (mut != CM_NONE) {
        if (st != MH_ERR_INVALID_ARGUMENT) FAIL("%s: status %s, expected invalid argument", where, mh_status_string(st));
        if (lt != (mh_layer*)&L || lr != (mh_layer*)&L) FAIL("%s: failed create wrote *out", where);
    } else if (st != MH_OK) {
        FAIL("%s: %s", where, mh_status_string(st));
    } else {
        mh_layer_config got;
        if (mh_layer_get_config(lt, &got) != MH_OK || got.n_kv_heads != L.Hkv || got.head_dim_v != L.Dv ||
            got.kdim != L.kdim || got.vdim != L.vdim || got.scale == 0.0f)
            FAIL("%s: mh_layer_get_config did not resolve the defaults", where);
        const int can_self = L.kdim == c->d_model && L.vdim == c->d_model;
        mh_kv_cache *ct = NULL, *cr = NULL;
        int cache_batch = 0;
        if (can_self) {
            cache_batch = range(in, 1, 3);
            const int cap = range(in, 1, 32);
            const mh_dtype dt = (mh_dtype)range(in, 0, 2);
            if (mh_kv_cache_create(lt, cache_batch, cap, dt, &ct) != MH_OK ||
                mh_kv_cache_create(lr, cache_batch, cap, dt, &cr) != MH_OK)
                FAIL("%s: KV cache (batch %d, capacity %d, dtype %d)", where, cache_batch, cap, (int)dt);
        } else {
            mh_kv_cache* none = (mh_kv_cache*)&L;
            const mh_status sc = mh_kv_cache_create(lt, 1, 4, MH_DTYPE_F32, &none);
            if (sc != MH_ERR_UNSUPPORTED || none != (mh_kv_cache*)&L)
                FAIL("%s: a cross-attention layer's KV cache: %s", where, mh_status_string(sc));
        }
        const int n_ops = range(in, 1, 6);
        for (int i = 0; i < n_ops; i++) {
            const int op = range(in, 0, 7);
            if (op < 3 || !ct) {
                layer_forward_op(in, &r, &L, lt, lr, can_self, ctx_name);
            } else if (op < 7) {
                layer_decode_op(in, &r, &L, lt, lr, ct, cr, cache_batch, ctx_name);
            } else {
                mh_kv_cache_reset(ct), mh_kv_cache_reset(cr);
            }
        }
        if (ct && mh_kv_cache_length(ct) < mh_kv_cache_capacity(ct)) { /* the state after everything */
            input none = {NULL, 0};
            layer_decode_op(&none, &r, &L, lt, lr, ct, cr, cache_batch, ctx_name);
        }
        mh_kv_cache_destroy(ct);
        mh_kv_cache_destroy(cr);
        mh_layer_destroy(lt);
        mh_layer_destroy(lr);
    }
    free(L.wq), free(L.wk), free(L.wv), free(L.wo), free(L.bq), free(L.bk), free(L.bv), free(L.bo);
}

/* ------------------------------------------------------------------ entry */

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    init_contexts();
    input in = {data, size};
    if (byte(&in) & 1) fuzz_layer(&in);
    else fuzz_attention(&in);
    return 0;
}
