/*
 * The tiny decoder's model (tiny_decoder_model.h). The matrix products outside attention are
 * plain C loops accumulating in double: the library does not depend on a BLAS, and at this
 * size (d_model 256, a few dozen rows per step) they take milliseconds.
 */
#include "tiny_decoder_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* y[r, o] = sum_i w[o, i] x[r, i] (+ y[r, o] when accumulate): x [rows, in], w [out, in]. */
static void matmul(const float* x, const float* w, int rows, int in, int out, int accumulate, float* y) {
    for (int r = 0; r < rows; r++)
        for (int o = 0; o < out; o++) {
            const float* xr = x + (size_t)r * in;
            const float* wo = w + (size_t)o * in;
            double s = 0;
            for (int i = 0; i < in; i++) s += (double)wo[i] * xr[i];
            float* yo = y + (size_t)r * out + o;
            *yo = accumulate ? *yo + (float)s : (float)s;
        }
}

/* y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w: x, y [rows, d]. */
static void rms_norm(const float* x, const float* w, int rows, int d, float eps, float* y) {
    for (int r = 0; r < rows; r++) {
        const float* xr = x + (size_t)r * d;
        double ss = 0;
        for (int i = 0; i < d; i++) ss += (double)xr[i] * xr[i];
        const double inv = 1.0 / sqrt(ss / d + eps);
        for (int i = 0; i < d; i++) y[(size_t)r * d + i] = (float)(xr[i] * inv * w[i]);
    }
}

/* The variant names of the metadata: gqa covers MHA and MQA (n_kv_heads H or 1). */
static mh_variant variant_of(const char* v) {
    static const struct { const char* name; mh_variant variant; } names[] = {
        {"gqa", MH_VARIANT_GQA}, {"moh", MH_VARIANT_MOH}, {"overlap", MH_VARIANT_OVERLAP},
        {"collab", MH_VARIANT_COLLAB}, {"dcmha", MH_VARIANT_DCMHA}};
    for (size_t i = 0; v && i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(v, names[i].name)) return names[i].variant;
    return (mh_variant)-1;
}

static int read_config(const st_file* f, td_config* c) {
    int ok = 1;
    const char* rot = st_meta_str(f, "rotary");
    const char* pos = st_meta_str(f, "position");
    c->variant = variant_of(st_meta_str(f, "variant"));
    c->vocab = st_meta_int(f, "vocab", &ok), c->d_model = st_meta_int(f, "d_model", &ok);
    c->layers = st_meta_int(f, "layers", &ok), c->n_heads = st_meta_int(f, "n_heads", &ok);
    c->n_kv_heads = st_meta_int(f, "n_kv_heads", &ok), c->head_dim = st_meta_int(f, "head_dim", &ok);
    c->ffn = st_meta_int(f, "ffn", &ok), c->norm_eps = st_meta_float(f, "norm_eps", &ok);
    c->theta = st_meta_float(f, "theta", &ok);
    c->rotary = rot && !strcmp(rot, "half");
    if (pos && !strcmp(pos, "learned")) c->pos_ctx = st_meta_int(f, "pos_ctx", &ok);
    else if (pos) ok = 0;
    if (c->variant == MH_VARIANT_MOH) {
        const char* router = st_meta_str(f, "moh_router");
        c->moh_router = router && !strcmp(router, "learned") ? MH_MOH_ROUTER_LEARNED : MH_MOH_ROUTER_NORM;
        if (!router || (c->moh_router == MH_MOH_ROUTER_NORM && strcmp(router, "norm"))) ok = 0;
        c->moh_shared = st_meta_int(f, "moh_shared", &ok), c->moh_top_k = st_meta_int(f, "moh_top_k", &ok);
    }
    if (c->variant == MH_VARIANT_OVERLAP) c->overlap = st_meta_int(f, "overlap", &ok);
    if (c->variant == MH_VARIANT_COLLAB) c->collab_dim = st_meta_int(f, "collab_dim", &ok);
    if (c->variant == MH_VARIANT_DCMHA) {
        c->dc_rank = st_meta_int(f, "dc_rank", &ok), c->dc_hidden = st_meta_int(f, "dc_hidden", &ok);
        c->dc_groups = st_meta_int(f, "dc_groups", &ok), c->dc_static = st_meta_int(f, "dc_static", &ok);
    }
    if ((int)c->variant < 0 || !rot || (c->rotary == 0 && strcmp(rot, "none"))) ok = 0;
    if (ok && (c->vocab < 1 || c->d_model < 1 || c->layers < 1 || c->ffn < 1 || c->vocab > 65536 ||
               c->d_model > 65536 || c->ffn > 65536 || c->layers > 1024 || c->pos_ctx < 0 || c->pos_ctx > 65536 ||
               c->collab_dim < 0 || c->collab_dim > 65536)) ok = 0;
    if (!ok) printf("FAIL: the weight file's metadata does not describe a model this program runs\n");
    return ok ? 0 : -1;
}

