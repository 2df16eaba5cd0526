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

static int read_config(const st_file* f, td_config* c) {
    int ok = 1;
    const char* v = st_meta_str(f, "variant");
    const char* rot = st_meta_str(f, "rotary");
    c->variant = !v ? (mh_variant)-1 : !strcmp(v, "gqa") ? MH_VARIANT_GQA : !strcmp(v, "moh") ? MH_VARIANT_MOH
                 : !strcmp(v, "dcmha") ? MH_VARIANT_DCMHA : (mh_variant)-1;
    c->vocab = st_meta_int(f, "vocab", &ok), c->d_model = st_meta_int(f, "d_model", &ok);
    c->layers = st_meta_int(f, "layers", &ok), c->n_heads = st_meta_int(f, "n_heads", &ok);
    c->n_kv_heads = st_meta_int(f, "n_kv_heads", &ok), c->head_dim = st_meta_int(f, "head_dim", &ok);
    c->ffn = st_meta_int(f, "ffn", &ok), c->norm_eps = st_meta_float(f, "norm_eps", &ok);
    c->theta = st_meta_float(f, "theta", &ok);
    c->rotary = rot && !strcmp(rot, "half");
    if (c->variant == MH_VARIANT_MOH)
        c->moh_shared = st_meta_int(f, "moh_shared", &ok), c->moh_top_k = st_meta_int(f, "moh_top_k", &ok);
    if (c->variant == MH_VARIANT_DCMHA) {
        c->dc_rank = st_meta_int(f, "dc_rank", &ok), c->dc_hidden = st_meta_int(f, "dc_hidden", &ok);
        c->dc_groups = st_meta_int(f, "dc_groups", &ok), c->dc_static = st_meta_int(f, "dc_static", &ok);
    }
    if ((int)c->variant < 0 || !rot || (c->rotary == 0 && strcmp(rot, "none"))) ok = 0;
    if (ok && (c->vocab < 1 || c->d_model < 1 || c->layers < 1 || c->ffn < 1 || c->vocab > 65536 ||
               c->d_model > 65536 || c->ffn > 65536 || c->layers > 1024)) ok = 0;
    if (!ok) printf("FAIL: the weight file's metadata does not describe a model this program runs\n");
    return ok ? 0 : -1;
}

/* The tensor "<l>.<name>" of the given shape, or NULL (message printed). */
static const float* layer_tensor(const st_file* f, int l, const char* name, int ndim, const int64_t* shape) {
    char full[64];
    snprintf(full, sizeof full, "%d.%s", l, name);
    return st_get(f, full, ST_F32, ndim, shape);
}

/* Layer l's attention: the variant, rotary and its weights from the file. */
static mh_status create_attention(td_model* m, const mh_context* ctx, int l, mh_layer** out) {
    const td_config* c = &m->cfg;
    const st_file* f = &m->file;
    const int64_t d = c->d_model, H = c->n_heads, Hkv = c->n_kv_heads, D = c->head_dim;
    mh_layer_config cfg = mh_layer_config_default();
    cfg.variant = c->variant;
    cfg.d_model = c->d_model, cfg.n_heads = c->n_heads, cfg.n_kv_heads = c->n_kv_heads;
    cfg.head_dim = c->head_dim;
    if (c->rotary) cfg.rotary = (mh_rotary_config){.layout = MH_ROTARY_HALF, .theta = c->theta};
    mh_layer_weights w = {
        .w_q = layer_tensor(f, l, "w_q", 2, (int64_t[]){H * D, d}),
        .w_k = layer_tensor(f, l, "w_k", 2, (int64_t[]){Hkv * D, d}),
        .w_v = layer_tensor(f, l, "w_v", 2, (int64_t[]){Hkv * D, d}),
        .w_o = layer_tensor(f, l, "w_o", 2, (int64_t[]){d, H * D}),
    };
    mh_moh_config moh = mh_moh_config_default();
    mh_dcmha_config dc = mh_dcmha_config_default();
    mh_dcmha_weights dw = mh_dcmha_weights_default();
    if (c->variant == MH_VARIANT_MOH) {
        moh.router = MH_MOH_ROUTER_NORM, moh.shared_heads = c->moh_shared, moh.top_k = c->moh_top_k;
        cfg.variant_config = &moh;
    } else if (c->variant == MH_VARIANT_DCMHA) {
        const int64_t G = c->dc_groups, Hg = G > 0 ? H / G : 0, C = c->dc_hidden, R = c->dc_rank;
        dc.rank = c->dc_rank, dc.hidden = c->dc_hidden, dc.groups = c->dc_groups;
        dc.gelu = MH_GELU_ERF, dc.static_weights = c->dc_static;
        dw.w1 = layer_tensor(f, l, "dc_w1", 4, (int64_t[]){d, G, 4, C});
        dw.w2 = layer_tensor(f, l, "dc_w2", 5, (int64_t[]){G, 4, C, 2 * R, Hg});
        dw.wd = layer_tensor(f, l, "dc_wd", 4, (int64_t[]){d, G, 4, Hg});
        if (c->dc_static) {
            dw.wb_pre = layer_tensor(f, l, "dc_wb_pre", 3, (int64_t[]){G, Hg, Hg});
            dw.wb_post = layer_tensor(f, l, "dc_wb_post", 3, (int64_t[]){G, Hg, Hg});
            if (!dw.wb_pre || !dw.wb_post) return MH_ERR_INVALID_ARGUMENT;
        }
        if (!dw.w1 || !dw.w2 || !dw.wd) return MH_ERR_INVALID_ARGUMENT;
        cfg.variant_config = &dc, w.variant_weights = &dw;
    }
    if (!w.w_q || !w.w_k || !w.w_v || !w.w_o) return MH_ERR_INVALID_ARGUMENT;
    return mh_layer_create(ctx, &cfg, &w, out);
}

