/* mh_attention: the core on pre-projected tensors. */
#include <string.h>

#include "api/context.h"
#include "api/validate.h"
#include "core/attention.h"
#include "core/gathered.h"
#include "util/checked.h"

mh_attn_options mh_attn_options_default(void) {
    mh_attn_options o = {0};
    o.q_offset = MH_Q_OFFSET_END;
    return o;
}

/* head_gates: the plan, the gathered queries and their outputs. */
typedef struct gated_buffers {
    mh_gathered g;
    float* qg; /* [B*N*H, Dqk]  gathered queries */
    float* og; /* [B*N*H, Dv]   their outputs, then gated */
} gated_buffers;

static void carve_gated(const mh_context* ctx, const mh_attn_problem* p, mh_ws* ws,
                        gated_buffers* b) {
    size_t rows = 0;
    if (!mh_mul3_size((size_t)p->batch, (size_t)p->n_q, (size_t)p->n_heads, &rows)) ws->overflow = 1;
    b->qg = mh_ws_take(ws, rows, (size_t)p->head_dim_qk, sizeof(float));
    b->og = mh_ws_take(ws, rows, (size_t)p->head_dim_v, sizeof(float));
    mh_gathered_carve(ctx->kernels, ctx->num_threads, p, 1, ws, &b->g);
}

/* Zeros the output of every skipped (token, head), runs the others gathered and writes them
 * gated. */
static void gated_attention(const mh_context* ctx, const mh_attn_problem* p,
                            const mh_attn_options* opt, void* workspace) {
    const size_t B = (size_t)p->batch, N = (size_t)p->n_q, H = (size_t)p->n_heads;
    const size_t dqk = (size_t)p->head_dim_qk, dv = (size_t)p->head_dim_v;
    mh_ws ws = mh_ws_begin(workspace);
    gated_buffers b;
    carve_gated(ctx, p, &ws, &b);
    mh_gathered_plan(p, opt, opt->head_gates, &b.g);
    const float* q = (const float*)p->q.data;
    for (size_t h = 0; h < H; h++)
        for (int64_t e = b.g.seg[h * B]; e < b.g.seg[(h + 1) * B]; e++) {
            const size_t r = (size_t)b.g.row[e];
            const float* src = q + (ptrdiff_t)(r / N) * p->q.stride_batch +
                               (ptrdiff_t)(r % N) * p->q.stride_token + (ptrdiff_t)h * p->q.stride_head;
            memcpy(b.qg + (size_t)e * dqk, src, dqk * sizeof(float));
        }
    mh_gathered_attend(ctx->kernels, ctx->num_threads, p, opt, 1, &b.g, b.qg, b.og);
    mh_gathered_scale(p, &b.g, opt->head_gates, b.og);
    for (size_t r = 0; r < B * N; r++)
        for (size_t h = 0; h < H; h++)
            if (opt->head_gates[r * H + h] == 0.0f)
                memset(p->o + (ptrdiff_t)(r / N) * p->o_stride_batch + (ptrdiff_t)(r % N) * p->o_stride_token +
                       (ptrdiff_t)h * p->o_stride_head, 0, dv * sizeof(float));
    for (size_t h = 0; h < H; h++)
        for (int64_t e = b.g.seg[h * B]; e < b.g.seg[(h + 1) * B]; e++) {
            const size_t r = (size_t)b.g.row[e];
            memcpy(p->o + (ptrdiff_t)(r / N) * p->o_stride_batch + (ptrdiff_t)(r % N) * p->o_stride_token +
                   (ptrdiff_t)h * p->o_stride_head, b.og + (size_t)e * dv, dv * sizeof(float));
        }
}

/* Validates everything and measures the workspace. */
static mh_status prepare(const mh_context* ctx, const mh_attn_problem* p, const mh_attn_options* opt,
                         size_t* bytes) {
    if (!ctx || !p) return MH_ERR_INVALID_ARGUMENT;
    mh_status st = mh_validate_problem(p);
    if (st == MH_OK) st = mh_validate_options(opt, p->batch, p->n_q, p->n_kv, p->n_heads);
    if (st != MH_OK) return st;
    if (opt->probs && !mh_probs_fit(p->batch, p->n_heads, p->n_q, p->n_kv))
        return MH_ERR_SIZE_OVERFLOW;
    mh_ws ws = mh_ws_begin(NULL);
    if (opt->head_gates) {
        gated_buffers unused;
        carve_gated(ctx, p, &ws, &unused);
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
    if (!bytes) return MH_ERR_INVALID_ARGUMENT;
    return prepare(ctx, p, opt ? opt : &defaults, bytes);
}

mh_status mh_attention(const mh_context* ctx, const mh_attn_problem* p, const mh_attn_options* opt,
                       void* workspace, size_t workspace_bytes) {
    const mh_attn_options defaults = mh_attn_options_default();
    if (!opt) opt = &defaults;
    size_t need;
    mh_status st = prepare(ctx, p, opt, &need);
    if (st != MH_OK) return st;
    if (!workspace || ((uintptr_t)workspace & (MH_WS_ALIGN - 1))) return MH_ERR_INVALID_ARGUMENT;
    if (workspace_bytes < need) return MH_ERR_WORKSPACE_TOO_SMALL;
    if (opt->head_gates) {
        gated_attention(ctx, p, opt, workspace);
        return MH_OK;
    }
    mh_ws ws = mh_ws_begin(workspace);
    void* scratch = mh_core_attention_carve(ctx->kernels, ctx->num_threads, p, 1, &ws);
    mh_core_attention(ctx->kernels, ctx->num_threads, p, opt, 1, scratch);
    return MH_OK;
}