/* The tensor "<l>.<name>" of the given shape, or NULL (message printed). */
static const float* layer_tensor(const st_file* f, int l, const char* name, int ndim, const int64_t* shape) {
    char full[64];
    snprintf(full, sizeof full, "%d.%s", l, name);
    return st_get(f, full, ST_F32, ndim, shape);
}

/* The variant's own config and weights of layer l, read from the file (all of one layer). */
typedef struct variant_parts {
    mh_moh_config moh;
    mh_moh_weights moh_w;
    mh_overlap_config overlap;
    mh_collab_config collab;
    mh_collab_weights collab_w;
    mh_dcmha_config dc;
    mh_dcmha_weights dc_w;
} variant_parts;

/* Points cfg->variant_config and w->variant_weights at v's parts for the file's variant;
 * 0, or -1 when a tensor is missing (message printed). */
static int variant_weights(const td_model* m, int l, variant_parts* v, mh_layer_config* cfg, mh_layer_weights* w) {
    const td_config* c = &m->cfg;
    const st_file* f = &m->file;
    const int64_t d = c->d_model, H = c->n_heads;
    *v = (variant_parts){.moh = mh_moh_config_default(), .moh_w = mh_moh_weights_default(),
                         .overlap = mh_overlap_config_default(), .collab = mh_collab_config_default(),
                         .collab_w = mh_collab_weights_default(), .dc = mh_dcmha_config_default(),
                         .dc_w = mh_dcmha_weights_default()};
    if (c->variant == MH_VARIANT_MOH) {
        const int64_t hs = c->moh_shared;
        v->moh.router = c->moh_router, v->moh.shared_heads = c->moh_shared, v->moh.top_k = c->moh_top_k;
        cfg->variant_config = &v->moh;
        if (c->moh_router != MH_MOH_ROUTER_LEARNED) return 0;
        /* the weights the config uses (docs/variants.md, "MoH"): the others stay NULL */
        if (c->moh_top_k > 0) v->moh_w.w_router = layer_tensor(f, l, "moh_w_router", 2, (int64_t[]){H - hs, d});
        if (hs > 1) v->moh_w.w_shared = layer_tensor(f, l, "moh_w_shared", 2, (int64_t[]){hs, d});
        if (hs > 0 && c->moh_top_k > 0) v->moh_w.w_stage = layer_tensor(f, l, "moh_w_stage", 2, (int64_t[]){2, d});
        w->variant_weights = &v->moh_w;
        return (c->moh_top_k > 0 && !v->moh_w.w_router) || (hs > 1 && !v->moh_w.w_shared) ||
               (hs > 0 && c->moh_top_k > 0 && !v->moh_w.w_stage) ? -1 : 0;
    }
    if (c->variant == MH_VARIANT_OVERLAP) {
        v->overlap.overlap = c->overlap;
        cfg->variant_config = &v->overlap;
        return 0;
    }
    if (c->variant == MH_VARIANT_COLLAB) {
        v->collab.collab_dim = c->collab_dim;
        v->collab_w.mix = layer_tensor(f, l, "collab_mix", 2, (int64_t[]){H, c->collab_dim});
        v->collab_w.content = layer_tensor(f, l, "collab_content", 2, (int64_t[]){H, d});
        cfg->variant_config = &v->collab, w->variant_weights = &v->collab_w;
        return v->collab_w.mix && v->collab_w.content ? 0 : -1;
    }
    if (c->variant == MH_VARIANT_DCMHA) {
        const int64_t G = c->dc_groups, Hg = G > 0 ? H / G : 0, C = c->dc_hidden, R = c->dc_rank;
        v->dc.rank = c->dc_rank, v->dc.hidden = c->dc_hidden, v->dc.groups = c->dc_groups;
        v->dc.gelu = MH_GELU_ERF, v->dc.static_weights = c->dc_static;
        v->dc_w.w1 = layer_tensor(f, l, "dc_w1", 4, (int64_t[]){d, G, 4, C});
        v->dc_w.w2 = layer_tensor(f, l, "dc_w2", 5, (int64_t[]){G, 4, C, 2 * R, Hg});
        v->dc_w.wd = layer_tensor(f, l, "dc_wd", 4, (int64_t[]){d, G, 4, Hg});
        if (c->dc_static) {
            v->dc_w.wb_pre = layer_tensor(f, l, "dc_wb_pre", 3, (int64_t[]){G, Hg, Hg});
            v->dc_w.wb_post = layer_tensor(f, l, "dc_wb_post", 3, (int64_t[]){G, Hg, Hg});
            if (!v->dc_w.wb_pre || !v->dc_w.wb_post) return -1;
        }
        cfg->variant_config = &v->dc, w->variant_weights = &v->dc_w;
        return v->dc_w.w1 && v->dc_w.w2 && v->dc_w.wd ? 0 : -1;
    }
    return 0;
}