int td_model_load(td_model* m, const char* path, int max_batch, int max_n_new, int max_rows) {
    memset(m, 0, sizeof *m);
    if (st_open(path, &m->file) || read_config(&m->file, &m->cfg)) return -1;
    const td_config* c = &m->cfg;
    const int64_t d = c->d_model, F = c->ffn;
    m->embed = st_get(&m->file, "embed", ST_F32, 2, (int64_t[]){c->vocab, d});
    m->final_norm = st_get(&m->file, "final_norm", ST_F32, 1, (int64_t[]){d});
    m->layer = calloc((size_t)c->layers, sizeof *m->layer);
    m->max_rows = max_rows;
    m->x = malloc(sizeof(float) * (size_t)max_rows * (size_t)d);
    m->h = malloc(sizeof(float) * (size_t)max_rows * (size_t)d);
    m->a = malloc(sizeof(float) * (size_t)max_rows * (size_t)d);
    m->g = malloc(sizeof(float) * (size_t)max_rows * (size_t)F);
    m->u = malloc(sizeof(float) * (size_t)max_rows * (size_t)F);
    if (!m->embed || !m->final_norm || !m->layer || !m->x || !m->h || !m->a || !m->g || !m->u)
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
    if (st == MH_OK) printf("      ISA %s, %d layers of %s attention%s\n", mh_isa_name(mh_context_isa(ctx)),
                            c->layers, c->variant == MH_VARIANT_GQA ? "GQA" : c->variant == MH_VARIANT_MOH ? "MoH" : "DCMHA",
                            c->rotary ? " with rotary" : " without rotary");
    mh_context_destroy(ctx);
    if (st != MH_OK) return printf("FAIL: layer create: %s\n", mh_status_string(st)), -1;
    m->ws_bytes = (m->ws_bytes + 63) / 64 * 64;
    m->ws = aligned_alloc(64, m->ws_bytes ? m->ws_bytes : 64);
    return m->ws ? 0 : (printf("FAIL: workspace\n"), -1);
}

void td_model_destroy(td_model* m) {
    for (int l = 0; m->layer && l < m->cfg.layers; l++) {
        mh_kv_cache_destroy(m->layer[l].cache);
        mh_layer_destroy(m->layer[l].attn);
    }
    free(m->layer), free(m->x), free(m->h), free(m->a), free(m->g), free(m->u), free(m->ws);
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

mh_status td_model_step(td_model* m, const mh_decode_args* call, const int32_t* tokens, int rows,
                        const int* out_rows, int n_out, float* logits) {
    const td_config* c = &m->cfg;
    const int d = c->d_model, F = c->ffn;
    if (rows < 1 || rows > m->max_rows) return MH_ERR_INVALID_ARGUMENT;
    for (int o = 0; o < n_out; o++)
        if (out_rows[o] < 0 || out_rows[o] >= rows) return MH_ERR_INVALID_ARGUMENT;
    for (int r = 0; r < rows; r++) {
        if (tokens[r] < 0 || tokens[r] >= c->vocab) return MH_ERR_INVALID_ARGUMENT;
        memcpy(m->x + (size_t)r * d, m->embed + (size_t)tokens[r] * d, sizeof(float) * (size_t)d);
    }
    for (int l = 0; l < c->layers; l++) {
        const td_layer* L = &m->layer[l];
        rms_norm(m->x, L->attn_norm, rows, d, c->norm_eps, m->h);
        mh_decode_args a = *call;
        a.x = m->h, a.out = m->a;
        const mh_status st = mh_layer_decode(L->attn, L->cache, &a, m->ws, m->ws_bytes);
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
