/* mh_attention: the core on pre-projected tensors. */
#include <math.h>
#include <string.h>

#include "api/compute.h"
#include "api/context.h"
#include "api/validate.h"
#include "core/attention.h"
#include "core/gathered.h"
#include "core/split_kv.h"
#include "util/checked.h"

mh_attn_options mh_attn_options_default(void) {
    mh_attn_options o = {0};
    o.q_offset = MH_Q_OFFSET_END;
    return o;
}

/* Zeros the output of every skipped (token, head) (its lse: -inf, no kept key) and runs the
 * others gathered in place, writing them gated. */
static void gated_attention(const mh_context* ctx, const mh_attn_problem* p,
                            const mh_attn_options* opt, void* workspace) {
    const size_t B = (size_t)p->batch, N = (size_t)p->n_q, H = (size_t)p->n_heads;
    const size_t dv = (size_t)p->head_dim_v;
    mh_ws ws = mh_ws_begin(workspace);
    mh_gathered g;
    mh_gathered_carve(ctx->kernels, ctx->num_threads, p, 1, &ws, &g);
    mh_gathered_plan(p, opt, opt->head_gates, &g);
    for (size_t r = 0; r < B * N; r++)
        for (size_t h = 0; h < H; h++)
            if (opt->head_gates[r * H + h] == 0.0f) {
                memset(p->o.data + (ptrdiff_t)(r / N) * p->o.stride_batch + (ptrdiff_t)(r % N) * p->o.stride_token +
                       (ptrdiff_t)h * p->o.stride_head, 0, dv * sizeof(float));
                if (opt->lse) opt->lse[(r / N * H + h) * N + r % N] = -INFINITY;
            }
    mh_gathered_attend(ctx->kernels, ctx->num_threads, p, opt, 1, &g, NULL, NULL);
}

/* Validates everything, resolves the call's compute mode into *compute and measures the
 * workspace. */
static mh_status prepare(const mh_context* ctx, const mh_attn_problem* p, const mh_attn_options* opt,
                         mh_compute* compute, size_t* bytes) {
    if (!mh_context_valid(ctx) || !p) return MH_ERR_INVALID_ARGUMENT;
    mh_status st = mh_validate_problem(p);
    if (st == MH_OK) st = mh_validate_options(opt, p->batch, p->n_q, p->n_kv, p->n_heads);
    *compute = opt->compute;
    if (st == MH_OK) st = mh_compute_pick(ctx->kernels->isa, ctx->compute, compute);
    if (st != MH_OK) return st;
    if (opt->probs && !mh_probs_fit(p->batch, p->n_heads, p->n_q, p->n_kv))
        return MH_ERR_SIZE_OVERFLOW;
    mh_ws ws = mh_ws_begin(NULL);
    if (opt->head_gates) {
        mh_gathered unused;
        mh_gathered_carve(ctx->kernels, ctx->num_threads, p, 1, &ws, &unused);
    } else {
        mh_core_attention_carve(ctx->kernels, ctx->num_threads, p, 1, &ws);
    }
    if (ws.overflow) return MH_ERR_SIZE_OVERFLOW;
    *bytes = ws.used;
    return MH_OK;
}

mh_status mh_attention_workspace_size(const mh_context* ctx, const mh_attn_problem* p,
                                      const mh_attn_options* opt, size_t* bytes) {
    const mh_attn_options defaults = mh_attn_options_default();
    mh_compute unused;
    if (!bytes) return MH_ERR_INVALID_ARGUMENT;
    return prepare(ctx, p, opt ? opt : &defaults, &unused, bytes);
}

/* The carving reads shapes only: no data pointer, stride, dtype or option changes a size. Every
 * part grows with batch, n_kv and the head dims; in n_q the largest layout is at max_q or at one
 * query tile (mh_core_attention_carve_upto covers both); head_gates add the gathered layout. */