/* Layer l's attention: the variant, rotary and its weights from the file. */
static mh_status create_attention(td_model* m, const mh_context* ctx, int l, mh_layer** out) {
    const td_config* c = &m->cfg;
    const st_file* f = &m->file;
    const int64_t d = c->d_model, H = c->n_heads, Hkv = c->n_kv_heads, D = c->head_dim;
    /* CollabHead: W~_Q, W~_K [D~, d]; overlapping heads: W' [d, H (D + 2o)] */
    const int64_t qk_rows = c->variant == MH_VARIANT_COLLAB ? c->collab_dim : H * D;
    const int64_t k_rows = c->variant == MH_VARIANT_COLLAB ? c->collab_dim : Hkv * D;
    const int64_t o_cols = H * (D + 2 * (int64_t)c->overlap);
    mh_layer_config cfg = mh_layer_config_default();
    cfg.variant = c->variant;
    cfg.d_model = c->d_model, cfg.n_heads = c->n_heads, cfg.head_dim = c->head_dim;
    cfg.n_kv_heads = c->variant == MH_VARIANT_COLLAB ? 0 : c->n_kv_heads;
    if (c->rotary) cfg.rotary = (mh_rotary_config){.layout = MH_ROTARY_HALF, .theta = c->theta};
    mh_layer_weights w = {
        .w_q = layer_tensor(f, l, "w_q", 2, (int64_t[]){qk_rows, d}),
        .w_k = layer_tensor(f, l, "w_k", 2, (int64_t[]){k_rows, d}),
        .w_v = layer_tensor(f, l, "w_v", 2, (int64_t[]){Hkv * D, d}),
        .w_o = layer_tensor(f, l, "w_o", 2, (int64_t[]){d, o_cols}),
    };
    variant_parts v;
    if (variant_weights(m, l, &v, &cfg, &w) || !w.w_q || !w.w_k || !w.w_v || !w.w_o) return MH_ERR_INVALID_ARGUMENT;
    return mh_layer_create(ctx, &cfg, &w, out);
}

