/* mh_attention: the core on pre-projected tensors. */
#include "api/context.h"
#include "api/validate.h"
#include "core/attention.h"
#include "util/checked.h"

mh_attn_options mh_attn_options_default(void) {
    mh_attn_options o = {0};
    o.q_offset = MH_Q_OFFSET_END;
    return o;
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
    mh_core_attention_carve(ctx->kernels, ctx->num_threads, p, 1, &ws);
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
    mh_ws ws = mh_ws_begin(workspace);
    void* scratch = mh_core_attention_carve(ctx->kernels, ctx->num_threads, p, 1, &ws);
    mh_core_attention(ctx->kernels, ctx->num_threads, p, opt, 1, scratch);
    return MH_OK;
}