mh_status mh_attention_workspace_bound(const mh_context* ctx, const mh_attn_limits* lim,
                                       size_t* bytes) {
    if (!mh_context_valid(ctx) || !lim || !bytes) return MH_ERR_INVALID_ARGUMENT;
    if (lim->max_batch <= 0 || lim->max_q <= 0 || lim->max_kv <= 0 || lim->n_heads <= 0 ||
        lim->n_kv_heads <= 0 || lim->n_heads % lim->n_kv_heads != 0 || lim->max_head_dim_qk <= 0 ||
        lim->max_head_dim_v <= 0)
        return MH_ERR_INVALID_ARGUMENT;
    mh_attn_problem p = {0};
    p.batch = lim->max_batch, p.n_q = lim->max_q, p.n_kv = lim->max_kv;
    p.n_heads = lim->n_heads, p.n_kv_heads = lim->n_kv_heads;
    p.head_dim_qk = lim->max_head_dim_qk, p.head_dim_v = lim->max_head_dim_v;
    mh_ws plain = mh_ws_begin(NULL), gated = mh_ws_begin(NULL);
    mh_gathered unused;
    mh_core_attention_carve_upto(ctx->kernels, ctx->num_threads, &p, 1, &plain);
    mh_gathered_carve(ctx->kernels, ctx->num_threads, &p, 1, &gated, &unused);
    if (plain.overflow || gated.overflow) return MH_ERR_SIZE_OVERFLOW;
    *bytes = plain.used > gated.used ? plain.used : gated.used;
    return MH_OK;
}

mh_status mh_attention(const mh_context* ctx, const mh_attn_problem* p, const mh_attn_options* opt,
                       void* workspace, size_t workspace_bytes) {
    mh_attn_options resolved = opt ? *opt : mh_attn_options_default();
    size_t need;
    mh_status st = prepare(ctx, p, &resolved, &resolved.compute, &need);
    if (st != MH_OK) return st;
    if (!workspace || ((uintptr_t)workspace & (MH_WS_ALIGN - 1))) return MH_ERR_INVALID_ARGUMENT;
    if (workspace_bytes < need) return MH_ERR_WORKSPACE_TOO_SMALL;
    opt = &resolved; /* the driver reads the resolved compute mode */
    if (opt->head_gates) {
        gated_attention(ctx, p, opt, workspace);
        return MH_OK;
    }
    mh_ws ws = mh_ws_begin(workspace);
    void* scratch = mh_core_attention_carve(ctx->kernels, ctx->num_threads, p, 1, &ws);
    mh_core_attention(ctx->kernels, ctx->num_threads, p, opt, 1, scratch);
    return MH_OK;
}

/* Parts enter the shared row merge (core/split_kv.h) as states (m = lse, l = 1, acc = o): a
 * normalised row o with log-sum-exp lse is acc / l of any state with m + log(l) = lse. */
mh_status mh_attention_merge(int n_parts, const float* const* outs, const float* const* lses, int batch,
                             int n_q, int n_heads, int head_dim_v, float* out, float* lse_out) {
    if (n_parts < 1 || !outs || !lses || batch < 1 || n_q < 1 || n_heads < 1 || head_dim_v < 1 || !out)
        return MH_ERR_INVALID_ARGUMENT;
    for (int p = 0; p < n_parts; p++) /* out may only be outs[0] (each row is read before written) */
        if (!outs[p] || !lses[p] || (p > 0 && outs[p] == out)) return MH_ERR_INVALID_ARGUMENT;
    size_t rows, bytes;
    if (!mh_mul3_size((size_t)batch, (size_t)n_q, (size_t)n_heads, &rows) ||
        !mh_mul3_size(rows, (size_t)head_dim_v, sizeof(float), &bytes) || bytes > PTRDIFF_MAX)
        return MH_ERR_SIZE_OVERFLOW;
    const size_t N = (size_t)n_q, H = (size_t)n_heads, dv = (size_t)head_dim_v;
    for (size_t r = 0; r < rows; r++) { /* out row r = (b * N + i) * H + h */
        const size_t li = (r / (N * H) * H + r % H) * N + r / H % N; /* its lse (b * H + h) * N + i */
        float* acc = out + r * dv;
        if (acc != outs[0] + r * dv) memcpy(acc, outs[0] + r * dv, dv * sizeof(float));
        float m = lses[0][li], l = m == -INFINITY ? 0.0f : 1.0f;
        for (int p = 1; p < n_parts; p++) mh_lse_merge_row(&m, &l, acc, lses[p][li], 1.0f, outs[p] + r * dv, dv);
        if (m == -INFINITY) {
            memset(acc, 0, dv * sizeof(float));
        } else {
            const float inv_l = 1.0f / l;
            for (size_t d = 0; d < dv; d++) acc[d] *= inv_l;
        }
        if (lse_out) lse_out[li] = m == -INFINITY ? m : m + logf(l);
    }
    return MH_OK;
}