int td_model_load(td_model* m, const char* path, int max_batch, int max_n_new, int max_rows) {
    memset(m, 0, sizeof *m);
    if (st_open(path, &m->file) || read_config(&m->file, &m->cfg)) return -1;
    const td_config* c = &m->cfg;
    const int64_t d = c->d_model, F = c->ffn;
    m->embed = st_get(&m->file, "embed", ST_F32, 2, (int64_t[]){c->vocab, d});
    m->final_norm = st_get(&m->file, "final_norm", ST_F32, 1, (int64_t[]){d});
    if (c->pos_ctx > 0) m->pos_embed = st_get(&m->file, "pos_embed", ST_F32, 2, (int64_t[]){c->pos_ctx, d});
    m->layer = calloc((size_t)c->layers, sizeof *m->layer);
    m->max_rows = max_rows;
    m->x = malloc(sizeof(float) * (size_t)max_rows * (size_t)d);
    m->h = malloc(sizeof(float) * (size_t)max_rows * (size_t)d);
    m->a = malloc(sizeof(float) * (size_t)max_rows * (size_t)d);
    m->g = malloc(sizeof(float) * (size_t)max_rows * (size_t)F);
    m->u = malloc(sizeof(float) * (size_t)max_rows * (size_t)F);
    m->pos = malloc(sizeof(int) * (size_t)max_rows);
    m->out_rows = malloc(sizeof(int) * (size_t)max_rows);
    if (!m->embed || !m->final_norm || (c->pos_ctx > 0 && !m->pos_embed) || !m->layer || !m->x || !m->h || !m->a || !m->g || !m->u ||
        !m->pos || !m->out_rows)
        return printf("FAIL: model tensors or buffers\n"), -1;

    mh_context* ctx;
    mh_context_config cc = mh_context_config_default();
    mh_status st = mh_context_create(&cc, &ctx);
    if (st != MH_OK) return printf("FAIL: context: %s\n", mh_status_string(st)), -1;
    for (int l = 0; l < c->layers && st == MH_OK; l++) {
        td_layer* L = &m->layer[l];
        L->attn_norm = layer_tensor(&m->file, l, "attn_norm", 1, (int64_t[]){d});
        L->mlp_norm = layer_tensor(&m->file, l, "mlp_norm", 1, (int64_t[]){d});
        L->w_gate = layer_tensor(&m->file, l, "w_gate", 2, (int64_t[]){F, d});
        L->w_up = layer_tensor(&m->file, l, "w_up", 2, (int64_t[]){F, d});
        L->w_down = layer_tensor(&m->file, l, "w_down", 2, (int64_t[]){d, F});
        st = L->attn_norm && L->mlp_norm && L->w_gate && L->w_up && L->w_down
                 ? create_attention(m, ctx, l, &L->attn) : MH_ERR_INVALID_ARGUMENT;
        size_t bytes = 0;
        if (st == MH_OK) st = mh_layer_decode_workspace_size(L->attn, max_batch, max_n_new, &bytes);
        if (bytes > m->ws_bytes) m->ws_bytes = bytes;
    }
    static const char* const names[] = {"MHA", "GQA", "MQA", "MoH", "overlapping-heads", "CollabHead", "DCMHA"};
    if (st == MH_OK) printf("      ISA %s, %d layers of %s attention%s\n", mh_isa_name(mh_context_isa(ctx)),
                            c->layers, names[c->variant], c->rotary ? " with rotary" : c->pos_ctx ? " with learned positions"
                            : " without positions");
    mh_context_destroy(ctx);
    if (st != MH_OK) return printf("FAIL: layer create: %s\n", mh_status_string(st)), -1;
    return td_model_reserve_forward(m, 0, 0);
}

int td_model_reserve_forward(td_model* m, int batch, int n) {
    size_t bytes = m->ws_bytes;
    for (int l = 0; l < m->cfg.layers && batch > 0; l++) {
        size_t need = 0;
        const mh_status st = mh_layer_forward_workspace_size(m->layer[l].attn, batch, n, n, &need);
        if (st != MH_OK) return printf("FAIL: forward workspace: %s\n", mh_status_string(st)), -1;
        if (need > bytes) bytes = need;
    }
    if (batch > 0 && (size_t)batch * (size_t)n > (size_t)m->max_rows) return printf("FAIL: forward rows\n"), -1;
    bytes = (bytes + 63) / 64 * 64;
    if (m->ws && bytes <= m->ws_bytes) return 0;
    free(m->ws);
    m->ws_bytes = bytes;
    m->ws = aligned_alloc(64, m->ws_bytes ? m->ws_bytes : 64);
    return m->ws ? 0 : (printf("FAIL: workspace\n"), -1);
}

void td_model_destroy(td_model* m) {
    for (int l = 0; m->layer && l < m->cfg.layers; l++) {
        mh_kv_cache_destroy(m->layer[l].cache);
        mh_layer_destroy(m->layer[l].attn);
    }
    free(m->layer), free(m->x), free(m->h), free(m->a), free(m->g), free(m->u), free(m->ws);
    free(m->pos), free(m->out_rows);
    st_close(&m->file);
    memset(m, 0, sizeof *m);
}

int td_model_contiguous_caches(td_model* m, int max_seqs, int capacity) {
    for (int l = 0; l < m->cfg.layers; l++) {
        const mh_status st = mh_kv_cache_create(m->layer[l].attn, max_seqs, capacity, MH_DTYPE_F32, &m->layer[l].cache);
        if (st != MH_OK) return printf("FAIL: KV cache: %s\n", mh_status_string(st)), -1;
    }
    return 0;
}

/* The embedding of tokens[rows] at positions pos[rows] into m->x: the token's row, plus its
 * position's when the model has a position embedding. */
static mh_status embed(td_model* m, const int32_t* tokens, int rows) {
    const td_config* c = &m->cfg;
    const int d = c->d_model;
    for (int r = 0; r < rows; r++) {
        if (tokens[r] < 0 || tokens[r] >= c->vocab || (m->pos_embed && m->pos[r] >= c->pos_ctx))
            return MH_ERR_INVALID_ARGUMENT;
        float* x = m->x + (size_t)r * d;
        memcpy(x, m->embed + (size_t)tokens[r] * d, sizeof(float) * (size_t)d);
        for (int i = 0; m->pos_embed && i < d; i++) x[i] += m->pos_embed[(size_t)m->pos[r] * d + i];
    }
    return MH_OK;
}

/*
 * Every layer on m->x [rows, d_model], then the logits [n_out, vocab] of rows out_rows: the
 * attention is a decode on the layers' caches (call) or, with call NULL, a causal forward of
 * `batch` windows of rows / batch tokens.
 */
static mh_status run_layers(td_model* m, const mh_decode_args* call, int batch, int rows, const int* out_rows,
                            int n_out, float* logits) {
    const td_config* c = &m->cfg;
    const int d = c->d_model, F = c->ffn;
    const mh_attn_options causal = {.causal = 1, .q_offset = MH_Q_OFFSET_END};
    for (int l = 0; l < c->layers; l++) {
        const td_layer* L = &m->layer[l];
        rms_norm(m->x, L->attn_norm, rows, d, c->norm_eps, m->h);
        mh_status st;
        if (call) {
            mh_decode_args a = *call;
            a.x = m->h, a.out = m->a;
            st = mh_layer_decode(L->attn, L->cache, &a, m->ws, m->ws_bytes);
        } else {
            const mh_forward_args a = {.batch = batch, .n_q = rows / batch, .n_kv = rows / batch, .query = m->h,
                                       .out = m->a, .opt = &causal};
            st = mh_layer_forward(L->attn, &a, m->ws, m->ws_bytes);
        }
        if (st != MH_OK) return st;
        for (size_t i = 0; i < (size_t)rows * d; i++) m->x[i] += m->a[i];
        /* SwiGLU: x += W_down (silu(W_gate h) * W_up h) */
        rms_norm(m->x, L->mlp_norm, rows, d, c->norm_eps, m->h);
        matmul(m->h, L->w_gate, rows, d, F, 0, m->g);
        matmul(m->h, L->w_up, rows, d, F, 0, m->u);
        for (size_t i = 0; i < (size_t)rows * F; i++) m->g[i] = m->g[i] / (1.0f + expf(-m->g[i])) * m->u[i];
        matmul(m->g, L->w_down, rows, F, d, 1, m->x);
    }
    for (int o = 0; o < n_out; o++) { /* final norm and the tied LM head, on the rows asked for */
        rms_norm(m->x + (size_t)out_rows[o] * d, m->final_norm, 1, d, c->norm_eps, m->h);
        matmul(m->h, m->embed, 1, d, c->vocab, 0, logits + (size_t)o * c->vocab);
    }
    return MH_OK;
}

mh_status td_model_step(td_model* m, const mh_decode_args* call, const int32_t* tokens, int rows,
                        const int* out_rows, int n_out, float* logits) {
    if (rows < 1 || rows > m->max_rows) return MH_ERR_INVALID_ARGUMENT;
    for (int o = 0; o < n_out; o++)
        if (out_rows[o] < 0 || out_rows[o] >= rows) return MH_ERR_INVALID_ARGUMENT;
    /* each sequence's new rows sit at its cache positions length .. length + count - 1 */
    for (int b = 0, r = 0; b < call->batch; b++) {
        int length = 0;
        const int seq = call->seq_ids ? call->seq_ids[b] : b;
        const int count = call->n_new_seq ? call->n_new_seq[b] : call->n_new;
        if (mh_kv_cache_seq_length(m->layer[0].cache, seq, &length) != MH_OK || r + count > rows)
            return MH_ERR_INVALID_ARGUMENT;
        for (int i = 0; i < count; i++) m->pos[r++] = length + i;
    }
    const mh_status st = embed(m, tokens, rows);
    return st != MH_OK ? st : run_layers(m, call, call->batch, rows, out_rows, n_out, logits);
}

mh_status td_model_forward(td_model* m, int batch, int n, const int32_t* tokens, float* logits) {
    if (batch < 1 || n < 1 || (size_t)batch * (size_t)n > (size_t)m->max_rows) return MH_ERR_INVALID_ARGUMENT;
    const int rows = batch * n;
    for (int r = 0; r < rows; r++) m->pos[r] = r % n, m->out_rows[r] = r;
    const mh_status st = embed(m, tokens, rows);
    return st != MH_OK ? st : run_layers(m, NULL, batch, rows, m->out_rows, rows, logits);
}
